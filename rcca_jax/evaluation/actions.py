"""The rubric DSL's browser actions as the rubric runner performs them.

What credit assignment and the benchmark harness must mirror of the runner
(`rubric_runner.py`): which input types an action can work on, which of them `fill`
sets by value instead of typing, which DOM events each action fires on its target, and
how a target is located and judged usable (`LOCATE_TARGET_JS`, which the agent judge of
`bench/agent_judge.py` shares).
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

# Element facts for evidence: tag, id, classes, outer HTML excerpt, position among tags.
ELEMENT_INFO_JS = """(el) => {
  const tag = el.tagName.toLowerCase();
  const same = document.getElementsByTagName(el.tagName);
  return {tag, id: el.id || null, classes: Array.from(el.classList),
          outer_html: el.outerHTML.slice(0, 300), exists: true,
          tag_index: Array.prototype.indexOf.call(same, el), tag_count: same.length};
}"""

# Locates an action target (a CSS selector; with `opts.byNumber`, digits are an element
# number of the agent judge's snapshot, `globalThis.__rccaRefs`), scrolls it into view
# and reports whether it can be used: visible (a box, not visibility:hidden; with
# `opts.useLabel` an invisible control's first label stands in), not covered at its
# centre, disabled or not. `opts.text` adds its text (innerText or value, 300 chars).
LOCATE_TARGET_JS = """(target, opts) => {
  let el;
  if (opts.byNumber && /^\\d+$/.test(target)) {
    el = (globalThis.__rccaRefs || [])[Number(target)];
    if (el && !el.isConnected) el = null;
  } else {
    try { el = document.querySelector(target); } catch (e) { return {bad: String(e.message)}; }
  }
  if (!el) return {found: false};
  const info = (%s)(el);
  const usable = (node) => {
    node.scrollIntoView({block: 'center', inline: 'center'});
    const r = node.getBoundingClientRect();
    const st = getComputedStyle(node);
    const visible = r.width > 0 && r.height > 0 && st.visibility !== 'hidden';
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    const hit = visible ? document.elementFromPoint(x, y) : null;
    const covered = visible && !(hit && (hit === node || node.contains(hit) ||
                                         (hit.control && hit.control === node)));
    return {visible, x, y, covered, cover: covered && hit ? hit.outerHTML.slice(0, 120) : null};
  };
  let state = usable(el);
  if (opts.useLabel && !state.visible && el.labels && el.labels.length) {
    state = usable(el.labels[0]);
  }
  const out = {found: true, info, ...state, disabled: el.matches(':disabled'),
               checked: !!el.checked, type: (el.type || '').toLowerCase(),
               editable: el.isContentEditable || ['INPUT', 'TEXTAREA'].includes(el.tagName),
               is_select: el.tagName === 'SELECT'};
  if (opts.text) out.text = (el.innerText || el.value || '').replace(/\\s+/g, ' ').trim().slice(0, 300);
  return out;
}""" % ELEMENT_INFO_JS


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
