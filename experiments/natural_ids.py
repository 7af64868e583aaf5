"""Does the policy copy the request's element ids, and do its scripts look up ids its own
HTML has? Per family, for the greedy and the sampled responses of one evaluation.

    python experiments/natural_ids.py W/eval/sft_006000_dev \
        --tasks=data/tasks/dev.jsonl,W/fresh_dev_tasks.jsonl [--json OUT]

`copied`: the share of the request's ids (each `#id` in backticks) that the app's HTML
defines (`id="..."`), averaged over responses; `consistent`: the share of apps whose
every script lookup (`getElementById("x")`, `querySelector("#x")`) names an id the HTML
defines (an app that is not consistent throws on load when it binds a handler to the
missing element). A response without an app counts as copying nothing and inconsistent.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from rcca_jax.data import draws
from rcca_jax.data import tasks as tasks_lib
from rcca_jax.evaluation import extract

_REQUEST_ID = re.compile(r"`#([\w-]+)`")
_DEFINED = re.compile(r"""\bid\s*=\s*["']([\w-]+)["']""")
_LOOKUP = re.compile(r"""getElementById\(\s*["']([\w-]+)["']\s*\)"""
                     r"""|querySelector\(\s*["']#([\w-]+)["']\s*\)""")
RESPONSE_FILES = {"greedy": "responses.jsonl", "sampled": "sampled.jsonl"}


def request_ids(request: str) -> set[str]:
  """The element ids a request names (`#id` in backticks)."""
  return set(_REQUEST_ID.findall(request))


def app_ids(response: str) -> tuple[set[str], list[str]] | None:
  """(ids the app's HTML defines, ids its scripts look up), or None without an app."""
  app = extract.extract_app(response)
  if app is None:
    return None
  return set(_DEFINED.findall(app.html)), [a or b for a, b in _LOOKUP.findall(app.html)]


def score(request: str, response: str) -> tuple[float, bool] | None:
  """(copied share, consistent) of one response; None when the request names no id."""
  wanted = request_ids(request)
  if not wanted:
    return None
  ids = app_ids(response)
  if ids is None:
    return 0.0, False
  defined, looked_up = ids
  return len(wanted & defined) / len(wanted), all(i in defined for i in looked_up)


def family_rates(requests: Mapping[str, str], rows: Iterable[Mapping[str, Any]]
                 ) -> dict[str, dict[str, float]]:
  """{family: {"n", "copied", "consistent"}} of response rows (task_id, response)."""
  by_family: dict[str, list[tuple[float, bool]]] = {}
  for row in rows:
    scored = score(requests[row["task_id"]], row["response"])
    if scored is not None:
      by_family.setdefault(draws.family_of_id(row["task_id"]), []).append(scored)
  return {family: {"n": len(v), "copied": sum(c for c, _ in v) / len(v),
                   "consistent": sum(k for _, k in v) / len(v)}
          for family, v in sorted(by_family.items())}


def evaluation_rates(eval_dir: str, requests: Mapping[str, str]
                     ) -> dict[str, dict[str, dict[str, float]]]:
  """{"greedy"|"sampled": family_rates} of an evaluation directory (sampled only when
  the evaluation drew samples)."""
  out = {}
  for kind, name in RESPONSE_FILES.items():
    path = os.path.join(eval_dir, name)
    if os.path.exists(path):
      with open(path, encoding="utf-8") as f:
        out[kind] = family_rates(requests, (json.loads(line) for line in f if line.strip()))
  return out


def main(argv: list[str]) -> None:
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("eval_dirs", nargs="+")
  parser.add_argument("--tasks", required=True, help="task files, comma-separated")
  parser.add_argument("--json", default=None, help="also write the rates here")
  args = parser.parse_args(argv)
  requests = {t.id: t.request for path in args.tasks.split(",")
              for t in tasks_lib.load_tasks(path)}
  result = {d: evaluation_rates(d, requests) for d in args.eval_dirs}
  for d, kinds in result.items():
    for kind, families in kinds.items():
      cells = ", ".join(f"{fam} copied {v['copied']:.2f} consistent {v['consistent']:.2f}"
                        f" (n {v['n']})" for fam, v in families.items())
      print(f"{d} {kind}: {cells}")
  if args.json:
    with open(args.json, "w", encoding="utf-8") as f:
      json.dump(result, f, indent=1, sort_keys=True)


if __name__ == "__main__":
  main(sys.argv[1:])
