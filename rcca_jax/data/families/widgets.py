"""Interactive widget families: counter, tabs, modal, accordion, theme toggle, rating, stepper."""

from __future__ import annotations

import random

from rcca_jax.data.families import base as b
from rcca_jax.data.families.base import esc, jsv, rule

TOPICS = ("Overview", "Features", "Pricing", "Reviews", "Contact", "History", "Team",
          "Support", "Specs", "Gallery", "Roadmap", "Careers")
QUESTIONS = (
    ("Shipping", "Orders ship within two business days."),
    ("Returns", "Items can be returned within 30 days."),
    ("Warranty", "Every device has a one-year warranty."),
    ("Payment", "We accept cards and bank transfers."),
    ("Accounts", "You can delete your account at any time."),
    ("Support", "Our team answers e-mails within a day."),
    ("Privacy", "We never sell your personal data."),
    ("Pricing", "Plans are billed monthly or yearly."),
)


def counter(rng: random.Random) -> b.Draft:
  count_id = b.pick(rng, ("count", "counter", "value", "tally", "total", "clicks"))
  inc_id = b.pick(rng, ("inc", "plus", "increment", "up"))
  dec_id = b.pick(rng, ("dec", "minus", "decrement", "down"))
  reset_id = b.pick(rng, ("reset", "clear", "restart"))
  step = rng.randint(1, 10)
  start = rng.randint(-5, 20)
  inc_label = b.pick(rng, ("+", f"+{step}", "Increase", "Add"))
  dec_label = b.pick(rng, ("-", f"-{step}", "Decrease", "Subtract"))
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, "a counter app"),
      f"The counter starts at {start} and is shown in `#{count_id}`.",
      f"A button labelled \"{inc_label}\" (`#{inc_id}`) adds {step}, a button labelled "
      f"\"{dec_label}\" (`#{dec_id}`) subtracts {step}, and a \"Reset\" button "
      f"(`#{reset_id}`) sets it back to {start}.",
      f"Display the number in {cname} ({chex}).",
  ])
  c, i, d, r = f"#{count_id}", f"#{inc_id}", f"#{dec_id}", f"#{reset_id}"
  rules = (
      rule("initial", "core", f"The counter shows {start} on load", b.text(c, "==", start)),
      rule("initial", "behavior", f"The increment button is labelled \"{inc_label}\"",
           b.text(i, "==", inc_label)),
      rule("dynamic", "core", f"Clicking {inc_label} twice shows {start + 2 * step}",
           b.click(i), b.click(i), b.text(c, "==", start + 2 * step)),
      rule("dynamic", "behavior", f"Clicking {dec_label} once shows {start - step}",
           b.click(d), b.text(c, "==", start - step)),
      rule("dynamic", "behavior", f"Reset returns the counter to {start}",
           b.click(i), b.click(d), b.click(d), b.click(r), b.text(c, "==", start)),
      rule("initial", "rendering", f"The number is displayed in {cname}",
           b.style(c, "color", "==", b.rgb(chex))),
  )
  body = f"""
<h1>Counter</h1>
<div id="{count_id}" class="display"></div>
<button id="{dec_id}">{esc(dec_label)}</button>
<button id="{inc_id}">{esc(inc_label)}</button>
<button id="{reset_id}">Reset</button>"""
  css = f".display {{ font-size: 3rem; color: {chex}; margin: 1rem 0; }}"
  script = f"""
const START = {start};
const STEP = {step};
let count = START;
const display = document.getElementById({jsv(count_id)});
function render() {{
  display.textContent = String(count);
}}
document.getElementById({jsv(inc_id)}).addEventListener("click", () => {{
  count += STEP;
  render();
}});
document.getElementById({jsv(dec_id)}).addEventListener("click", () => {{
  count -= STEP;
  render();
}});
document.getElementById({jsv(reset_id)}).addEventListener("click", () => {{
  count = START;
  render();
}});
render();"""
  return b.Draft(request, rules, b.page("Counter", css, body, script))


def tabs(rng: random.Random) -> b.Draft:
  n = rng.randint(3, 5)
  labels = b.pick(rng, TOPICS, n)
  prefix = b.pick(rng, ("info", "main", "doc", "product", "menu", "page"))
  first = rng.randint(1, n)
  other = rng.choice([k for k in range(1, n + 1) if k != first])
  cname, chex = b.pick(rng, b.COLORS)
  texts = [f"This is the {lab.lower()} section." for lab in labels]
  tab = lambda k: f"#{prefix}-tab-{k}"
  panel = lambda k: f"#{prefix}-panel-{k}"
  request = " ".join([
      b.opening(rng, f"a tab component with {n} tabs"),
      "The tabs, in order, are " + ", ".join(f"\"{lab}\"" for lab in labels) + ".",
      f"Each tab is a button with class `tab` and id `{prefix}-tab-K` (K = 1..{n}); "
      f"its panel has id `{prefix}-panel-K` and contains \"This is the <name> section.\" "
      "with the tab name in lower case.",
      f"Tab {first} (\"{labels[first - 1]}\") is selected when the page loads; only the "
      "selected tab's panel is visible.",
      f"The selected tab gets class `active` and {b.article(cname)} {cname} ({chex}) background.",
  ])
  active_js = f"document.querySelector('{tab(other)}').classList.contains('active')"
  rules = (
      rule("initial", "core", f"There are {n} tabs", b.count(".tab", "==", n)),
      rule("initial", "core", f"Only the {labels[first - 1]} panel is visible on load",
           b.visible(panel(first)), b.hidden(panel(other))),
      rule("dynamic", "core", f"Clicking \"{labels[other - 1]}\" shows its panel",
           b.click(tab(other)), b.visible(panel(other)),
           b.text(panel(other), "contains", texts[other - 1])),
      rule("dynamic", "behavior", f"Clicking \"{labels[other - 1]}\" hides the "
           f"\"{labels[first - 1]}\" panel", b.click(tab(other)), b.hidden(panel(first))),
      rule("dynamic", "behavior", "Going back to the first selected tab deselects the other",
           b.click(tab(other)), b.click(tab(first)), b.visible(panel(first)),
           b.js("!" + active_js)),
      rule("initial", "rendering",
           f"The selected tab has class active and {b.article(cname)} {cname} background",
           b.attr(tab(first), "class", "contains", "active"),
           b.style(tab(first), "background-color", "==", b.rgb(chex))),
  )
  buttons = "\n".join(f'  <button class="tab" id="{prefix}-tab-{k}" data-index="{k}">{esc(lab)}</button>'
                      for k, lab in enumerate(labels, 1))
  panels = "\n".join(f'<section class="panel" id="{prefix}-panel-{k}" hidden>{esc(t)}</section>'
                     for k, t in enumerate(texts, 1))
  body = f'<div class="tabs">\n{buttons}\n</div>\n{panels}'
  css = (f".tab {{ border: 1px solid #ccc; background: #f3f4f6; }}\n"
         f".tab.active {{ background: {chex}; color: #fff; }}\n.panel {{ padding: 1rem; }}")
  script = f"""
const tabs = document.querySelectorAll(".tab");
function select(index) {{
  tabs.forEach((tab) => {{
    const on = Number(tab.dataset.index) === index;
    tab.classList.toggle("active", on);
    document.getElementById({jsv(prefix + "-panel-")} + tab.dataset.index).hidden = !on;
  }});
}}
tabs.forEach((tab) => tab.addEventListener("click", () => select(Number(tab.dataset.index))));
select({first});"""
  return b.Draft(request, rules, b.page("Tabs", css, body, script))


def modal(rng: random.Random) -> b.Draft:
  open_id = b.pick(rng, ("open", "open-modal", "show-dialog", "launch"))
  modal_id = b.pick(rng, ("modal", "dialog", "popup", "overlay"))
  close_id = b.pick(rng, ("close", "close-modal", "dismiss", "cancel"))
  ok_id = b.pick(rng, ("confirm", "ok", "accept", "save"))
  status_id = b.pick(rng, ("status", "message", "result", "feedback"))
  open_label = b.pick(rng, ("Open dialog", "Show details", "Subscribe", "Delete item", "Learn more"))
  title = b.pick(rng, ("Are you sure?", "Join our newsletter", "Confirm your choice",
                       "Important notice", "Almost done"))
  done = b.pick(rng, ("Confirmed!", "Saved.", "Thanks, you are in.", "Done.", "Accepted"))
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, "a page with a modal dialog"),
      f"{b.article(cname).capitalize()} {cname} ({chex}) button \"{open_label}\" "
      f"(`#{open_id}`) opens the modal "
      f"`#{modal_id}`, which is hidden on load and shows the heading \"{title}\".",
      f"The modal has a close button `#{close_id}` and a confirm button `#{ok_id}`; "
      "pressing Escape also closes it.",
      f"Confirming closes the modal and writes \"{done}\" into `#{status_id}`.",
  ])
  m, o = f"#{modal_id}", f"#{open_id}"
  rules = (
      rule("initial", "core", "The modal is hidden on load", b.hidden(m)),
      rule("dynamic", "core", "The open button shows the modal with its heading",
           b.click(o), b.visible(m), b.text(m, "contains", title)),
      rule("dynamic", "behavior", "The close button hides the modal",
           b.click(o), b.click(f"#{close_id}"), b.hidden(m)),
      rule("dynamic", "behavior", "Escape hides the modal",
           b.click(o), b.press("Escape"), b.hidden(m)),
      rule("dynamic", "core", f"Confirming shows \"{done}\" and closes the modal",
           b.click(o), b.click(f"#{ok_id}"), b.text(f"#{status_id}", "==", done), b.hidden(m)),
      rule("initial", "rendering", f"The open button is {cname}",
           b.text(o, "==", open_label), b.style(o, "background-color", "==", b.rgb(chex))),
  )
  body = f"""
<button id="{open_id}" class="primary">{esc(open_label)}</button>
<p id="{status_id}"></p>
<div id="{modal_id}" class="backdrop" hidden>
  <div class="box" role="dialog" aria-modal="true">
    <h2>{esc(title)}</h2>
    <button id="{ok_id}" class="primary">OK</button>
    <button id="{close_id}">Close</button>
  </div>
</div>"""
  css = f"""
.primary {{ background: {chex}; color: #fff; border: none; border-radius: 4px; }}
.backdrop {{ position: fixed; inset: 0; background: rgba(0, 0, 0, .4);
  display: grid; place-items: center; }}
.backdrop[hidden] {{ display: none; }}
.box {{ background: #fff; padding: 1.5rem; border-radius: 8px; }}"""
  script = f"""
const modal = document.getElementById({jsv(modal_id)});
const status = document.getElementById({jsv(status_id)});
function setOpen(open) {{
  modal.hidden = !open;
}}
document.getElementById({jsv(open_id)}).addEventListener("click", () => setOpen(true));
document.getElementById({jsv(close_id)}).addEventListener("click", () => setOpen(false));
document.getElementById({jsv(ok_id)}).addEventListener("click", () => {{
  status.textContent = {jsv(done)};
  setOpen(false);
}});
document.addEventListener("keydown", (event) => {{
  if (event.key === "Escape") setOpen(false);
}});"""
  return b.Draft(request, rules, b.page("Modal", css, body, script))


def accordion(rng: random.Random) -> b.Draft:
  n = rng.randint(3, 5)
  items = b.pick(rng, QUESTIONS, n)
  prefix = b.pick(rng, ("faq", "acc", "section", "item"))
  exclusive = rng.random() < 0.5
  i, j = rng.sample(range(1, n + 1), 2)
  cname, chex = b.pick(rng, b.COLORS)
  head = lambda k: f"#{prefix}-head-{k}"
  bod = lambda k: f"#{prefix}-body-{k}"
  mode = ("Only one section may be open at a time: opening one closes the others."
          if exclusive else "Sections open and close independently of each other.")
  request = " ".join([
      b.opening(rng, f"an FAQ accordion with {n} sections"),
      "The section headings, in order: " + ", ".join(f"\"{t}\"" for t, _ in items) + ".",
      "Their answers: " + " ".join(f"({k}) {a}" for k, (_, a) in enumerate(items, 1)),
      f"Heading K is a button `#{prefix}-head-K` and its answer is `#{prefix}-body-K`; "
      "all answers are hidden on load and clicking a heading toggles its answer.",
      mode,
      f"A heading's `aria-expanded` is \"true\" when open, and headings have {cname} "
      f"({chex}) text.",
  ])
  second = (b.hidden(bod(i)) if exclusive else b.visible(bod(i)))
  rules = (
      rule("initial", "core", "All answers are hidden on load", b.hidden(bod(i)), b.hidden(bod(j))),
      rule("dynamic", "core", f"Clicking \"{items[i - 1][0]}\" shows its answer",
           b.click(head(i)), b.visible(bod(i)), b.text(bod(i), "contains", items[i - 1][1])),
      rule("dynamic", "behavior", "Clicking a heading twice hides its answer again",
           b.click(head(i)), b.click(head(i)), b.hidden(bod(i))),
      rule("dynamic", "behavior", mode, b.click(head(i)), b.click(head(j)), b.visible(bod(j)),
           second),
      rule("dynamic", "rendering", "An open heading has aria-expanded true",
           b.click(head(j)), b.attr(head(j), "aria-expanded", "==", "true")),
      rule("initial", "rendering", f"Headings are {cname}", b.text(head(j), "contains", items[j - 1][0]),
           b.style(head(j), "color", "==", b.rgb(chex))),
  )
  sections = "\n".join(
      f'<button class="head" id="{prefix}-head-{k}" aria-expanded="false">{esc(t)}</button>\n'
      f'<div class="body" id="{prefix}-body-{k}" hidden>{esc(a)}</div>'
      for k, (t, a) in enumerate(items, 1))
  css = (f".head {{ display: block; width: 100%; text-align: left; color: {chex}; "
         "background: #f9fafb; border: 1px solid #ddd; }\n.body { padding: .5rem 1rem; }")
  script = f"""
const EXCLUSIVE = {jsv(exclusive)};
const heads = document.querySelectorAll(".head");
function setOpen(head, open) {{
  head.setAttribute("aria-expanded", String(open));
  head.nextElementSibling.hidden = !open;
}}
heads.forEach((head) => {{
  head.addEventListener("click", () => {{
    const open = head.getAttribute("aria-expanded") !== "true";
    if (EXCLUSIVE && open) heads.forEach((other) => setOpen(other, false));
    setOpen(head, open);
  }});
}});"""
  return b.Draft(request, rules, b.page("FAQ", css, f"<h1>FAQ</h1>\n{sections}", script))


LIGHTS = (("white", "#ffffff"), ("ivory", "#fffff0"), ("light grey", "#f3f4f6"),
          ("snow", "#fffafa"), ("pale blue", "#eff6ff"))
DARKS = (("near black", "#111827"), ("charcoal", "#1f2937"), ("midnight", "#0f172a"),
         ("dark grey", "#262626"), ("deep navy", "#172554"))


def dark_mode(rng: random.Random) -> b.Draft:
  toggle_id = b.pick(rng, ("theme-toggle", "toggle", "mode", "dark-toggle", "switch-theme"))
  cls = b.pick(rng, ("dark", "theme-dark", "night", "dark-mode"))
  lname, lhex = b.pick(rng, LIGHTS)
  dname, dhex = b.pick(rng, DARKS)
  to_dark = b.pick(rng, ("Dark mode", "Switch to dark", "Go dark", "Night mode"))
  to_light = b.pick(rng, ("Light mode", "Switch to light", "Go light", "Day mode"))
  heading = b.pick(rng, ("My blog", "Welcome", "Settings", "Daily notes", "Portfolio"))
  request = " ".join([
      b.opening(rng, f"a page titled \"{heading}\" with a dark-mode toggle"),
      f"The page starts light with a {lname} ({lhex}) background and dark text.",
      f"The button `#{toggle_id}` reads \"{to_dark}\"; clicking it adds the class `{cls}` "
      f"to `<body>`, makes the background {dname} ({dhex}) with light text, and changes the "
      f"button text to \"{to_light}\". Clicking again switches back.",
  ])
  t = f"#{toggle_id}"
  rules = (
      rule("initial", "core", f"The background is {lname} on load",
           b.style("body", "background-color", "==", b.rgb(lhex))),
      rule("initial", "behavior", f"The toggle reads \"{to_dark}\"", b.text(t, "==", to_dark)),
      rule("dynamic", "core", f"Clicking the toggle adds class {cls} to body",
           b.click(t), b.attr("body", "class", "contains", cls)),
      rule("dynamic", "rendering", f"Dark mode uses a {dname} background",
           b.click(t), b.style("body", "background-color", "==", b.rgb(dhex))),
      rule("dynamic", "behavior", f"In dark mode the toggle reads \"{to_light}\"",
           b.click(t), b.text(t, "==", to_light)),
      rule("dynamic", "behavior", "Clicking twice restores the light theme",
           b.click(t), b.click(t), b.style("body", "background-color", "==", b.rgb(lhex)),
           b.text(t, "==", to_dark)),
  )
  body = f"""
<h1>{esc(heading)}</h1>
<p>Use the button to switch between light and dark themes.</p>
<button id="{toggle_id}">{esc(to_dark)}</button>"""
  css = (f"body {{ background: {lhex}; color: #111; }}\n"
         f"body.{cls} {{ background: {dhex}; color: #f9fafb; }}")
  script = f"""
const toggle = document.getElementById({jsv(toggle_id)});
toggle.addEventListener("click", () => {{
  const dark = document.body.classList.toggle({jsv(cls)});
  toggle.textContent = dark ? {jsv(to_light)} : {jsv(to_dark)};
}});"""
  return b.Draft(request, rules, b.page(heading, css, body, script))


def star_rating(rng: random.Random) -> b.Draft:
  n = rng.randint(5, 10)
  start = rng.randint(0, 2)
  label_id = b.pick(rng, ("rating-label", "score", "rating-text", "stars-value"))
  style = rng.randrange(3)
  fmt = lambda k: (f"Rating: {k}/{n}", f"{k} of {n} stars", f"You rated {k}")[style]
  k, j = sorted(rng.sample(range(1, n + 1), 2), reverse=True)
  cname, chex = b.pick(rng, b.COLORS)
  star = lambda v: f".star[data-value='{v}']"
  request = " ".join([
      b.opening(rng, f"a {n}-star rating widget"),
      f"Render {n} buttons with class `star` and `data-value` 1..{n}.",
      f"The initial rating is {start}. Clicking star K sets the rating to K: stars 1..K get "
      f"class `filled` and turn {cname} ({chex}), the others lose it.",
      f"`#{label_id}` shows the rating as \"{fmt('K')}\" (now \"{fmt(start)}\").",
  ])
  rules = (
      rule("initial", "core", f"There are {n} stars", b.count(".star", "==", n)),
      rule("initial", "behavior", f"The label reads \"{fmt(start)}\" on load",
           b.text(f"#{label_id}", "==", fmt(start)), b.count(".star.filled", "==", start)),
      rule("dynamic", "core", f"Clicking star {k} sets the label to \"{fmt(k)}\"",
           b.click(star(k)), b.text(f"#{label_id}", "==", fmt(k))),
      rule("dynamic", "behavior", f"After clicking star {k}, {k} stars are filled",
           b.click(star(k)), b.count(".star.filled", "==", k)),
      rule("dynamic", "behavior", f"Clicking star {j} after {k} lowers the rating to {j}",
           b.click(star(k)), b.click(star(j)), b.count(".star.filled", "==", j),
           b.text(f"#{label_id}", "==", fmt(j))),
      rule("dynamic", "rendering", f"Filled stars are {cname}",
           b.click(star(k)), b.style(star(1), "color", "==", b.rgb(chex))),
  )
  body = f'<div id="stars"></div>\n<p id="{label_id}"></p>'
  css = (".star { font-size: 2rem; border: none; background: none; color: #d1d5db; }\n"
         f".star.filled {{ color: {chex}; }}")
  label_expr = ("`Rating: ${rating}/" + str(n) + "`", "`${rating} of " + str(n) + " stars`",
                "`You rated ${rating}`")[style]
  script = f"""
const MAX = {n};
let rating = {start};
const box = document.getElementById("stars");
const label = document.getElementById({jsv(label_id)});
for (let v = 1; v <= MAX; v++) {{
  const star = document.createElement("button");
  star.className = "star";
  star.dataset.value = String(v);
  star.textContent = "\\u2605";
  star.addEventListener("click", () => {{
    rating = v;
    render();
  }});
  box.appendChild(star);
}}
function render() {{
  box.querySelectorAll(".star").forEach((star) => {{
    star.classList.toggle("filled", Number(star.dataset.value) <= rating);
  }});
  label.textContent = {label_expr};
}}
render();"""
  return b.Draft(request, rules, b.page("Rating", css, body, script))


STEP_NAMES = ("Account", "Profile", "Address", "Payment", "Review", "Shipping", "Confirm",
              "Plan", "Details", "Finish")


def progress_steps(rng: random.Random) -> b.Draft:
  n = rng.randint(3, 6)
  names = b.pick(rng, STEP_NAMES, n)
  next_id = b.pick(rng, ("next", "next-step", "forward", "continue"))
  back_id = b.pick(rng, ("back", "prev", "previous", "prev-step"))
  label_id = b.pick(rng, ("step-label", "current", "progress-text", "where"))
  cname, chex = b.pick(rng, b.COLORS)
  fmt = lambda i: f"Step {i} of {n}: {names[i - 1]}"
  request = " ".join([
      b.opening(rng, f"a {n}-step progress indicator"),
      "The steps are " + ", ".join(f"\"{s}\"" for s in names) + f", each an element with class "
      f"`step`; the current one has class `active` and {b.article(cname)} {cname} ({chex}) "
      "background.",
      f"`#{label_id}` reads \"Step I of {n}: NAME\" (initially \"{fmt(1)}\").",
      f"Buttons `#{back_id}` and `#{next_id}` move one step; Back is disabled on the first "
      "step and Next on the last.",
  ])
  nx, bk, lb = f"#{next_id}", f"#{back_id}", f"#{label_id}"
  rules = (
      rule("initial", "core", f"The label reads \"{fmt(1)}\"", b.text(lb, "==", fmt(1))),
      rule("initial", "behavior", "Back is disabled on the first step",
           b.js(f"document.querySelector('{bk}').disabled === true")),
      rule("dynamic", "core", "Next twice shows step 3",
           b.click(nx), b.click(nx), b.text(lb, "==", fmt(3))),
      rule("dynamic", "behavior", "Back returns to the previous step",
           b.click(nx), b.click(nx), b.click(bk), b.text(lb, "==", fmt(2))),
      rule("dynamic", "behavior", "Next is disabled on the last step",
           *([b.click(nx)] * (n - 1)), b.text(lb, "==", fmt(n)),
           b.js(f"document.querySelector('{nx}').disabled === true")),
      rule("dynamic", "rendering", f"Exactly the current step is active and {cname}",
           b.click(nx), b.count(".step.active", "==", 1),
           b.style(".step.active", "background-color", "==", b.rgb(chex)),
           b.text(".step.active", "contains", names[1])),
  )
  steps = "\n".join(f'  <li class="step">{esc(s)}</li>' for s in names)
  body = f"""
<ol class="steps">
{steps}
</ol>
<p id="{label_id}"></p>
<button id="{back_id}">Back</button>
<button id="{next_id}">Next</button>"""
  css = (".steps { display: flex; gap: .5rem; list-style: none; padding: 0; }\n"
         ".step { padding: .3rem .7rem; border-radius: 999px; background: #e5e7eb; }\n"
         f".step.active {{ background: {chex}; color: #fff; }}")
  script = f"""
const NAMES = {jsv(names)};
let current = 1;
const items = document.querySelectorAll(".step");
const back = document.getElementById({jsv(back_id)});
const next = document.getElementById({jsv(next_id)});
function render() {{
  items.forEach((item, i) => item.classList.toggle("active", i + 1 === current));
  document.getElementById({jsv(label_id)}).textContent =
    `Step ${{current}} of ${{NAMES.length}}: ${{NAMES[current - 1]}}`;
  back.disabled = current === 1;
  next.disabled = current === NAMES.length;
}}
back.addEventListener("click", () => {{
  current -= 1;
  render();
}});
next.addEventListener("click", () => {{
  current += 1;
  render();
}});
render();"""
  return b.Draft(request, rules, b.page("Progress", css, body, script))
