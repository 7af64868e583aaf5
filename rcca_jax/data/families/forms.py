"""Form and calculator families: validation, counters of text, converters, calculators."""

from __future__ import annotations

import decimal
import math
import random

from rcca_jax.data.families import base as b
from rcca_jax.data.families.base import esc, jsv, rule

NAMES = ("Ada", "Linus", "Grace", "Alan", "Maya", "Noor", "Kenji", "Sofia", "Omar", "Lena")


def fixed(x: float, digits: int) -> str:
  """JavaScript's `x.toFixed(digits)` (exact binary value, ties away from zero)."""
  q = decimal.Decimal(1).scaleb(-digits)
  return str(decimal.Decimal(x).quantize(q, rounding=decimal.ROUND_HALF_UP))


def form_validation(rng: random.Random) -> b.Draft:
  form_id = b.pick(rng, ("signup", "register", "join-form", "account-form"))
  name_id, email_id, pw_id = b.pick(rng, (("name", "email", "password"),
                                          ("full-name", "mail", "pass"),
                                          ("username", "email-address", "pwd")))
  min_len = rng.randint(6, 12)
  msg_name = b.pick(rng, ("Name is required", "Please enter your name", "Name cannot be empty"))
  msg_email = b.pick(rng, ("Invalid email", "Please enter a valid email",
                           "Email address is not valid"))
  msg_pw = f"Password must be at least {min_len} characters"
  greet = b.pick(rng, ("Welcome, {}!", "Thanks {}, you are signed up.", "Account created for {}"))
  who = b.pick(rng, NAMES)
  cname, chex = b.pick(rng, b.COLORS[:4] + b.COLORS[10:11])
  request = " ".join([
      b.opening(rng, "a sign-up form with client-side validation"),
      f"The form `#{form_id}` (with `novalidate`; validate in JavaScript on submit) has "
      f"inputs `#{name_id}`, `#{email_id}` and `#{pw_id}` and a submit button.",
      f"On submit, show errors in `#{name_id}-error`, `#{email_id}-error` and "
      f"`#{pw_id}-error`: \"{msg_name}\" when the name is empty, \"{msg_email}\" when the "
      f"email is not of the form a@b.c, and \"{msg_pw}\" when the password is shorter "
      f"than {min_len}; fields that are fine have an empty error.",
      f"Errors are written in {cname} ({chex}).",
      f"When everything is valid, show `#success` (hidden until then) with the text "
      f"\"{greet.format('NAME')}\" using the entered name.",
  ])
  good_pw = "x" * min_len
  fill_ok = (b.fill(f"#{name_id}", who), b.fill(f"#{email_id}", "user@example.com"),
             b.fill(f"#{pw_id}", good_pw))
  submit = b.click(f"#{form_id} [type='submit']")
  rules = (
      rule("initial", "core", "The success message is hidden on load",
           b.exists(f"#{email_id}"), b.hidden("#success")),
      rule("dynamic", "core", f"An invalid email shows \"{msg_email}\"",
           fill_ok[0], b.fill(f"#{email_id}", "user.example.com"), fill_ok[2], submit,
           b.text(f"#{email_id}-error", "==", msg_email), b.hidden("#success")),
      rule("dynamic", "behavior", f"A {min_len - 1}-character password shows \"{msg_pw}\"",
           fill_ok[0], fill_ok[1], b.fill(f"#{pw_id}", "y" * (min_len - 1)), submit,
           b.text(f"#{pw_id}-error", "==", msg_pw), b.text(f"#{email_id}-error", "==", "")),
      rule("dynamic", "behavior", f"An empty name shows \"{msg_name}\"",
           fill_ok[1], fill_ok[2], submit, b.text(f"#{name_id}-error", "==", msg_name)),
      rule("dynamic", "core", "Valid input shows the success message",
           *fill_ok, submit, b.visible("#success"),
           b.text("#success", "==", greet.format(who))),
      rule("dynamic", "rendering", f"Error messages are {cname}",
           submit, b.style(f"#{name_id}-error", "color", "==", b.rgb(chex))),
  )
  body = f"""
<form id="{form_id}" novalidate>
  <label>Name <input id="{name_id}"></label>
  <p class="error" id="{name_id}-error"></p>
  <label>Email <input id="{email_id}"></label>
  <p class="error" id="{email_id}-error"></p>
  <label>Password <input id="{pw_id}" type="password"></label>
  <p class="error" id="{pw_id}-error"></p>
  <button type="submit">Sign up</button>
</form>
<p id="success" hidden></p>"""
  css = (f".error {{ color: {chex}; min-height: 1em; margin: .2rem 0 .6rem; }}\n"
         "label { display: block; }")
  script = f"""
const MIN_LENGTH = {min_len};
const form = document.getElementById({jsv(form_id)});
const success = document.getElementById("success");
function field(id) {{
  return document.getElementById(id).value.trim();
}}
function report(id, message) {{
  document.getElementById(id + "-error").textContent = message;
  return message === "";
}}
form.addEventListener("submit", (event) => {{
  event.preventDefault();
  const name = field({jsv(name_id)});
  const okName = report({jsv(name_id)}, name ? "" : {jsv(msg_name)});
  const okEmail = report({jsv(email_id)},
    /^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$/.test(field({jsv(email_id)})) ? "" : {jsv(msg_email)});
  const okPassword = report({jsv(pw_id)},
    document.getElementById({jsv(pw_id)}).value.length >= MIN_LENGTH ? "" : {jsv(msg_pw)});
  const valid = okName && okEmail && okPassword;
  success.hidden = !valid;
  if (valid) success.textContent = {jsv(greet.split("{}")[0])} + name + {jsv(greet.split("{}")[1])};
}});"""
  return b.Draft(request, rules, b.page("Sign up", css, body, script))


PHRASES = ("hello world", "Typing a short note", "The quick brown fox", "JavaScript is fun",
           "Remember the milk", "See you at noon")


def char_counter(rng: random.Random) -> b.Draft:
  area_id = b.pick(rng, ("message", "bio", "tweet", "note", "comment"))
  counter_id = b.pick(rng, ("counter", "char-count", "chars", "remaining"))
  send_id = b.pick(rng, ("send", "post", "submit", "publish"))
  limit = rng.randint(20, 160)
  style = rng.randrange(2)
  fmt = lambda n: (f"{n} / {limit}", f"{limit - n} characters left")[style]
  phrase = b.pick(rng, PHRASES)
  cname, chex = b.pick(rng, b.COLORS[:2] + b.COLORS[4:5] + b.COLORS[10:11])
  shown = f"N / {limit}\"" if style == 0 else f"R characters left\" (R = {limit} - N)"
  request = " ".join([
      b.opening(rng, f"a text box with a live character counter (limit {limit})"),
      f"The textarea is `#{area_id}`; `#{counter_id}` shows \"{shown}, where N is the "
      f"number of characters typed (\"{fmt(0)}\" when empty), updated on every input.",
      f"Over {limit} characters the counter gets class `over` and turns {cname} ({chex}).",
      f"The button `#{send_id}` is disabled when the text is empty or over the limit.",
  ])
  a, c, s = f"#{area_id}", f"#{counter_id}", f"#{send_id}"
  over = "z" * (limit + 5)
  rules = (
      rule("initial", "core", f"The counter reads \"{fmt(0)}\" on load", b.text(c, "==", fmt(0))),
      rule("initial", "behavior", "The button is disabled while the text is empty",
           b.js(f"document.querySelector('{s}').disabled === true")),
      rule("dynamic", "core", f"Typing \"{phrase}\" shows \"{fmt(len(phrase))}\"",
           b.fill(a, phrase), b.text(c, "==", fmt(len(phrase)))),
      rule("dynamic", "behavior", "Over the limit the counter is marked and the button disabled",
           b.fill(a, over), b.attr(c, "class", "contains", "over"),
           b.js(f"document.querySelector('{s}').disabled === true")),
      rule("dynamic", "behavior", f"Exactly {limit} characters is allowed",
           b.fill(a, "k" * limit), b.js(f"document.querySelector('{s}').disabled === false"),
           b.js(f"!document.querySelector('{c}').classList.contains('over')"),
           b.text(c, "==", fmt(limit))),
      rule("dynamic", "rendering", f"The over-limit counter is {cname}",
           b.fill(a, over), b.style(c, "color", "==", b.rgb(chex))),
  )
  body = f"""
<textarea id="{area_id}" rows="4" cols="40"></textarea>
<p id="{counter_id}"></p>
<button id="{send_id}">Send</button>"""
  css = f".over {{ color: {chex}; font-weight: bold; }}"
  text_expr = ("`${n} / ${LIMIT}`", "`${LIMIT - n} characters left`")[style]
  script = f"""
const LIMIT = {limit};
const area = document.getElementById({jsv(area_id)});
const counter = document.getElementById({jsv(counter_id)});
const send = document.getElementById({jsv(send_id)});
function update() {{
  const n = area.value.length;
  counter.textContent = {text_expr};
  counter.classList.toggle("over", n > LIMIT);
  send.disabled = n === 0 || n > LIMIT;
}}
area.addEventListener("input", update);
update();"""
  return b.Draft(request, rules, b.page("Character counter", css, body, script))


LEVEL_WORDS = (("Weak", "Medium", "Strong"), ("Weak", "Fair", "Strong"), ("Poor", "Okay", "Great"))


def password_strength(rng: random.Random) -> b.Draft:
  pw_id = b.pick(rng, ("password", "pw", "new-password", "secret"))
  label_id = b.pick(rng, ("strength", "meter-label", "pw-strength", "rating"))
  min_len = rng.randint(8, 12)
  weak, mid, strong = b.pick(rng, LEVEL_WORDS)
  empty = b.pick(rng, ("Enter a password", "Type a password", "No password yet"))
  sname, shex = b.pick(rng, (("green", "#16a34a"), ("teal", "#0d9488"), ("emerald", "#059669")))
  wname, whex = b.pick(rng, (("red", "#dc2626"), ("crimson", "#be123c"), ("orange", "#ea580c")))
  request = " ".join([
      b.opening(rng, "a password strength meter"),
      f"As the user types into `#{pw_id}`, score one point each for: at least {min_len} "
      "characters, a digit, an uppercase letter, and a symbol (anything not a letter or "
      "digit).",
      f"`#{label_id}` shows \"{weak}\" for 0-1 points, \"{mid}\" for 2-3 and \"{strong}\" for "
      f"4, and \"{empty}\" while the input is empty.",
      f"Colour the label {wname} ({whex}) when {weak.lower()} and {sname} ({shex}) when "
      f"{strong.lower()}.",
  ])
  p, lab = f"#{pw_id}", f"#{label_id}"
  medium_pw = "abcdefghij"[:min_len - 1] + "7" * 1 + "q" * max(0, min_len - 10)
  strong_pw = ("Ab1!" + "x" * min_len)[:max(min_len, 4)]
  rules = (
      rule("initial", "core", f"The label reads \"{empty}\" on load", b.text(lab, "==", empty)),
      rule("dynamic", "core", f"\"abc1\" (one point) is rated {weak}",
           b.fill(p, "abc1"), b.text(lab, "==", weak)),
      rule("dynamic", "behavior", f"A long lowercase password with a digit is rated {mid}",
           b.fill(p, medium_pw), b.text(lab, "==", mid)),
      rule("dynamic", "core", f"\"{strong_pw}\" is rated {strong}",
           b.fill(p, strong_pw), b.text(lab, "==", strong)),
      rule("dynamic", "behavior", "Clearing the input shows the empty hint again",
           b.fill(p, strong_pw), b.fill(p, ""), b.text(lab, "==", empty)),
      rule("dynamic", "rendering", f"The {strong} label is {sname} and {weak} is {wname}",
           b.fill(p, strong_pw), b.style(lab, "color", "==", b.rgb(shex)),
           b.fill(p, "abc"), b.style(lab, "color", "==", b.rgb(whex))),
  )
  body = f"""
<label>Password <input id="{pw_id}" type="password"></label>
<p id="{label_id}"></p>"""
  css = f".weak {{ color: {whex}; }}\n.strong {{ color: {shex}; }}"
  script = f"""
const MIN_LENGTH = {min_len};
const input = document.getElementById({jsv(pw_id)});
const label = document.getElementById({jsv(label_id)});
function score(pw) {{
  return [pw.length >= MIN_LENGTH, /\\d/.test(pw), /[A-Z]/.test(pw), /[^A-Za-z0-9]/.test(pw)]
    .filter(Boolean).length;
}}
function update() {{
  const pw = input.value;
  const points = score(pw);
  label.className = "";
  if (!pw) {{
    label.textContent = {jsv(empty)};
  }} else if (points <= 1) {{
    label.textContent = {jsv(weak)};
    label.className = "weak";
  }} else if (points <= 3) {{
    label.textContent = {jsv(mid)};
  }} else {{
    label.textContent = {jsv(strong)};
    label.className = "strong";
  }}
}}
input.addEventListener("input", update);
update();"""
  return b.Draft(request, rules, b.page("Password strength", css, body, script))


CURRENCIES = ("$", "€", "£")


def tip_splitter(rng: random.Random) -> b.Draft:
  sym = b.pick(rng, CURRENCIES)
  tip0 = b.pick(rng, (10, 12, 15, 18, 20))
  bill = rng.randint(20, 300)
  pct = b.pick(rng, [t for t in (5, 10, 15, 20, 25) if t != tip0])
  people = rng.randint(2, 6)
  tip_id = b.pick(rng, ("tip-amount", "tip-total", "tip-value"))
  per_id = b.pick(rng, ("per-person", "each", "share"))
  money = lambda x: f"{sym}{fixed(x, 2)}"
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, "a tip calculator that splits the bill"),
      f"Inputs: `#bill` (amount), `#tip` (percent, initially {tip0}) and `#people` "
      "(initially 1).",
      f"Recalculate on every input: `#{tip_id}` shows bill × tip / 100 and `#{per_id}` shows "
      f"(bill + tip) / people, both as \"{sym}\" followed by two decimals (e.g. "
      f"{money(12.5)}); with an empty bill both show {money(0)}.",
      f"If people is less than 1, `#{per_id}` shows \"n/a\". Show `#{per_id}` in bold {cname} ({chex}).",
  ])
  t, e = f"#{tip_id}", f"#{per_id}"
  tip_amt = bill * tip0 / 100
  tip_amt2 = bill * pct / 100
  rules = (
      rule("initial", "core", f"Tip starts at {tip0}% and amounts at {money(0)}",
           b.value("#tip", "==", tip0), b.text(e, "==", money(0))),
      rule("dynamic", "core", f"A bill of {bill} gives a tip of {money(tip_amt)}",
           b.fill("#bill", bill), b.text(t, "==", money(tip_amt))),
      rule("dynamic", "core", f"Split between {people}, each pays {money((bill + tip_amt2) / people)}",
           b.fill("#bill", bill), b.fill("#tip", pct), b.fill("#people", people),
           b.text(e, "==", money((bill + tip_amt2) / people))),
      rule("dynamic", "behavior", f"Changing the tip to {pct}% updates the tip amount",
           b.fill("#bill", bill), b.fill("#tip", pct), b.text(t, "==", money(tip_amt2))),
      rule("dynamic", "behavior", "Zero people shows n/a",
           b.fill("#bill", bill), b.fill("#people", 0), b.text(e, "==", "n/a")),
      rule("initial", "rendering", f"The per-person amount is bold and {cname}",
           b.style(e, "font-weight", "==", "700"), b.style(e, "color", "==", b.rgb(chex))),
  )
  body = f"""
<label>Bill <input id="bill" type="number" min="0" step="0.01"></label>
<label>Tip % <input id="tip" type="number" min="0" value="{tip0}"></label>
<label>People <input id="people" type="number" min="0" value="1"></label>
<p>Tip: <span id="{tip_id}"></span></p>
<p>Each: <span id="{per_id}"></span></p>"""
  css = f"#{per_id} {{ font-weight: 700; color: {chex}; }}\nlabel {{ display: block; margin: .3rem 0; }}"
  script = f"""
const SYMBOL = {jsv(sym)};
const inputs = ["bill", "tip", "people"].map((id) => document.getElementById(id));
function money(x) {{
  return SYMBOL + x.toFixed(2);
}}
function update() {{
  const [bill, pct, people] = inputs.map((input) => Number(input.value) || 0);
  const tip = bill * pct / 100;
  document.getElementById({jsv(tip_id)}).textContent = money(tip);
  document.getElementById({jsv(per_id)}).textContent =
    people < 1 ? "n/a" : money((bill + tip) / people);
}}
inputs.forEach((input) => input.addEventListener("input", update));
update();"""
  return b.Draft(request, rules, b.page("Tip splitter", css, body, script))


CONVERSIONS = (
    ("kilometres", "km", "miles", "mi", 0.621371), ("kilograms", "kg", "pounds", "lb", 2.20462),
    ("centimetres", "cm", "inches", "in", 0.393701), ("litres", "L", "US gallons", "gal", 0.264172),
    ("metres", "m", "feet", "ft", 3.28084), ("grams", "g", "ounces", "oz", 0.035274),
)


def unit_converter(rng: random.Random) -> b.Draft:
  long_a, a, long_b, bu, factor = b.pick(rng, CONVERSIONS)
  digits = rng.randint(1, 3)
  in_id = b.pick(rng, ("amount", "input-value", "from-value", "quantity"))
  out_id = b.pick(rng, ("result", "output", "converted", "to-value"))
  swap_id = b.pick(rng, ("swap", "reverse", "flip"))
  start = rng.randint(1, 20)
  x = round(rng.uniform(1, 500), 1)
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, f"a converter from {long_a} ({a}) to {long_b} ({bu})"),
      f"Use 1 {a} = {factor} {bu}. The number input `#{in_id}` starts at {start}; "
      f"`#{out_id}` shows the converted value with {digits} decimal places, updated on "
      "every input, and is empty when the input is empty.",
      f"`#from-unit` and `#to-unit` show the unit symbols (\"{a}\" and \"{bu}\"); the "
      f"button `#{swap_id}` swaps the direction (and the two symbols).",
      f"The result is shown in {cname} ({chex}).",
  ])
  i, o = f"#{in_id}", f"#{out_id}"
  rules = (
      rule("initial", "core", f"{start} {a} is shown as {fixed(start * factor, digits)}",
           b.value(i, "==", start), b.text(o, "==", fixed(start * factor, digits))),
      rule("dynamic", "core", f"Typing {x} shows {fixed(x * factor, digits)}",
           b.fill(i, x), b.text(o, "==", fixed(x * factor, digits))),
      rule("dynamic", "behavior", f"After swapping, {x} {bu} shows {fixed(x / factor, digits)}",
           b.click(f"#{swap_id}"), b.fill(i, x), b.text(o, "==", fixed(x / factor, digits)),
           b.text("#from-unit", "==", bu), b.text("#to-unit", "==", a)),
      rule("dynamic", "behavior", "Clearing the input empties the result",
           b.fill(i, ""), b.text(o, "==", "")),
      rule("initial", "behavior", "The unit symbols are shown",
           b.text("#from-unit", "==", a), b.text("#to-unit", "==", bu)),
      rule("initial", "rendering", f"The result is {cname}", b.style(o, "color", "==", b.rgb(chex))),
  )
  body = f"""
<h1>{esc(long_a.capitalize())} to {esc(long_b)}</h1>
<input id="{in_id}" type="number" value="{start}"> <span id="from-unit"></span>
= <strong id="{out_id}"></strong> <span id="to-unit"></span>
<button id="{swap_id}">Swap</button>"""
  css = f"#{out_id} {{ color: {chex}; }}"
  script = f"""
const FACTOR = {factor};
const DIGITS = {digits};
const UNITS = [{jsv(a)}, {jsv(bu)}];
let reversed = false;
const input = document.getElementById({jsv(in_id)});
function update() {{
  const text = input.value.trim();
  const x = Number(text);
  document.getElementById({jsv(out_id)}).textContent =
    text === "" ? "" : (reversed ? x / FACTOR : x * FACTOR).toFixed(DIGITS);
  document.getElementById("from-unit").textContent = UNITS[reversed ? 1 : 0];
  document.getElementById("to-unit").textContent = UNITS[reversed ? 0 : 1];
}}
input.addEventListener("input", update);
document.getElementById({jsv(swap_id)}).addEventListener("click", () => {{
  reversed = !reversed;
  update();
}});
update();"""
  return b.Draft(request, rules, b.page("Converter", css, body, script))


def temperature_converter(rng: random.Random) -> b.Draft:
  c_id, f_id = b.pick(rng, (("celsius", "fahrenheit"), ("c", "f"), ("temp-c", "temp-f"),
                            ("deg-c", "deg-f")))
  digits = rng.randint(0, 2)
  cold, hot = rng.randint(5, 12), rng.randint(24, 32)
  c0 = rng.randint(cold + 1, hot - 1)
  words = b.pick(rng, (("Cold", "Mild", "Hot"), ("Chilly", "Pleasant", "Warm"),
                       ("Freezing", "Fine", "Scorching")))
  cname, chex = b.pick(rng, (("red", "#dc2626"), ("orange", "#ea580c"), ("crimson", "#be123c")))
  c_hot = hot + rng.randint(1, 8)
  f_in = rng.randint(-20, 110)
  to_f = lambda c: fixed(c * 9 / 5 + 32, digits)
  request = " ".join([
      b.opening(rng, "a two-way temperature converter"),
      f"Two number inputs, `#{c_id}` (Celsius, initially {c0}) and `#{f_id}` (Fahrenheit): "
      f"typing in one updates the other, rounded to {digits} decimal places.",
      f"`#feel` describes the Celsius value: \"{words[0]}\" below {cold}, \"{words[2]}\" "
      f"above {hot}, otherwise \"{words[1]}\"; \"{words[2]}\" is shown in {cname} ({chex}).",
  ])
  ci, fi = f"#{c_id}", f"#{f_id}"
  rules = (
      rule("initial", "core", f"{c0} °C is shown as {to_f(c0)} °F",
           b.value(ci, "==", c0), b.value(fi, "==", to_f(c0))),
      rule("dynamic", "core", f"Typing {c_hot} °C gives {to_f(c_hot)} °F",
           b.fill(ci, c_hot), b.value(fi, "==", to_f(c_hot))),
      rule("dynamic", "core", f"Typing {f_in} °F gives {fixed((f_in - 32) * 5 / 9, digits)} °C",
           b.fill(fi, f_in), b.value(ci, "==", fixed((f_in - 32) * 5 / 9, digits))),
      rule("dynamic", "behavior", f"{cold - 1} °C feels \"{words[0]}\" but {cold} °C does not",
           b.fill(ci, cold - 1), b.text("#feel", "==", words[0]),
           b.fill(ci, cold), b.text("#feel", "==", words[1]),
           b.fill(ci, hot), b.text("#feel", "==", words[1])),
      rule("initial", "behavior", f"The initial temperature feels \"{words[1]}\"",
           b.text("#feel", "==", words[1])),
      rule("dynamic", "rendering", f"\"{words[2]}\" is shown in {cname}",
           b.fill(ci, c_hot), b.text("#feel", "==", words[2]),
           b.style("#feel", "color", "==", b.rgb(chex))),
  )
  body = f"""
<label>Celsius <input id="{c_id}" type="number" value="{c0}"></label>
<label>Fahrenheit <input id="{f_id}" type="number"></label>
<p id="feel"></p>"""
  css = f".hot {{ color: {chex}; }}"
  script = f"""
const DIGITS = {digits};
const celsius = document.getElementById({jsv(c_id)});
const fahrenheit = document.getElementById({jsv(f_id)});
const feel = document.getElementById("feel");
function describe(c) {{
  const word = c < {cold} ? {jsv(words[0])} : c > {hot} ? {jsv(words[2])} : {jsv(words[1])};
  feel.textContent = word;
  feel.className = c > {hot} ? "hot" : "";
}}
celsius.addEventListener("input", () => {{
  const c = Number(celsius.value);
  fahrenheit.value = (c * 9 / 5 + 32).toFixed(DIGITS);
  describe(c);
}});
fahrenheit.addEventListener("input", () => {{
  const c = (Number(fahrenheit.value) - 32) * 5 / 9;
  celsius.value = c.toFixed(DIGITS);
  describe(c);
}});
celsius.dispatchEvent(new Event("input"));"""
  return b.Draft(request, rules, b.page("Temperature", css, body, script))


def js_round2(x: float) -> str:
  """`String(Math.round(x * 100) / 100)` as JavaScript prints it."""
  r = math.floor(x * 100 + 0.5) / 100
  return str(int(r)) if r == int(r) else repr(r)


def calculator(rng: random.Random) -> b.Draft:
  a_id, b_id = b.pick(rng, (("a", "b"), ("first", "second"), ("x", "y"), ("num1", "num2")))
  op_id = b.pick(rng, ("op", "operator", "operation"))
  go_id = b.pick(rng, ("calc", "equals", "compute", "go"))
  out_id = b.pick(rng, ("result", "answer", "output"))
  zero_msg = b.pick(rng, ("Cannot divide by zero", "Error: division by zero", "Undefined"))
  x, y = rng.randint(-50, 99), rng.randint(2, 30)
  dx, dy = rng.randint(1, 200), rng.choice((3, 6, 7, 9, 11, 12))
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, "a two-number calculator"),
      f"Number inputs `#{a_id}` and `#{b_id}`, a select `#{op_id}` with options whose "
      "values are `add`, `sub`, `mul` and `div` (labelled +, −, ×, ÷), and a "
      f"{cname} ({chex}) button `#{go_id}` labelled \"=\".",
      f"Clicking it writes the result into `#{out_id}` (empty on load), rounded to at most "
      f"two decimals without trailing zeros (7 / 2 shows 3.5); dividing by zero shows "
      f"\"{zero_msg}\".",
  ])
  A, B, O, G, R = (f"#{i}" for i in (a_id, b_id, op_id, go_id, out_id))
  rules = (
      rule("initial", "core", "The select offers four operations and the result is empty",
           b.count(f"{O} option", "==", 4), b.text(R, "==", "")),
      rule("dynamic", "core", f"{x} + {y} = {x + y}",
           b.fill(A, x), b.fill(B, y), b.select(O, "add"), b.click(G), b.text(R, "==", x + y)),
      rule("dynamic", "core", f"{x} × {y} = {x * y}",
           b.fill(A, x), b.fill(B, y), b.select(O, "mul"), b.click(G), b.text(R, "==", x * y)),
      rule("dynamic", "behavior", f"{dx} ÷ {dy} = {js_round2(dx / dy)}",
           b.fill(A, dx), b.fill(B, dy), b.select(O, "div"), b.click(G),
           b.text(R, "==", js_round2(dx / dy))),
      rule("dynamic", "behavior", f"{y} − {x + 60} = {y - x - 60}",
           b.fill(A, y), b.fill(B, x + 60), b.select(O, "sub"), b.click(G),
           b.text(R, "==", y - x - 60)),
      rule("dynamic", "behavior", f"Dividing by zero shows \"{zero_msg}\"",
           b.fill(A, dx), b.fill(B, 0), b.select(O, "div"), b.click(G), b.text(R, "==", zero_msg)),
      rule("initial", "rendering", f"The = button is {cname}",
           b.text(G, "==", "="), b.style(G, "background-color", "==", b.rgb(chex))),
  )
  body = f"""
<input id="{a_id}" type="number">
<select id="{op_id}">
  <option value="add">+</option>
  <option value="sub">&minus;</option>
  <option value="mul">&times;</option>
  <option value="div">&divide;</option>
</select>
<input id="{b_id}" type="number">
<button id="{go_id}">=</button>
<output id="{out_id}"></output>"""
  css = f"#{go_id} {{ background: {chex}; color: #fff; border: none; }}"
  script = f"""
const OPS = {{
  add: (a, b) => a + b,
  sub: (a, b) => a - b,
  mul: (a, b) => a * b,
  div: (a, b) => a / b,
}};
document.getElementById({jsv(go_id)}).addEventListener("click", () => {{
  const a = Number(document.getElementById({jsv(a_id)}).value);
  const b = Number(document.getElementById({jsv(b_id)}).value);
  const op = document.getElementById({jsv(op_id)}).value;
  const out = document.getElementById({jsv(out_id)});
  if (op === "div" && b === 0) {{
    out.textContent = {jsv(zero_msg)};
    return;
  }}
  out.textContent = String(Math.round(OPS[op](a, b) * 100) / 100);
}});"""
  return b.Draft(request, rules, b.page("Calculator", css, body, script))


BMI_WORDS = (("Underweight", "Normal", "Overweight", "Obese"),
             ("Under", "Healthy", "Over", "Obese"))


def bmi_calculator(rng: random.Random) -> b.Draft:
  w_id, h_id = b.pick(rng, (("weight", "height"), ("kg", "cm"), ("mass", "stature")))
  go_id = b.pick(rng, ("calculate", "bmi-btn", "compute"))
  words = b.pick(rng, BMI_WORDS)
  err = b.pick(rng, ("Please enter valid numbers", "Invalid input", "Enter weight and height"))
  cname, chex = b.pick(rng, b.COLORS)
  h = rng.randint(150, 200)
  w_norm = rng.randint(math.ceil(19 * (h / 100) ** 2), math.floor(24 * (h / 100) ** 2))
  w_over = math.ceil(27 * (h / 100) ** 2)
  w_obese = rng.randint(math.ceil(31 * (h / 100) ** 2), math.ceil(31 * (h / 100) ** 2) + 20)
  bmi = lambda w: fixed(w / (h / 100) ** 2, 1)
  request = " ".join([
      b.opening(rng, "a BMI calculator"),
      f"Inputs `#{w_id}` (kg) and `#{h_id}` (cm) and a button `#{go_id}`. On click, "
      "`#bmi` shows weight / (height in metres)² with one decimal and `#category` shows "
      f"\"{words[0]}\" below 18.5, \"{words[1]}\" below 25, \"{words[2]}\" below 30, "
      f"else \"{words[3]}\".",
      f"If either input is empty or not positive, `#bmi` is emptied and `#category` "
      f"shows \"{err}\". Both outputs are empty on load; `#bmi` is {cname} ({chex}).",
  ])
  W, H, G = f"#{w_id}", f"#{h_id}", f"#{go_id}"
  rules = (
      rule("initial", "core", "Outputs are empty on load",
           b.exists(W), b.text("#bmi", "==", ""), b.text("#category", "==", "")),
      rule("dynamic", "core", f"{w_norm} kg at {h} cm gives BMI {bmi(w_norm)}",
           b.fill(W, w_norm), b.fill(H, h), b.click(G), b.text("#bmi", "==", bmi(w_norm))),
      rule("dynamic", "core", f"{w_norm} kg at {h} cm is \"{words[1]}\"",
           b.fill(W, w_norm), b.fill(H, h), b.click(G), b.text("#category", "==", words[1])),
      rule("dynamic", "behavior", f"{w_over} kg is \"{words[2]}\" and {w_obese} kg "
           f"\"{words[3]}\" at {h} cm",
           b.fill(W, w_over), b.fill(H, h), b.click(G), b.text("#category", "==", words[2]),
           b.fill(W, w_obese), b.click(G), b.text("#category", "==", words[3])),
      rule("dynamic", "behavior", f"A missing height shows \"{err}\"",
           b.fill(W, w_norm), b.click(G), b.text("#category", "==", err), b.text("#bmi", "==", "")),
      rule("dynamic", "rendering", f"The BMI value is {cname}",
           b.fill(W, w_norm), b.fill(H, h), b.click(G), b.style("#bmi", "color", "==", b.rgb(chex))),
  )
  body = f"""
<label>Weight (kg) <input id="{w_id}" type="number"></label>
<label>Height (cm) <input id="{h_id}" type="number"></label>
<button id="{go_id}">Calculate</button>
<p>BMI: <span id="bmi"></span></p>
<p id="category"></p>"""
  css = f"#bmi {{ color: {chex}; font-weight: bold; }}"
  script = f"""
const WORDS = {jsv(list(words))};
document.getElementById({jsv(go_id)}).addEventListener("click", () => {{
  const weight = Number(document.getElementById({jsv(w_id)}).value);
  const height = Number(document.getElementById({jsv(h_id)}).value) / 100;
  const out = document.getElementById("bmi");
  const category = document.getElementById("category");
  if (!(weight > 0) || !(height > 0)) {{
    out.textContent = "";
    category.textContent = {jsv(err)};
    return;
  }}
  const bmi = weight / height ** 2;
  out.textContent = bmi.toFixed(1);
  category.textContent = WORDS[bmi < 18.5 ? 0 : bmi < 25 ? 1 : bmi < 30 ? 2 : 3];
}});"""
  return b.Draft(request, rules, b.page("BMI", css, body, script))
