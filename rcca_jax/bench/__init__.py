"""The paper's benchmarks as their harnesses run them (docs/benchmarks.md; the commands:
docs/contracts.md#8-interfaces-of-the-second-wave).

  python -m rcca_jax.bench artifactsbench --tasks T [--responses R] --out DIR
      --judge-url URL --judge-model NAME [--workers N] [--screenshots 3] [--interval 1.0]
  python -m rcca_jax.bench miniappbench --tasks T [--responses R] --out DIR
      --judge-url URL --judge-model NAME [--workers N] [--max-turns 12]
  python -m rcca_jax.bench table DIR... [--names A,B] [--csv FILE]

`artifactsbench`: screenshots and a multimodal judge scoring 0-100 (`artifactsbench.py`);
`miniappbench`: an agent judge that uses the app, pass/fail per task (`miniappbench.py`,
`agent_judge.py`); `table`: result folders side by side (`table.py`). `--rubrics` adds
RCCA's rubric evaluator on the same tasks (`rubrics.py`). Both benchmarks share the
inputs (`inputs.py`), the browser pages (`pages.py`), the screenshots (`screenshots.py`),
the resumable grading loop (`resumable.py`), the summaries (`summary.py`) and the
retrying judge client (`evaluation/judge.py`'s `ChatClient`).
"""
