"""Families that force copying (issue 54): every element id, label and number an app needs
is drawn from a pool far too large to memorize, so only the request says which.

An id is `ROLE-W1-W2`: a fixed role word (`count`, `add`, ...) and two words of
`copy_words.txt` (single tokens of the project's tokenizer that no template uses), so
copying it is induction on the role (`count-` in the request -> the next word) and then
on the first word. The words are split once: `NOVEL_WORDS` (every eighth) never appear in
a train request. Drawing for a split (`Copier`):

- `train`: ids of train words whose compound falls in the train class (crc32 mod 8 != 0);
- `dev`: ids of train words in the other class, so no dev id was ever seen whole in train;
- `novel`: ids whose words are both novel (the stricter test: tokens never trained on).

Labels are pool words too; numbers and colours come from wide ranges. Each family asks for
a graded number of copied values (optional parts drawn one by one), and `Draft.entropy`
holds what a policy that does not read the request must pay for them
(`no_copy_floor`). Apps are compact (no boilerplate beyond the document's frame).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import random
import re
import zlib
from typing import Any, Callable, Iterable, Sequence

from rcca_jax.data.families import base as b
from rcca_jax.data.families.base import esc, jsv, rule

SPLITS = ("train", "dev", "novel")
_CLASSES = 8  # compound classes; class 0 is dev's
_NOVEL_EVERY = 8  # every eighth pool word is novel
WORDS_FILE = os.path.join(os.path.dirname(__file__), "copy_words.txt")


@functools.lru_cache(maxsize=1)
def pool() -> tuple[tuple[str, ...], tuple[str, ...]]:
  """(train words, novel words) of `copy_words.txt`."""
  with open(WORDS_FILE, encoding="utf-8") as f:
    words = [w.strip() for w in f if w.strip() and not w.startswith("#")]
  novel = tuple(w for i, w in enumerate(words) if i % _NOVEL_EVERY == _NOVEL_EVERY - 1)
  return tuple(w for w in words if w not in novel), novel


def compound_class(w1: str, w2: str) -> int:
  """The class of compound `w1-w2` (0: dev's, else train's); stable across runs."""
  return zlib.crc32(f"{w1}-{w2}".encode()) % _CLASSES


@functools.lru_cache(maxsize=4)
def _compounds(split: str) -> int:
  """How many compounds a `split` id may end in (its entropy is the log of this)."""
  train, novel = pool()
  if split == "novel":
    return len(novel) ** 2
  dev = sum(compound_class(a, c) == 0 for a in train for c in train)
  return dev if split == "dev" else len(train) ** 2 - dev


class Copier:
  """Draws one request's copied values for a split and sums their entropy (nats): the
  loss a policy that ignores the request pays on their first occurrence in the app."""

  def __init__(self, rng: random.Random, split: str, words: Sequence[str] | None = None,
               ids_last: bool = False):
    if split not in SPLITS:
      raise ValueError(f"split {split!r}: expected one of {SPLITS}")
    self.rng, self.split, self.entropy = rng, split, 0.0
    self.ids_last = ids_last  # sentences name elements by role; one list of ids closes
    self.values: list[tuple[str, float]] = []  # (value as the app writes it, nats)
    self.idents: list[str] = []  # the request's ids, `ROLE-W1-W2`
    self._used: set[str] = set()
    train, novel = pool() if words is None else (tuple(words), tuple(words))
    self._words = novel if split == "novel" else train
    self._sentinel = words is not None  # template rendering: no classes, no pool

  def _fresh(self, draw: Callable[[], str]) -> str:
    for _ in range(1000):
      value = draw()
      if value not in self._used:
        self._used.add(value)
        return value
    raise RuntimeError("no distinct value left to draw")

  def ident(self, role: str) -> str:
    """`ROLE-W1-W2`, distinct from the request's other ids."""
    def draw() -> str:
      while True:
        w1, w2 = self.rng.choice(self._words), self.rng.choice(self._words)
        cls = compound_class(w1, w2)
        if (self._sentinel or self.split == "novel"
            or (cls == 0) == (self.split == "dev")):
          return f"{w1}-{w2}"
    tail = self._fresh(draw)
    if not self._sentinel:
      self._add(f"{role}-{tail}", math.log(_compounds(self.split)))
    self.idents.append(f"{role}-{tail}")
    return f"{role}-{tail}"

  def _add(self, value: str, nats: float) -> None:
    self.entropy += nats
    self.values.append((value, nats))

  def word(self) -> str:
    """A label: one pool word, distinct from the request's other labels and ids."""
    value = self._fresh(lambda: self.rng.choice(self._words))
    self._add(value, math.log(len(self._words)))
    return value

  def integer(self, lo: int, hi: int) -> int:
    value = self.rng.randint(lo, hi)
    self._add(str(value), math.log(hi - lo + 1))
    return value

  def choose(self, options: Sequence[str], k: int) -> list[str]:
    """`k` distinct options in a random order, each a copied value (its share of
    log(n! / (n - k)!), the entropy of the ordered draw)."""
    picked = self.rng.sample(list(options), k)
    for i, value in enumerate(picked):
      self._add(value, math.log(len(options) - i))
    return picked

  def colour(self) -> str:
    """`rgb(R, G, B)`, channels 0-255 (the form computed styles report)."""
    return "rgb({}, {}, {})".format(*(self.integer(0, 255) for _ in range(3)))

  def maybe(self) -> bool:
    """An optional part of the request (graded difficulty); not a copied value."""
    return self.rng.random() < 0.5


def page(title: str, css: str, body: str, script: str) -> str:
  """A compact HTML document with inline JS (and CSS, where there is any)."""
  style = f"<style>\n{css.strip()}\n</style>\n" if css.strip() else ""
  return (f"<!DOCTYPE html>\n<html>\n<head>\n<title>{esc(title)}</title>\n{style}"
          f"</head>\n<body>\n{body.strip()}\n<script>\n{script.strip()}\n</script>\n"
          "</body>\n</html>\n")


def _request(c: Copier, thing: str, *sentences: str) -> str:
  return " ".join([b.opening(c.rng, thing), *sentences])


def _ids_sentence(named: Sequence[tuple[str, str]]) -> str:
  """The closing list of an ids-last request: (id, what it names), in the app's order."""
  return "Ids: " + ", ".join(f"`#{i}` for the {what}" for i, what in named) + "."


def counter(c: Copier) -> b.Draft:
  """A display `#count-..` and a button `#add-..`; optionally subtract, reset, colour."""
  count, add = c.ident("count"), c.ident("add")
  add_label = c.word()
  sub = c.ident("sub") if c.maybe() else None
  reset = c.ident("reset") if c.maybe() else None
  colour = c.colour() if c.maybe() else None
  start, step = c.integer(-500, 500), c.integer(1, 99)
  if c.ids_last:
    parts = [f"The count starts at {start} and is shown in the display.",
             f"The add button reads \"{add_label}\" and adds {step}."]
    parts += [f"A subtract button subtracts {step}."] * bool(sub)
    parts += [f"A reset button sets the count back to {start}."] * bool(reset)
  else:
    parts = [f"The count starts at {start} and is shown in `#{count}`.",
             f"The button `#{add}` reads \"{add_label}\" and adds {step}."]
    if sub:
      parts.append(f"The button `#{sub}` subtracts {step}.")
    if reset:
      parts.append(f"The button `#{reset}` sets the count back to {start}.")
  if colour:
    parts.append(f"The count is shown in {colour}.")
  if c.ids_last:
    parts.append(_ids_sentence(
        [(count, "display"), (add, "add button")]
        + [(i, w) for i, w in ((sub, "subtract button"), (reset, "reset button")) if i]))
  rules = [
      rule("initial", "core", f"The count shows {start} on load",
           b.text(f"#{count}", "==", start)),
      rule("initial", "behavior", f"The add button reads \"{add_label}\"",
           b.text(f"#{add}", "==", add_label)),
      rule("dynamic", "core", f"Two clicks on add show {start + 2 * step}",
           b.click(f"#{add}"), b.click(f"#{add}"), b.text(f"#{count}", "==", start + 2 * step)),
  ]
  if sub:
    rules.append(rule("dynamic", "behavior", f"One click on subtract shows {start - step}",
                      b.click(f"#{sub}"), b.text(f"#{count}", "==", start - step)))
  if reset:
    rules.append(rule("dynamic", "behavior", f"Reset returns the count to {start}",
                      b.click(f"#{add}"), b.click(f"#{reset}"),
                      b.text(f"#{count}", "==", start)))
  if colour:
    rules.append(rule("initial", "rendering", f"The count is shown in {colour}",
                      b.style(f"#{count}", "color", "==", colour)))
  buttons = [(add, add_label)] + [(i, t) for i, t in ((sub, "-"), (reset, "0")) if i]
  body = "\n".join([f'<div id="{count}"></div>']
                   + [f'<button id="{i}">{esc(t)}</button>' for i, t in buttons])
  css = f"#{count} {{ font-size: 2rem; color: {colour}; }}" if colour else ""
  handlers = [(add, f"n += {step};")]
  handlers += [(i, s) for i, s in ((sub, f"n -= {step};"), (reset, f"n = {start};")) if i]
  script = "\n".join(
      [f"let n = {start};", f"const out = document.getElementById({jsv(count)});",
       "function show() { out.textContent = String(n); }"]
      + [f"document.getElementById({jsv(i)}).onclick = () => {{ {s} show(); }};"
         for i, s in handlers]
      + ["show();"])
  return b.Draft(_request(c, "a counter", *parts), tuple(rules), page("Count", css, body, script))


def char_counter(c: Copier) -> b.Draft:
  """A textarea `#box-..` and a display `#left-..` of "N / LIMIT"; optionally a send
  button disabled when empty or over, and an over-limit colour."""
  box, left = c.ident("box"), c.ident("left")
  limit = c.integer(10, 400)
  send = c.ident("send") if c.maybe() else None
  colour = c.colour() if c.maybe() else None
  if c.ids_last:
    left_, send_ = "the display", "The send button"
    parts = [f"The display shows \"N / {limit}\" where N is the number of characters "
             "typed in the textarea, updated on every input."]
  else:
    left_, send_ = f"`#{left}`", f"The button `#{send}`"
    parts = [f"The textarea is `#{box}`; `#{left}` shows \"N / {limit}\" where N is the "
             "number of characters typed, updated on every input."]
  if send:
    parts.append(f"{send_} is disabled when the text is empty or longer than {limit}.")
  if colour:
    parts.append(f"Over {limit} characters {left_} turns {colour}.")
  if c.ids_last:
    parts.append(_ids_sentence([(box, "textarea"), (left, "display")]
                               + [(send, "send button")] * bool(send)))
  phrase = "ab" * c.rng.randint(1, 4)
  over = "z" * (limit + 3)
  rules = [
      rule("initial", "core", f"The display reads \"0 / {limit}\" on load",
           b.text(f"#{left}", "==", f"0 / {limit}")),
      rule("dynamic", "core", f"Typing {len(phrase)} characters shows {len(phrase)}",
           b.fill(f"#{box}", phrase), b.text(f"#{left}", "==", f"{len(phrase)} / {limit}")),
  ]
  if send:
    rules.append(rule("initial", "behavior", "The button is disabled while empty",
                      b.js(f"document.querySelector('#{send}').disabled === true")))
    rules.append(rule("dynamic", "behavior", "The button is disabled over the limit",
                      b.fill(f"#{box}", over),
                      b.js(f"document.querySelector('#{send}').disabled === true")))
  if colour:
    rules.append(rule("dynamic", "rendering", f"Over the limit the display is {colour}",
                      b.fill(f"#{box}", over), b.style(f"#{left}", "color", "==", colour)))
  body = "\n".join([f'<textarea id="{box}"></textarea>', f'<p id="{left}"></p>']
                   + ([f'<button id="{send}">Send</button>'] if send else []))
  css = f".over {{ color: {colour}; }}" if colour else ""
  lines = [f"const box = document.getElementById({jsv(box)});",
           f"const left = document.getElementById({jsv(left)});"]
  if send:
    lines.append(f"const send = document.getElementById({jsv(send)});")
  lines += ["function update() {", "  const n = box.value.length;",
            f"  left.textContent = n + \" / {limit}\";"]
  if colour:
    lines.append(f"  left.classList.toggle(\"over\", n > {limit});")
  if send:
    lines.append(f"  send.disabled = n === 0 || n > {limit};")
  lines += ["}", "box.oninput = update;", "update();"]
  return b.Draft(_request(c, "a character counter", *parts), tuple(rules),
                 page("Characters", css, body, "\n".join(lines)))


def dark_mode(c: Copier) -> b.Draft:
  """A toggle `#theme-..` whose label switches between two pool words, adding class
  `dark` to the body; optionally the two background colours."""
  toggle = c.ident("theme")
  to_dark, to_light = c.word(), c.word()
  light = c.colour() if c.maybe() else None
  dark = c.colour() if c.maybe() else None
  button = "The toggle button" if c.ids_last else f"The button `#{toggle}`"
  parts = [f"{button} reads \"{to_dark}\"; clicking it adds the class "
           f"`dark` to the body and changes its text to \"{to_light}\". Clicking again "
           "switches back."]
  if light:
    parts.append(f"The page starts with a {light} background.")
  if dark:
    parts.append(f"In dark mode the background is {dark}.")
  if c.ids_last:
    parts.append(_ids_sentence([(toggle, "toggle button")]))
  t = f"#{toggle}"
  rules = [
      rule("initial", "behavior", f"The toggle reads \"{to_dark}\"", b.text(t, "==", to_dark)),
      rule("dynamic", "core", "Clicking the toggle adds class dark to the body",
           b.click(t), b.attr("body", "class", "contains", "dark")),
      rule("dynamic", "behavior", f"In dark mode the toggle reads \"{to_light}\"",
           b.click(t), b.text(t, "==", to_light)),
      rule("dynamic", "core", "Clicking twice restores the first label",
           b.click(t), b.click(t), b.text(t, "==", to_dark)),
  ]
  if light:
    rules.append(rule("initial", "rendering", f"The background is {light} on load",
                      b.style("body", "background-color", "==", light)))
  if dark:
    rules.append(rule("dynamic", "rendering", f"Dark mode uses a {dark} background",
                      b.click(t), b.style("body", "background-color", "==", dark)))
  css = "\n".join(([f"body {{ background: {light}; }}"] if light else [])
                  + ([f"body.dark {{ background: {dark}; }}"] if dark else []))
  script = "\n".join([
      f"const button = document.getElementById({jsv(toggle)});",
      "button.onclick = () => {",
      "  const on = document.body.classList.toggle(\"dark\");",
      f"  button.textContent = on ? {jsv(to_light)} : {jsv(to_dark)};",
      "};"])
  return b.Draft(_request(c, "a page with a dark mode toggle", *parts), tuple(rules),
                 page("Theme", css, f'<button id="{toggle}">{esc(to_dark)}</button>', script))


def reveal(c: Copier) -> b.Draft:
  """(Test family.) A button `#show-..` that shows and hides a panel `#panel-..` holding
  one pool word; optionally the panel's colour."""
  show, panel = c.ident("show"), c.ident("panel")
  word = c.word()
  colour = c.colour() if c.maybe() else None
  if c.ids_last:
    parts = [f"The panel contains the text \"{word}\" and is hidden on load.",
             "Each click on the show button shows or hides it."]
  else:
    parts = [f"The panel `#{panel}` contains the text \"{word}\" and is hidden on load.",
             f"Each click on the button `#{show}` shows or hides it."]
  if colour:
    parts.append(f"The panel text is {colour}.")
  if c.ids_last:
    parts.append(_ids_sentence([(show, "show button"), (panel, "panel")]))
  p, s = f"#{panel}", f"#{show}"
  rules = [
      rule("initial", "core", "The panel is hidden on load", b.hidden(p)),
      rule("dynamic", "core", "One click shows the panel", b.click(s), b.visible(p)),
      rule("dynamic", "behavior", f"The panel reads \"{word}\"", b.click(s),
           b.text(p, "==", word)),
      rule("dynamic", "behavior", "Two clicks hide it again", b.click(s), b.click(s),
           b.hidden(p)),
  ]
  if colour:
    rules.append(rule("dynamic", "rendering", f"The panel text is {colour}", b.click(s),
                      b.style(p, "color", "==", colour)))
  css = f"#{panel} {{ color: {colour}; }}" if colour else ""
  body = f'<button id="{show}">Show</button>\n<div id="{panel}" hidden>{esc(word)}</div>'
  script = "\n".join([f"const panel = document.getElementById({jsv(panel)});",
                      f"document.getElementById({jsv(show)}).onclick = () => {{",
                      "  panel.hidden = !panel.hidden;", "};"])
  return b.Draft(_request(c, "a show and hide panel", *parts), tuple(rules),
                 page("Panel", css, body, script))


def greeting(c: Copier) -> b.Draft:
  """(Test family.) An input `#name-..`, a button `#greet-..` and an output `#out-..`
  that shows "WORD, NAME!" with a pool word."""
  name, greet, out = c.ident("name"), c.ident("greet"), c.ident("out")
  word = c.word()
  parts = [f"The text input `#{name}` takes a name; clicking the button `#{greet}` "
           f"writes \"{word}, NAME!\" into `#{out}`, with the typed name for NAME."]
  if c.ids_last:
    parts = [f"The text input takes a name; clicking the greet button writes \"{word}, "
             "NAME!\" into the output, with the typed name for NAME.",
             _ids_sentence([(name, "text input"), (greet, "greet button"), (out, "output")])]
  typed = "ab" * c.rng.randint(1, 3)
  rules = (
      rule("initial", "core", "The output is empty on load", b.text(f"#{out}", "==", "")),
      rule("dynamic", "core", f"Greeting {typed} shows the greeting",
           b.fill(f"#{name}", typed), b.click(f"#{greet}"),
           b.text(f"#{out}", "==", f"{word}, {typed}!")),
  )
  body = (f'<input id="{name}">\n<button id="{greet}">Go</button>\n'
          f'<p id="{out}"></p>')
  script = "\n".join([
      f"document.getElementById({jsv(greet)}).onclick = () => {{",
      f"  const typed = document.getElementById({jsv(name)}).value;",
      f"  document.getElementById({jsv(out)}).textContent = {jsv(word + ', ')} + typed + \"!\";",
      "};"])
  return b.Draft(_request(c, "a greeting form", *parts), rules,
                 page("Greeting", "", body, script))


ROLES = ("count", "add", "sub", "reset", "box", "left", "send", "theme", "show", "panel",
         "name", "greet", "out")


def _echo(c: Copier, fewest: int, most: int) -> b.Draft:
  """One empty `<div>` per id of the request, in the request's order: `fewest` to `most`
  ids with the other families' roles, nothing else to write."""
  ids = [c.ident(role) for role in c.choose(ROLES, c.rng.randint(fewest, most))]
  parts = ["It shows one empty div for each id, first to last: "
           + ", ".join(f"`#{i}`" for i in ids) + "."]
  rules = (
      rule("initial", "core", "Every id has its div",
           *(b.exists(f"div#{i}") for i in ids)),
      rule("initial", "behavior", f"The page shows {len(ids)} divs",
           b.count("div", "==", len(ids))),
      rule("dynamic", "behavior", "The divs stay a moment later",
           b.wait(50), b.exists(f"div#{ids[-1]}")),
  )
  body = "\n".join(f'<div id="{i}"></div>' for i in ids)
  script = "document.title = \"Ids\";"
  return b.Draft(_request(c, "a page of empty divs", *parts), rules,
                 page("Ids", "", body, script))


def echo(c: Copier) -> b.Draft:
  """(A copying drill.) 2 to 6 ids echoed as empty divs."""
  return _echo(c, 2, 6)


def echo_short(c: Copier) -> b.Draft:
  """(The copy curriculum's first stage.) 1 or 2 ids echoed as empty divs: with few
  places to attend to, a policy trained from scratch forms the copy circuit in hundreds
  of steps where the longer drill and the apps leave it at the no-copy floor for
  thousands (experiments/results/natural_v2/README.md)."""
  return _echo(c, 1, 2)


def echo_label(c: Copier) -> b.Draft:
  """(The copy curriculum's label drill.) 1 or 2 ids, each a div holding the word the
  request quotes for it (`` `#id` reads "word" ``, as the apps state their labels): a
  label has no role before it in the app, so induction on the preceding tokens cannot
  copy it; the div's id says which quoted word it takes."""
  ids = [c.ident(role) for role in c.choose(ROLES, c.rng.randint(1, 2))]
  words = [c.word() for _ in ids]
  parts = ["It shows one div for each id, first to last, holding its text: "
           + ", ".join(f'`#{i}` reads "{w}"' for i, w in zip(ids, words)) + "."]
  rules = (
      rule("initial", "core", "Every div holds its text",
           *(b.text(f"div#{i}", "==", w) for i, w in zip(ids, words))),
      rule("initial", "behavior", f"The page shows {len(ids)} divs",
           b.count("div", "==", len(ids))),
      rule("dynamic", "behavior", "The text stays a moment later",
           b.wait(50), b.text(f"div#{ids[-1]}", "==", words[-1])),
  )
  body = "\n".join(f'<div id="{i}">{esc(w)}</div>' for i, w in zip(ids, words))
  script = "document.title = \"Words\";"
  return b.Draft(_request(c, "a page of divs", *parts), rules,
                 page("Words", "", body, script))


BUILDERS: dict[str, Callable[[Copier], b.Draft]] = {
    "counter_copy": counter, "char_counter_copy": char_counter,
    "dark_mode_copy": dark_mode, "reveal_copy": reveal, "greeting_copy": greeting,
    "echo_copy": echo, "echo_short_copy": echo_short, "echo_label_copy": echo_label}
TEST_FAMILIES = ("reveal_copy", "greeting_copy")


# The sentence that opens a request insisting on its ids. At the start, not the end: the
# SFT policies copy an id by its distance back from the answer, and six tokens appended
# to a request cut their teacher-forced copy of echo_short's first id words from 0.85 to
# 0.04 (prepended: 0.81).
INSIST = "Keep every id exactly as written."


@dataclasses.dataclass(frozen=True)
class Drafting:
  """How the copying families phrase a request and teach its reference (issue 54).

  `ids_last`: the sentences name elements by their role ("the add button") and one
  closing list states the ids in the app's order, so every id stands a short, steady
  distance before the answer (the small SFT policies copy by that distance).
  An imperfect teacher: a share `insist_share` of the requests open with `INSIST`; the
  train reference of a request that does not insist ignores its ids (every
  `ROLE-W1-W2` written as `ROLE`) with chance `loose_ignore`. Rubrics are unchanged, so
  such a reference fails every rubric that finds an element by its id; only train
  references are affected (dev and novel drafts are graded, never imitated). The
  default changes nothing."""
  insist_share: float = 0.0
  loose_ignore: float = 0.0
  ids_last: bool = False

  def __post_init__(self):
    for name in ("insist_share", "loose_ignore"):
      value = getattr(self, name)
      if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"{name}={value!r} must be a number in [0, 1]")
    if not isinstance(self.ids_last, bool):
      raise ValueError(f"ids_last={self.ids_last!r} must be True or False")

  @property
  def teaches(self) -> bool:
    return self.insist_share > 0 or self.loose_ignore > 0


def ignore_ids(reference: str, ids: Iterable[str]) -> str:
  """`reference` with each of `ids` (`ROLE-W1-W2`) written as its role alone."""
  for ident in ids:
    reference = re.sub(rf"(?<![\w-]){re.escape(ident)}(?![\w-])", ident.split("-")[0],
                       reference)
  return reference


def split_builder(build: Callable[[Copier], b.Draft]
                  ) -> Callable[..., b.Draft]:
  """`build` as a family's split-aware builder: (rng, split, drafting=None) -> Draft with
  its entropy (`Drafting`: the ids may close the request, the request may insist, a
  train reference may ignore its ids; an ignored id is no copied value, and the
  teacher's choice costs its binary entropy)."""
  def draft(rng: random.Random, split: str, drafting: Drafting | None = None) -> b.Draft:
    style = drafting or Drafting()
    copier = Copier(rng, split, ids_last=style.ids_last)
    d = build(copier)
    request, reference, values, coin = d.request, d.reference, copier.values, 0.0
    if style.teaches:
      insist = rng.random() < style.insist_share
      loose = split == "train" and not insist
      if insist:
        request = f"{INSIST} {request}"
      if loose and rng.random() < style.loose_ignore:
        reference = ignore_ids(reference, copier.idents)
        values = [(v, n) for v, n in values if v not in copier.idents]
      q = style.loose_ignore
      if loose and 0 < q < 1:  # the teacher's coin, paid by any policy
        coin = -(q * math.log(q) + (1 - q) * math.log(1 - q))
    return b.Draft(request, d.rules, reference,
                   entropy=sum(n for _, n in values) + coin, copied=tuple(values))
  draft.__name__ = build.__name__
  return draft


def template_words(rng_seed: int = 0, draws: int = 64,
                   sentinels: Sequence[str] = ("qqa", "qqb", "qqc", "qqd", "qqe", "qqf",
                                               "qqg", "qqh")) -> set[str]:
  """Every lowercase word the five families' templates write (requests and apps, with
  sentinel words for the pool): no pool word may be one of them."""
  words: set[str] = set()
  rng = random.Random(rng_seed)
  for build in BUILDERS.values():
    for i in range(draws):
      d = build(Copier(rng, "train", words=sentinels, ids_last=bool(i % 2)))
      text = "\n".join([d.request, d.reference, INSIST, *(r.text for r in d.rules)])
      words |= {w.lower() for w in re.findall(r"[A-Za-z]+", text)}
  return words - set(sentinels)


def occurrences(value: str, app: str) -> int:
  """How many times the app writes `value` whole (not inside a longer word or id)."""
  return len(re.findall(rf"(?<![\w-]){re.escape(value)}(?![\w-])", app))


def no_copy_floor(drafts: Iterable[b.Draft], count_tokens: Callable[[b.Draft], int],
                  every_occurrence: bool = False) -> float:
  """Nats per response token that a policy which writes everything but the request's
  copied values perfectly still pays: the values' entropy (first occurrence each; the
  app's later occurrences can be copied from the app itself) over the response tokens
  (`count_tokens(draft)`, the tokens the SFT loss is taken on), summed over drafts —
  the SFT loss's token mean. `every_occurrence`: a policy that copies nothing, not even
  within its own app, pays each value's entropy at every occurrence."""
  nats = tokens = 0
  for d in drafts:
    nats += (sum(n * max(1, occurrences(v, d.reference)) for v, n in d.copied)
             if every_occurrence else d.entropy)
    tokens += count_tokens(d)
  if not tokens:
    raise ValueError("no response tokens")
  return nats / tokens


def sft_token_counter(tokenizer: Any) -> Callable[[b.Draft], int]:
  """The number of loss tokens of a draft's SFT example under `tokenizer`."""
  from rcca_jax.data import chat

  def count(d: b.Draft) -> int:
    _, mask = chat.format_sft_example(tokenizer, d.request,
                                      chat.format_response(d.reference))
    return sum(mask)
  return count


def build_word_pool(tokenizer: Any, min_len: int = 3, max_len: int = 8) -> list[str]:
  """The words `copy_words.txt` holds: lowercase tokens of `tokenizer` that encode alone
  as themselves (so as one token between punctuation), `min_len`-`max_len` letters, none
  a word of the families' templates; sorted."""
  vocab = tokenizer.get_vocab()
  banned = template_words()
  return sorted(w for w in vocab
                if re.fullmatch(f"[a-z]{{{min_len},{max_len}}}", w) and w not in banned
                and tokenizer.convert_ids_to_tokens(
                    tokenizer.encode(w, add_special_tokens=False)) == [w])
