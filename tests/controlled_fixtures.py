"""A one-line counter app with one bug and one neutral site, and a shrunk trainer config
in the controlled setting on two such tasks (test_site_metrics, test_main_e2e)."""

import ml_collections

from rcca_jax.credit import sites as sites_lib
from rcca_jax.data import chat
from rcca_jax.data import tasks as tasks_lib

COMMITTED = "experiments/results/ablation_small/controlled_tasks.jsonl"

HTML = "<p id=n>1</p>\n<script>n.onclick = () => n.textContent++;</script>"


def counter_task(task_id: str = "t0", request: str = "A counter.") -> tasks_lib.Task:
  """HTML with its sites: bug0 (`++` -> `--`) and neutral0 (`1` -> `0`)."""
  reference = chat.format_response(HTML)
  bug_at = reference.index("++")
  note_at = reference.index("1</p>")
  sites = [sites_lib.Site(name="bug0", kind="bug", start=bug_at, end=bug_at + 2,
                          variant="--", rate=0.6),
           sites_lib.Site(name="neutral0", kind="neutral", start=note_at,
                          end=note_at + 1, variant="0")]
  return tasks_lib.Task(id=task_id, request=request, rubrics=(), reference=HTML,
                        extra={"controlled": {"sites": [s.to_json() for s in sites]}})


def controlled_file(path: str) -> list[str]:
  """Two short controlled tasks: the first lists its sites (a bug and a neutral one),
  the second has only the single-bug record (its site derived). Returns their ids."""
  rubrics = tasks_lib.load_tasks(COMMITTED)[0].rubrics[:1]  # unread: untrained answers
  tasks = []
  for task_id, request, listed in (("counter-90001", "A counter.", True),
                                   ("counter-90002", "A counter from one.", False)):
    task = counter_task(task_id, request)
    reference = sites_lib.reference_answer(task)
    at = reference.index("++")
    record = {"operator": "handler_op", "description": "++ -> --", "rate": 0.6,
              "response": reference.replace("++", "--"), "bug_span": [at, at + 2]}
    if listed:
      record["sites"] = task.extra["controlled"]["sites"]
    tasks.append(tasks_lib.Task(id=task_id, request=request, rubrics=rubrics,
                                reference=HTML, extra={"controlled": record}))
  tasks_lib.write_tasks(path, tasks)
  return [t.id for t in tasks]


def controlled_config(path: str) -> ml_collections.ConfigDict:
  """tiny_cpu shrunk: 1 SFT step, evaluation after SFT and after each of 1 RL step
  (greedy answers, site metrics, 2 samples per request for pass@1)."""
  from experiments import tiny_cpu  # pylint: disable=import-outside-toplevel
  config = tiny_cpu.get_config()
  config.model.update(hidden_size=32, intermediate_size=64)
  families = ("counter",)
  config.data.families = families
  config.data.setting = "controlled"
  config.data.controlled = ml_collections.ConfigDict(dict(
      families=families, tasks_per_family=1, rates=(0.25, 0.6, 0.75, 0.9),
      operators=("handler_op", "misspell_id", "throw"), draws=2,
      max_mutant_reward=0.9, seed=0, path=path))
  config.sft.update(num_steps=1, batch_size=2, max_len=128, log_every=1)
  config.rl.update(num_steps=1, group_size=2, prompts_per_step=2, max_prompt_len=64,
                   max_new_tokens=48)
  config.eval.update(enabled=True, after_sft=True, every_rl_steps=1, workers=1,
                     max_new_tokens=8, num_reports=1, samples_per_request=2)
  return config
