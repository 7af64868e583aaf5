"""Screenshots of a loaded app: PNG files under OUT_DIR/screenshots/ and the same images
as parts of a judge message."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import re
import time
from typing import Any

from rcca_jax.bench.inputs import Item
from rcca_jax.evaluation.page_session import CallTimeout, JsError, PageSession


def file_stem(item: Item) -> str:
  """A file-name-safe stem for an item's screenshots."""
  safe = re.sub(r"[^A-Za-z0-9._-]+", "_", item.task_id)[:80] or "task"
  return f"{safe}_s{item.sample_id}_{item.key[-8:]}"


@dataclasses.dataclass
class Shots:
  paths: list[str]                 # relative to the output folder
  png_b64: list[str]
  load_error: str | None = None
  errors: list[str] = dataclasses.field(default_factory=list)


async def screenshot(session: PageSession) -> str:
  """One full-viewport PNG of the page (base64), with the session's step deadline."""
  shot = await session.call(session.cdp.send("Page.captureScreenshot", {"format": "png"}),
                            "screenshot")
  return shot["data"]


def write_png(out_dir: str, rel: str, png_b64: str) -> None:
  """Writes a base64 PNG to OUT_DIR/REL (the folder is created when missing)."""
  path = os.path.join(out_dir, rel)
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "wb") as f:
    f.write(base64.b64decode(png_b64))


async def take_screenshots(session: PageSession, html: str, *, count: int, interval: float,
                           out_dir: str, stem: str) -> Shots:
  """Loads `html` on a fresh origin and takes `count` screenshots `interval` s apart,
  the first once the page has loaded and settled; files go to OUT_DIR/screenshots/."""
  await session.begin_app()
  load = await session.load(html)
  shots = Shots([], [], None if load.ok else load.reason)
  start = time.monotonic()
  for k in range(count):
    delay = start + k * interval - time.monotonic()
    if delay > 0:
      await asyncio.sleep(delay)
    try:
      data = await screenshot(session)
    except (CallTimeout, JsError) as e:
      shots.errors.append(f"screenshot {k + 1}: {e}")
      continue
    rel = f"screenshots/{stem}_{k + 1}.png"
    write_png(out_dir, rel, data)
    shots.paths.append(rel)
    shots.png_b64.append(data)
  return shots


def image_part(png_b64: str) -> dict[str, Any]:
  """An OpenAI-style image content part holding a PNG."""
  return {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png_b64}"}}
