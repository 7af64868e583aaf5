"""Named credit-assignment methods that `credit.preset` switches on in any config.

A preset is every config field (dotted names) that its policy loss reads to assign
credit, with its value; the job equals that of the ablation arm of the same name
(`experiments/ablation_small.py`; tests/credit/test_credit_presets.py). `train/sections.job_config`
sets them over the config's values: a field the config leaves at its default takes the
preset's value, one set to a third value is an error (`conflicts`). "" (the default)
is no preset: the config's own fields. The measured comparison behind them:
docs/method.md#10-credit-presets.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping


def _method(policy_loss: str, changed: Mapping[str, Any] | None = None) -> dict[str, Any]:
  """Every field that the loss `policy_loss` reads to assign credit: at its default,
  or its value in `changed`."""
  values = {"rl.policy_loss": policy_loss, "rl.loss.negative_scale": 1.0,
            "rl.loss.positive_scale": 1.0, "rl.loss.negative_mass": 0.0,
            "rl.loss.entropy_top_fraction": 0.0}
  if policy_loss == "rcca":
    values.update({"credit.blame": "evaluator", "credit.negative_unblamed": 1.0})
  unknown = set(changed or {}) - set(values)
  if unknown:
    raise KeyError(f"{sorted(unknown)}: not fields of the {policy_loss!r} method")
  return {**values, **(changed or {})}


PRESETS: dict[str, dict[str, Any]] = {
    # The paper's RCCA (docs/method.md#6-asymmetric-effective-weights): the evaluator's
    # blame, asymmetric weights.
    "rcca": _method("rcca"),
    # RCCA whose failed responses get the negative update on blamed code only.
    "rcca_focus": _method("rcca", {"credit.negative_unblamed": 0.0}),
    # Uniform token weights.
    "grpo": _method("grpo"),
    # GRPO with every token of a negative-advantage response at weight 0.1: no blame,
    # no evaluator diagnostics.
    "grpo_neg_const": _method("grpo", {"rl.loss.negative_scale": 0.1}),
}


def conflicts(name: str, value_of: Callable[[str], Any], default_of: Callable[[str], Any]
              ) -> list[str]:
  """One line per field preset `name` sets that the config (`value_of(field)`) sets to
  a value other than both the preset's and the field's default (`default_of`)."""
  out = []
  for field, wanted in PRESETS[name].items():
    found = value_of(field)
    if found != wanted and found != default_of(field):
      out.append(f"credit.preset={name!r} sets {field}={wanted!r} but the config sets "
                 f"{found!r}: leave {field} at its default ({default_of(field)!r}) or "
                 "drop the preset")
  return out


def fields(name: str) -> Mapping[str, Any]:
  """The fields preset `name` sets ({} for "")."""
  if name == "":
    return {}
  if name not in PRESETS:
    raise ValueError(f"credit.preset={name!r}: expected \"\" or one of "
                     f"{', '.join(sorted(PRESETS))}")
  return PRESETS[name]
