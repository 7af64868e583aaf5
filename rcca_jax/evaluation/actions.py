"""The rubric DSL's browser actions as the rubric runner performs them.

What credit assignment and the benchmark harness must mirror of the runner
(`rubric_runner.py`): which input types an action can work on, which of them `fill`
sets by value instead of typing, and which DOM events each action fires on its target.
"""

from __future__ import annotations

from rcca_jax.base import dsl

# `fill` sets these input types by value (input and change events), types into the rest.
VALUE_SET_INPUTS = frozenset({"date", "time", "datetime-local", "month", "week", "color",
                              "range"})
# Input types `fill` can act on ("" = no type attribute).
TEXT_INPUTS = frozenset({"", "text", "search", "email", "url", "tel", "password",
                         "number"}) | VALUE_SET_INPUTS
# Tags whose click changes form state (a click elsewhere fires no change/input).
FORM_TAGS = frozenset({"input", "select", "textarea", "label", "option", "form"})

# Event types that each DSL action can fire on its target (or on an ancestor).
ACTION_EVENTS = {
    "click": ("click", "mousedown", "mouseup", "pointerdown", "pointerup", "touchstart",
              "touchend", "change", "input", "submit"),
    "hover": ("mouseover", "mouseenter", "mousemove", "pointerover", "pointerenter",
              "pointermove", "mouseout", "mouseleave"),
    "fill": ("input", "beforeinput"),    # inserted text: no key events, no blur
    "press": ("keydown", "keyup", "keypress", "input", "submit", "change"),
    "select": ("change", "input"),
    "check": ("change", "click", "input"),
}
ACTION_EVENTS["dblclick"] = ACTION_EVENTS["click"] + ("dblclick",)
ACTION_EVENTS["uncheck"] = ACTION_EVENTS["check"]


def fired_events(action: dsl.Step, tag: str | None, kind: str) -> frozenset[str]:
  """Events the rubric runner's action fires on its target (`tag`, input `kind`): a click
  changes form controls only; filling inserts text (no key events, no blur), except that
  it sets date/color/range-like inputs by value (`change`) and clears with Delete."""
  events = set(ACTION_EVENTS.get(action.verb, ()))
  if action.verb in ("click", "dblclick") and tag is not None and tag not in FORM_TAGS:
    events -= {"change", "input"}
  if action.verb == "fill":
    if kind in VALUE_SET_INPUTS:
      events.add("change")
    if not action.value:
      events |= {"keydown", "keyup"}
  return frozenset(events)
