"""ArtifactsBench as its harness runs it: screenshots and a multimodal judge, 0-100.

Per response: the app is extracted as the official harness does (`evaluation/extract.py`,
else, as there, the last `<svg>...</svg>` of the answer, shown on a blank page); a
response without one scores 0 and costs no judge request. Otherwise the app is loaded
in the contained page session and `screenshots` full-viewport PNGs are taken `interval`
seconds apart; one chat request carries the question, the checklist, the code and the
screenshots (`image_url` data URLs). The reply is `{"scores": [{"id", "score"}],
"overall": 0-100}` (bare or fenced), or the official "Overall Score: N" phrasing; a reply
that does not parse is asked again `parse_retries` times, then the response is counted
as unparseable (0 in `overall`, left out of `official_overall` as the official code does).
"""

from __future__ import annotations

import collections
import dataclasses
import re
from typing import Any, Sequence

from rcca_jax.bench import screenshots
from rcca_jax.bench import summary as summary_lib
from rcca_jax.bench.inputs import Item
from rcca_jax.bench.pages import Pages
from rcca_jax.data import bench_common
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import extract as extract_lib
from rcca_jax.evaluation import judge as judge_lib

_SVG = re.compile(r"<svg[\s>].*?</svg\s*>", re.IGNORECASE | re.DOTALL)
_OVERALL = re.compile(r"overall[\s_-]*score\W{0,12}?(\d{1,3}(?:\.\d+)?)", re.IGNORECASE)
METRICS = ("overall", "official_overall")

_INSTRUCTIONS = """You are a strict expert reviewer of generated interactive web artifacts.
You get the user's request, a checklist of {n} criteria, the complete code of the artifact
and {shots} screenshot(s) of it rendered in a browser, taken {interval:g} s apart (so
animations and timed behaviour show). Judge what the screenshots show and what the code
does; do not reward claims the artifact does not deliver.
Score every checklist item from 0 to 10 (its maximum), then give an overall score from 0
to 100. Answer with one JSON object only:
{{"scores": [{{"id": <item id>, "score": <0-10>}}, ...], "overall": <0-100>}}"""


@dataclasses.dataclass(frozen=True)
class Options:
  screenshots: int = 3
  interval: float = 1.0
  parse_retries: int = 1           # extra requests after an unparseable reply
  max_code_chars: int = 60000      # the code sent to the judge is cut to this length


@dataclasses.dataclass(frozen=True)
class Reply:
  overall: float
  item_scores: list[dict[str, Any]]


def checklist(task: tasks_lib.Task) -> list[dict[str, Any]]:
  """The task's checklist: one item per rubric (id, text, max score)."""
  return [{"id": r.id, "text": r.text, "max_score": r.extra.get("max_score", 10)}
          for r in task.rubrics]


def app_html(response: str) -> str | None:
  """The app to render: the extracted HTML app, else the answer's last SVG on a page."""
  extraction = extract_lib.extract_app(response)
  if extraction is not None:
    return extraction.html
  svgs = _SVG.findall(bench_common.strip_think(response))
  if not svgs:
    return None
  return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"></head><body>\n'
          f"{svgs[-1]}\n</body></html>")


def build_messages(task: tasks_lib.Task, code: str, png_b64: Sequence[str],
                   opts: Options) -> list[dict[str, Any]]:
  """The judge request's messages: instructions, then the question, the checklist, the
  code and the screenshots in one user message."""
  if len(code) > opts.max_code_chars:
    code = code[:opts.max_code_chars] + "\n<!-- (cut) -->"
  items = "\n".join(f"- id {c['id']} (max {c['max_score']}): {c['text']}"
                    for c in checklist(task))
  text = (f"## User request\n{task.request}\n\n## Checklist\n{items}\n\n"
          f"## Code\n```html\n{code}\n```\n\n## Screenshots\n"
          + ("(follow)" if png_b64 else "(none could be taken)"))
  system = _INSTRUCTIONS.format(n=len(task.rubrics), shots=len(png_b64),
                                interval=opts.interval)
  return [{"role": "system", "content": system},
          {"role": "user", "content": [{"type": "text", "text": text},
                                       *(screenshots.image_part(b) for b in png_b64)]}]


def _number(value: Any) -> float | None:
  if isinstance(value, bool):
    return None
  if isinstance(value, (int, float)):
    return float(value)
  if isinstance(value, str):
    try:
      return float(value.strip().split("/")[0])
    except ValueError:
      return None
  return None


def _item_scores(raw: Any) -> list[dict[str, Any]]:
  out = []
  if isinstance(raw, dict):  # {"1": 7, ...}
    raw = [{"id": k, "score": v} for k, v in raw.items()]
  for entry in raw if isinstance(raw, list) else []:
    if isinstance(entry, dict) and (score := _number(entry.get("score"))) is not None:
      out.append({"id": str(entry.get("id", "")), "score": min(max(score, 0.0), 10.0)})
  return out


def parse_reply(text: str, max_total: float = 0.0) -> Reply | None:
  """The judge's scores, or None when the reply has no usable overall score.

  A JSON object with `overall` (0-100) and/or `scores` is used first (with only item
  scores, overall = their sum over `max_total`, as a percentage); else the last
  "Overall Score: N" in the text.
  """
  for obj in judge_lib.json_dicts(text):
    scores = _item_scores(obj.get("scores"))
    overall = _number(obj.get("overall", obj.get("Overall Score", obj.get("overall_score"))))
    if overall is None and scores and max_total > 0:
      overall = 100.0 * sum(s["score"] for s in scores) / max_total
    if overall is not None:
      return Reply(min(max(overall, 0.0), 100.0), scores)
  found = _OVERALL.findall(text)
  if found:
    return Reply(min(max(float(found[-1]), 0.0), 100.0), [])
  return None


async def render_request(pages: Pages, item: Item, *, opts: Options,
                         out_dir: str) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
  """The record so far and the judge messages (None: no app, the record is final)."""
  record = item.base_record()
  html = app_html(item.response)
  if html is None:
    return {**record, "score": 0.0, "status": "no_app", "item_scores": [],
            "screenshots": [], "usage": {}}, None
  async with pages.page() as session:
    shots = await screenshots.take_screenshots(session, html, count=opts.screenshots,
                                               interval=opts.interval, out_dir=out_dir,
                                               stem=screenshots.file_stem(item))
  record.update(screenshots=shots.paths)
  if shots.load_error or shots.errors:
    record["render_errors"] = ([shots.load_error] if shots.load_error else []) + shots.errors
  return record, build_messages(item.task, html, shots.png_b64, opts)


async def grade(pages: Pages, item: Item, *, judge: judge_lib.ChatClient,
                opts: Options, out_dir: str) -> dict[str, Any]:
  """One response's record (see the module docstring)."""
  record, messages = await render_request(pages, item, opts=opts, out_dir=out_dir)
  if messages is None:
    return record
  max_total = float(sum(c["max_score"] for c in checklist(item.task)))
  usage: collections.Counter = collections.Counter()
  text = ""
  for _ in range(opts.parse_retries + 1):
    try:
      message = await judge.complete_async(judge.payload(messages), usage)
    except judge_lib.JudgeError as e:
      return {**record, "usage": dict(usage), "score": None, "status": "judge_error",
              "error": str(e)}
    text = message.get("content") or ""
    reply = parse_reply(text, max_total)
    if reply is not None:
      return {**record, "usage": dict(usage), "score": reply.overall, "status": "scored",
              "item_scores": reply.item_scores}
  return {**record, "usage": dict(usage), "score": 0.0, "status": "unparseable",
          "item_scores": [], "reply": text[:1000]}


def summarize(records: Sequence[dict[str, Any]], *, judge_model: str) -> dict[str, Any]:
  """`overall` (unparseable = 0), `official_overall` (unparseable left out), per category
  and difficulty, counts and judge usage. Ungraded records (bad input, judge errors)
  are counted but in no mean."""
  graded = [r for r in records if r["status"] in ("scored", "no_app", "unparseable")]
  official = [r for r in graded if r["status"] != "unparseable"]

  def value(r):
    return {"score": float(r["score"])}

  return {"benchmark": "artifactsbench", "judge_model": judge_model,
          "overall": summary_lib.mean([r["score"] for r in graded]),
          "official_overall": summary_lib.mean([r["score"] for r in official]),
          "by_category": summary_lib.grouped(graded, "category", value),
          "by_difficulty": summary_lib.grouped(graded, "difficulty", value),
          "counts": summary_lib.counts(records), "usage": summary_lib.usage_total(records)}
