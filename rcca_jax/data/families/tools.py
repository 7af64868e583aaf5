"""Tool families: colour picker, stopwatch, countdown timer, image-free carousel.

Timer checks use generous windows (`wait` plus regular-expression or threshold checks)
so that they hold however long the evaluator's own steps take.
"""

from __future__ import annotations

import random

from rcca_jax.data.families import base as b
from rcca_jax.data.families.base import esc, jsv, rule


def color_picker(rng: random.Random) -> b.Draft:
  n = rng.randint(4, 6)
  swatches = b.pick(rng, b.COLORS, n)
  d, k = rng.sample(range(n), 2)
  upper = rng.random() < 0.5
  fmt = lambda h: h.upper() if upper else h.lower()
  prev_id = b.pick(rng, ("preview", "swatch-preview", "chosen", "sample"))
  reset_id = b.pick(rng, ("reset", "default", "restore"))
  request = " ".join([
      b.opening(rng, f"a colour picker with {n} swatches"),
      "The swatches, in order: " + ", ".join(f"{nm} {hx}" for nm, hx in swatches) + ".",
      "Each swatch is a button with class `swatch`, a `data-color` attribute holding its hex "
      "code and that colour as background.",
      f"Clicking a swatch gives it class `selected` (only one at a time), paints `#{prev_id}` "
      f"in that colour and shows the code in `#hex` in {'upper' if upper else 'lower'} case "
      f"(like \"{fmt(swatches[d][1])}\").",
      f"{swatches[d][0].capitalize()} is selected on load, and `#{reset_id}` goes back to it.",
  ])
  P = f"#{prev_id}"
  sw = lambda i: f".swatch[data-color='{swatches[i][1]}']"
  rules = (
      rule("initial", "core", f"{n} swatches, {swatches[d][0]} preview on load",
           b.count(".swatch", "==", n),
           b.style(P, "background-color", "==", b.rgb(swatches[d][1]))),
      rule("initial", "behavior", f"The code reads {fmt(swatches[d][1])} on load",
           b.text("#hex", "==", fmt(swatches[d][1]))),
      rule("dynamic", "core", f"Clicking {swatches[k][0]} paints the preview",
           b.click(sw(k)), b.style(P, "background-color", "==", b.rgb(swatches[k][1])),
           b.text("#hex", "==", fmt(swatches[k][1]))),
      rule("dynamic", "behavior", "Only the clicked swatch is selected",
           b.click(sw(k)), b.count(".swatch.selected", "==", 1),
           b.attr(".swatch.selected", "data-color", "==", swatches[k][1])),
      rule("dynamic", "behavior", f"Reset returns to {swatches[d][0]}",
           b.click(sw(k)), b.click(f"#{reset_id}"), b.text("#hex", "==", fmt(swatches[d][1])),
           b.style(P, "background-color", "==", b.rgb(swatches[d][1]))),
      rule("initial", "rendering", "Swatches are painted in their colour",
           b.style(sw(k), "background-color", "==", b.rgb(swatches[k][1]))),
  )
  buttons = "\n".join(
      f'  <button class="swatch" data-color="{hx}" title="{nm}" style="background: {hx}"></button>'
      for nm, hx in swatches)
  body = f"""
<div class="swatches">
{buttons}
</div>
<div id="{prev_id}" class="preview"></div>
<p>Selected: <code id="hex"></code></p>
<button id="{reset_id}">Reset</button>"""
  css = (".swatch { width: 2.5rem; height: 2.5rem; border: 2px solid transparent; }\n"
         ".swatch.selected { border-color: #111; }\n"
         ".preview { width: 8rem; height: 5rem; border-radius: 8px; margin: 1rem 0; }")
  case = "toUpperCase" if upper else "toLowerCase"
  script = f"""
const DEFAULT = {jsv(swatches[d][1])};
const swatches = document.querySelectorAll(".swatch");
function choose(color) {{
  swatches.forEach((s) => s.classList.toggle("selected", s.dataset.color === color));
  document.getElementById({jsv(prev_id)}).style.backgroundColor = color;
  document.getElementById("hex").textContent = color.{case}();
}}
swatches.forEach((s) => s.addEventListener("click", () => choose(s.dataset.color)));
document.getElementById({jsv(reset_id)}).addEventListener("click", () => choose(DEFAULT));
choose(DEFAULT);"""
  return b.Draft(request, rules, b.page("Colour picker", css, body, script))


def stopwatch(rng: random.Random) -> b.Draft:
  start_id, stop_id, reset_id, lap_id = b.pick(rng, (
      ("start", "stop", "reset", "lap"), ("go", "pause", "clear", "split"),
      ("start-btn", "stop-btn", "reset-btn", "lap-btn")))
  time_id = b.pick(rng, ("time", "display", "elapsed", "clock"))
  tenths = rng.random() < 0.5
  zero = "0.0" if tenths else "00:00"
  tick = rng.choice((50, 100))
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, "a stopwatch"),
      f"`#{time_id}` shows the elapsed time " +
      ("in seconds with one decimal (\"0.0\", \"1.3\", ...)" if tenths else
       "as MM:SS with whole seconds (\"00:00\", \"00:07\", ...)") +
      f", in {b.article(cname)} {cname} ({chex}) monospace font, updating at least every {tick} ms.",
      f"Buttons: `#{start_id}` starts (or resumes), `#{stop_id}` pauses, `#{reset_id}` stops, "
      f"clears the laps and shows \"{zero}\" again, and `#{lap_id}` appends the current time "
      "as an `<li>` to "
      "`#laps` while running.",
      "Measure time with `Date.now()` or `performance.now()`, not by counting ticks.",
  ])
  T = f"#{time_id}"
  running = (b.number(T, ">=", 1) if tenths else b.text(T, "matches", "^00:0[1-4]$"))
  paused = (b.number(T, "<", 2.5) if tenths else b.text(T, "matches", "^00:0[12]$"))
  rules = (
      rule("initial", "core", f"The display shows {zero} on load", b.text(T, "==", zero)),
      rule("dynamic", "core", "Start makes the time advance",
           b.click(f"#{start_id}"), b.wait(1300), running),
      rule("dynamic", "behavior", "Stop freezes the time",
           b.click(f"#{start_id}"), b.wait(1100), b.click(f"#{stop_id}"), b.wait(2000), paused),
      rule("dynamic", "behavior", f"Reset shows {zero} and clears the laps",
           b.click(f"#{start_id}"), b.wait(1200), b.click(f"#{lap_id}"),
           b.click(f"#{reset_id}"), b.wait(300), b.text(T, "==", zero),
           b.count("#laps li", "==", 0)),
      rule("dynamic", "behavior", "Lap records one entry per click",
           b.click(f"#{start_id}"), b.click(f"#{lap_id}"), b.click(f"#{lap_id}"),
           b.count("#laps li", "==", 2)),
      rule("initial", "rendering", f"The time uses {b.article(cname)} {cname} monospace font",
           b.style(T, "font-family", "contains", "monospace"),
           b.style(T, "color", "==", b.rgb(chex))),
  )
  body = f"""
<div id="{time_id}" class="time"></div>
<button id="{start_id}">Start</button>
<button id="{stop_id}">Stop</button>
<button id="{reset_id}">Reset</button>
<button id="{lap_id}">Lap</button>
<ol id="laps"></ol>"""
  css = f".time {{ font-family: monospace; font-size: 2.5rem; color: {chex}; }}"
  fmt = ("(ms / 1000).toFixed(1)" if tenths else
         "String(Math.floor(ms / 60000)).padStart(2, \"0\") + \":\" + "
         "String(Math.floor(ms / 1000) % 60).padStart(2, \"0\")")
  script = f"""
const display = document.getElementById({jsv(time_id)});
let elapsed = 0;
let startedAt = null;
let timer = null;
function current() {{
  return elapsed + (startedAt === null ? 0 : Date.now() - startedAt);
}}
function format(ms) {{
  return {fmt};
}}
function render() {{
  display.textContent = format(current());
}}
document.getElementById({jsv(start_id)}).addEventListener("click", () => {{
  if (startedAt !== null) return;
  startedAt = Date.now();
  timer = setInterval(render, {tick});
}});
document.getElementById({jsv(stop_id)}).addEventListener("click", () => {{
  if (startedAt === null) return;
  elapsed = current();
  startedAt = null;
  clearInterval(timer);
  render();
}});
document.getElementById({jsv(reset_id)}).addEventListener("click", () => {{
  clearInterval(timer);
  elapsed = 0;
  startedAt = null;
  document.getElementById("laps").innerHTML = "";
  render();
}});
document.getElementById({jsv(lap_id)}).addEventListener("click", () => {{
  if (startedAt === null) return;
  const li = document.createElement("li");
  li.textContent = format(current());
  document.getElementById("laps").appendChild(li);
}});
render();"""
  return b.Draft(request, rules, b.page("Stopwatch", css, body, script))


def countdown_timer(rng: random.Random) -> b.Draft:
  total = rng.randint(61, 300)
  fmt = lambda s: f"{s // 60}:{s % 60:02d}"
  done = b.pick(rng, ("Time's up!", "Done!", "Finished", "Ring ring!"))
  disp_id = b.pick(rng, ("display", "remaining", "countdown", "timer"))
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, f"a countdown timer starting from {fmt(total)}"),
      f"`#{disp_id}` shows the remaining time as M:SS (whole seconds, rounded up), initially "
      f"\"{fmt(total)}\", in a monospace font.",
      "`#start` starts or resumes, `#pause` pauses, `#reset` stops and restores the "
      "duration. A number input `#seconds` sets a new duration in seconds (shown at once).",
      f"At zero the timer stops at \"0:00\" and `#done` (hidden before) shows \"{done}\" in "
      f"{cname} ({chex}). Measure time with `Date.now()` or `performance.now()`.",
  ])
  D = f"#{disp_id}"
  after_pause = f"^({fmt(total - 1)}|{fmt(total - 2)})$"
  rules = (
      rule("initial", "core", f"The display starts at {fmt(total)}",
           b.text(D, "==", fmt(total)), b.hidden("#done")),
      rule("dynamic", "core", "Start makes the time go down",
           b.click("#start"), b.wait(1300), b.text(D, "!=", fmt(total))),
      rule("dynamic", "behavior", "Pause freezes the time",
           b.click("#start"), b.wait(1100), b.click("#pause"), b.wait(2200),
           b.text(D, "matches", after_pause)),
      rule("dynamic", "behavior", "Reset restores the duration",
           b.click("#start"), b.wait(1200), b.click("#reset"), b.text(D, "==", fmt(total))),
      rule("dynamic", "core", f"A 1-second countdown ends with \"{done}\" in {cname}",
           b.fill("#seconds", "1"), b.text(D, "==", "0:01"), b.click("#start"), b.wait(1800),
           b.text(D, "==", "0:00"), b.visible("#done"), b.text("#done", "==", done),
           b.style("#done", "color", "==", b.rgb(chex))),
      rule("initial", "rendering", "The display uses a monospace font",
           b.style(D, "font-family", "contains", "monospace")),
  )
  body = f"""
<div id="{disp_id}" class="display"></div>
<label>Seconds <input id="seconds" type="number" min="1" value="{total}"></label>
<button id="start">Start</button>
<button id="pause">Pause</button>
<button id="reset">Reset</button>
<p id="done" hidden>{esc(done)}</p>"""
  css = f".display {{ font-size: 2.5rem; font-family: monospace; }}\n#done {{ color: {chex}; }}"
  script = f"""
const display = document.getElementById({jsv(disp_id)});
const doneText = document.getElementById("done");
let duration = {total * 1000};
let remaining = duration;
let endsAt = null;
let timer = null;
function format(ms) {{
  const s = Math.ceil(ms / 1000);
  return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
}}
function tick() {{
  if (endsAt !== null) remaining = Math.max(0, endsAt - Date.now());
  display.textContent = format(remaining);
  if (remaining === 0 && endsAt !== null) {{
    stop();
    doneText.hidden = false;
  }}
}}
function stop() {{
  clearInterval(timer);
  endsAt = null;
}}
document.getElementById("start").addEventListener("click", () => {{
  if (endsAt !== null || remaining === 0) return;
  endsAt = Date.now() + remaining;
  timer = setInterval(tick, 100);
}});
document.getElementById("pause").addEventListener("click", () => {{
  tick();
  stop();
}});
document.getElementById("reset").addEventListener("click", () => {{
  stop();
  remaining = duration;
  doneText.hidden = true;
  tick();
}});
document.getElementById("seconds").addEventListener("input", (event) => {{
  const s = Number(event.target.value);
  if (!(s > 0)) return;
  stop();
  duration = remaining = s * 1000;
  doneText.hidden = true;
  tick();
}});
tick();"""
  return b.Draft(request, rules, b.page("Countdown", css, body, script))


PLACES = ("Lisbon at dawn", "Mountain lake", "Desert dunes", "Old harbour", "Night market",
          "Snowy forest", "City skyline", "Quiet beach", "Rice terraces", "Autumn park")


def carousel(rng: random.Random) -> b.Draft:
  n = rng.randint(3, 6)
  captions = b.pick(rng, PLACES, n)
  prev_id, next_id = b.pick(rng, (("prev", "next"), ("back", "forward"), ("left", "right")))
  k = rng.randint(2, n)
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, f"a slideshow with {n} text slides"),
      "Slides, in order: " + ", ".join(f"\"{c}\"" for c in captions) + "; slide K has id "
      "`#slide-K` and class `slide`, and only the current one is visible (slide 1 on load).",
      f"`#{prev_id}` and `#{next_id}` move one slide and wrap around at both ends; `#counter` "
      "reads \"K / N\".",
      f"One dot button per slide (class `dot`, `data-index` K) jumps to its slide; the current "
      f"dot has class `active` and {b.article(cname)} {cname} ({chex}) background.",
  ])
  s = lambda i: f"#slide-{i}"
  dot = lambda i: f".dot[data-index='{i}']"
  rules = (
      rule("initial", "core", f"{n} slides, only the first visible",
           b.count(".slide", "==", n), b.visible(s(1)), b.hidden(s(2)),
           b.text("#counter", "==", f"1 / {n}")),
      rule("dynamic", "core", "Next shows slide 2",
           b.click(f"#{next_id}"), b.visible(s(2)), b.hidden(s(1)),
           b.text(s(2), "contains", captions[1]), b.text("#counter", "==", f"2 / {n}")),
      rule("dynamic", "behavior", "Previous on the first slide wraps to the last",
           b.click(f"#{prev_id}"), b.visible(s(n)), b.text("#counter", "==", f"{n} / {n}")),
      rule("dynamic", "behavior", "Next on the last slide wraps to the first",
           *([b.click(f"#{next_id}")] * n), b.visible(s(1)), b.text("#counter", "==", f"1 / {n}")),
      rule("dynamic", "behavior", f"Dot {k} jumps to slide {k}",
           b.click(dot(k)), b.visible(s(k)), b.text("#counter", "==", f"{k} / {n}")),
      rule("dynamic", "rendering", f"The current dot is active and {cname}",
           b.click(dot(k)), b.count(".dot.active", "==", 1),
           b.style(dot(k), "background-color", "==", b.rgb(chex))),
  )
  slides = "\n".join(f'  <div class="slide" id="slide-{i}">{esc(c)}</div>'
                     for i, c in enumerate(captions, 1))
  dots = "\n".join(f'  <button class="dot" data-index="{i}" aria-label="Slide {i}"></button>'
                   for i in range(1, n + 1))
  body = f"""
<div class="slides">
{slides}
</div>
<button id="{prev_id}">&larr;</button>
<span id="counter"></span>
<button id="{next_id}">&rarr;</button>
<div class="dots">
{dots}
</div>"""
  css = (".slide { padding: 3rem; background: #f3f4f6; font-size: 1.5rem; }\n"
         ".dot { width: 1rem; height: 1rem; border-radius: 50%; border: none; background: #d1d5db; }\n"
         f".dot.active {{ background: {chex}; }}")
  script = f"""
const slides = document.querySelectorAll(".slide");
const dots = document.querySelectorAll(".dot");
let current = 1;
function show(index) {{
  current = (index - 1 + slides.length) % slides.length + 1;
  slides.forEach((slide, i) => {{
    slide.hidden = i + 1 !== current;
  }});
  dots.forEach((dot) => dot.classList.toggle("active", Number(dot.dataset.index) === current));
  document.getElementById("counter").textContent = `${{current}} / ${{slides.length}}`;
}}
document.getElementById({jsv(prev_id)}).addEventListener("click", () => show(current - 1));
document.getElementById({jsv(next_id)}).addEventListener("click", () => show(current + 1));
dots.forEach((dot) => dot.addEventListener("click", () => show(Number(dot.dataset.index))));
show(1);"""
  return b.Draft(request, rules, b.page("Slideshow", css, body, script))
