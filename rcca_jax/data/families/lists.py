"""List and collection families: todo, search filter, sortable table, pagination, cart, poll."""

from __future__ import annotations

import math
import random

from rcca_jax.data.families import base as b
from rcca_jax.data.families.base import esc, jsv, rule
from rcca_jax.data.families.forms import NAMES

CHORES = ("Buy milk", "Walk the dog", "Call mum", "Pay rent", "Water plants", "Book dentist",
          "Fix bike", "Read a chapter", "Clean desk", "Send invoice")
WORDS = {
    "fruits": ("Apple", "Banana", "Cherry", "Grape", "Mango", "Orange", "Papaya", "Peach",
               "Pear", "Plum", "Lemon", "Melon", "Kiwi", "Apricot"),
    "countries": ("Austria", "Brazil", "Canada", "Denmark", "Egypt", "France", "Germany",
                  "India", "Japan", "Kenya", "Mexico", "Norway", "Peru", "Spain"),
    "languages": ("Python", "JavaScript", "Rust", "Go", "Haskell", "Kotlin", "Swift", "Ruby",
                  "Java", "Scala", "Elixir", "Julia", "Perl", "Lua"),
}


def todo(rng: random.Random) -> b.Draft:
  in_id, add_id, list_id = b.pick(rng, (("new-todo", "add", "todo-list"),
                                        ("task-input", "add-task", "tasks"),
                                        ("item", "add-item", "items")))
  left_id = b.pick(rng, ("remaining", "left", "todo-count"))
  start = b.pick(rng, CHORES, rng.randint(0, 3))
  new = b.pick(rng, [c for c in CHORES if c not in start])
  style = rng.randrange(2)
  fmt = lambda n: (f"{n} items left", f"Remaining: {n}")[style]
  k = len(start)
  request = " ".join([
      b.opening(rng, "a todo list"),
      f"An input `#{in_id}` and a button `#{add_id}` add a task (Enter in the input also "
      f"adds it) as an `<li>` of `#{list_id}`; the input is cleared afterwards and blank "
      "input is ignored.",
      "Start with " + (", ".join(f"\"{c}\"" for c in start) if start else "no tasks") + ".",
      "Each item holds its text in a `<span>` and a delete button with class `delete`; "
      "clicking the span toggles class `done` on the `<li>`, and the span of a done item "
      "has `text-decoration: line-through`.",
      f"`#{left_id}` shows \"{fmt('N')}\" where N counts tasks not done.",
  ])
  L, I, A = f"#{list_id}", f"#{in_id}", f"#{add_id}"
  last = f"{L} li:last-child"
  rules = (
      rule("initial", "core", f"The list starts with {k} tasks", b.count(f"{L} li", "==", k),
           b.text(f"#{left_id}", "==", fmt(k))),
      rule("dynamic", "core", f"Adding \"{new}\" appends it to the list",
           b.fill(I, new), b.click(A), b.count(f"{L} li", "==", k + 1),
           b.text(last, "contains", new), b.text(f"#{left_id}", "==", fmt(k + 1))),
      rule("dynamic", "behavior", "Blank input is ignored",
           b.fill(I, "   "), b.click(A), b.count(f"{L} li", "==", k)),
      rule("dynamic", "behavior", "Enter adds the task and clears the input",
           b.fill(I, new), b.press("Enter", I), b.count(f"{L} li", "==", k + 1), b.value(I, "==", "")),
      rule("dynamic", "behavior", "The delete button removes its task",
           b.fill(I, new), b.click(A), b.click(f"{last} .delete"), b.count(f"{L} li", "==", k)),
      rule("dynamic", "behavior", "Clicking a task's text marks it done",
           b.fill(I, new), b.click(A), b.click(f"{last} span"),
           b.attr(last, "class", "contains", "done"), b.text(f"#{left_id}", "==", fmt(k))),
      rule("dynamic", "rendering", "Done tasks are struck through",
           b.fill(I, new), b.click(A), b.click(f"{last} span"),
           b.style(f"{last} span", "text-decoration-line", "==", "line-through")),
  )
  body = f"""
<h1>Todo</h1>
<input id="{in_id}" placeholder="What needs doing?">
<button id="{add_id}">Add</button>
<ul id="{list_id}"></ul>
<p id="{left_id}"></p>"""
  css = ".done span { text-decoration: line-through; color: #888; }\nli span { cursor: pointer; }"
  count_expr = ("`${left} items left`", "`Remaining: ${left}`")[style]
  script = f"""
const list = document.getElementById({jsv(list_id)});
const input = document.getElementById({jsv(in_id)});
function updateCount() {{
  const left = list.querySelectorAll("li:not(.done)").length;
  document.getElementById({jsv(left_id)}).textContent = {count_expr};
}}
function addTask(text) {{
  const li = document.createElement("li");
  const span = document.createElement("span");
  span.textContent = text;
  span.addEventListener("click", () => {{
    li.classList.toggle("done");
    updateCount();
  }});
  const remove = document.createElement("button");
  remove.className = "delete";
  remove.textContent = "Delete";
  remove.addEventListener("click", () => {{
    li.remove();
    updateCount();
  }});
  li.append(span, " ", remove);
  list.appendChild(li);
  updateCount();
}}
function addFromInput() {{
  const text = input.value.trim();
  if (!text) return;
  addTask(text);
  input.value = "";
}}
document.getElementById({jsv(add_id)}).addEventListener("click", addFromInput);
input.addEventListener("keydown", (event) => {{
  if (event.key === "Enter") addFromInput();
}});
{jsv(list(start))}.forEach(addTask);
updateCount();"""
  return b.Draft(request, rules, b.page("Todo", css, body, script))


def filter_search(rng: random.Random) -> b.Draft:
  kind = b.pick(rng, sorted(WORDS))
  items = sorted(b.pick(rng, WORDS[kind], rng.randint(6, 10)))
  in_id = b.pick(rng, ("search", "filter", "query"))
  list_id = b.pick(rng, ("items", "results", kind))
  empty = b.pick(rng, ("No results", "Nothing found", f"No {kind} match"))
  word = b.pick(rng, items)
  start = rng.randrange(max(1, len(word) - 2))
  query = word[start:start + 2].lower()
  matches = sum(query in it.lower() for it in items)
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, f"a searchable list of {kind}"),
      f"`#{list_id}` lists, as `<li>` elements in this order: " + ", ".join(items) + ".",
      f"Typing in `#{in_id}` filters case-insensitively by substring: non-matching items get "
      "the `hidden` attribute.",
      f"`#count` shows \"S of {len(items)}\" (S = shown items) in {cname} ({chex}), and "
      f"`#empty` (hidden otherwise) shows \"{empty}\" when nothing matches.",
  ])
  shown = f"#{list_id} li:not([hidden])"
  rules = (
      rule("initial", "core", f"All {len(items)} items are shown",
           b.count(shown, "==", len(items)), b.text("#count", "==", f"{len(items)} of {len(items)}")),
      rule("dynamic", "core", f"Searching \"{query}\" shows {matches} items",
           b.fill(f"#{in_id}", query), b.count(shown, "==", matches),
           b.text("#count", "==", f"{matches} of {len(items)}")),
      rule("dynamic", "behavior", f"Searching \"{items[-1]}\" shows only that item",
           b.fill(f"#{in_id}", items[-1]), b.count(shown, "==", 1), b.hidden("#empty")),
      rule("dynamic", "behavior", "Search is case-insensitive",
           b.fill(f"#{in_id}", query.upper()), b.count(shown, "==", matches)),
      rule("dynamic", "behavior", f"No match shows \"{empty}\"",
           b.fill(f"#{in_id}", "zzqx"), b.count(shown, "==", 0), b.visible("#empty"),
           b.text("#empty", "==", empty)),
      rule("dynamic", "behavior", "Clearing the search shows everything again",
           b.fill(f"#{in_id}", "zzqx"), b.fill(f"#{in_id}", ""), b.count(shown, "==", len(items)),
           b.hidden("#empty")),
      rule("initial", "rendering", f"The count is {cname}",
           b.style("#count", "color", "==", b.rgb(chex))),
  )
  lis = "\n".join(f"  <li>{esc(it)}</li>" for it in items)
  body = f"""
<input id="{in_id}" placeholder="Search {esc(kind)}">
<p id="count"></p>
<ul id="{list_id}">
{lis}
</ul>
<p id="empty" hidden>{esc(empty)}</p>"""
  css = f"#count {{ color: {chex}; }}"
  script = f"""
const input = document.getElementById({jsv(in_id)});
const items = Array.from(document.querySelectorAll({jsv(f"#{list_id} li")}));
function apply() {{
  const query = input.value.trim().toLowerCase();
  let shown = 0;
  items.forEach((li) => {{
    li.hidden = !li.textContent.toLowerCase().includes(query);
    if (!li.hidden) shown += 1;
  }});
  document.getElementById("count").textContent = `${{shown}} of ${{items.length}}`;
  document.getElementById("empty").hidden = shown > 0;
}}
input.addEventListener("input", apply);
apply();"""
  return b.Draft(request, rules, b.page("Search", css, body, script))


CITIES = ("Oslo", "Lima", "Rome", "Pune", "Kyiv", "Doha", "Riga", "Bern", "Cork", "Nice")


def sortable_table(rng: random.Random) -> b.Draft:
  n = rng.randint(4, 7)
  names = b.pick(rng, NAMES, n)
  ages = rng.sample(range(18, 80), n)
  cities = [b.pick(rng, CITIES) for _ in range(n)]
  table_id = b.pick(rng, ("people", "table", "roster", "members"))
  cname, chex = b.pick(rng, b.COLORS)
  rows = list(zip(names, ages, cities))
  by_age = sorted(rows, key=lambda r: r[1])
  by_name = sorted(rows, key=lambda r: r[0])
  request = " ".join([
      b.opening(rng, "a sortable table"),
      f"Table `#{table_id}` has columns Name, Age, City and these rows in this order: " +
      "; ".join(f"{r[0]}, {r[1]}, {r[2]}" for r in rows) + ".",
      "The Name and Age header cells have ids `#sort-name` and `#sort-age`; clicking one "
      "sorts the body rows by that column ascending (ages numerically), clicking it again "
      "sorts descending, and so on.",
      "The sorted header gets `aria-sort` \"ascending\" or \"descending\" (the other one "
      "has no `aria-sort`). Header cells have "
      f"{b.article(cname)} {cname} ({chex}) background.",
  ])
  T = f"#{table_id} tbody"
  cell = lambda row, col: f"{T} tr:{row} td:nth-child({col})"
  rules = (
      rule("initial", "core", f"The table has {n} rows in the given order",
           b.count(f"{T} tr", "==", n), b.text(cell("first-child", 1), "==", names[0])),
      rule("dynamic", "core", f"Sorting by age puts {by_age[0][0]} ({by_age[0][1]}) first",
           b.click("#sort-age"), b.text(cell("first-child", 2), "==", by_age[0][1]),
           b.text(cell("first-child", 1), "==", by_age[0][0])),
      rule("dynamic", "behavior", "Clicking Age twice sorts descending",
           b.click("#sort-age"), b.click("#sort-age"),
           b.text(cell("first-child", 2), "==", by_age[-1][1])),
      rule("dynamic", "core", "Sorting by name orders rows alphabetically",
           b.click("#sort-name"), b.text(cell("first-child", 1), "==", by_name[0][0]),
           b.text(cell("last-child", 1), "==", by_name[-1][0])),
      rule("dynamic", "rendering", "The sorted header shows its direction",
           b.click("#sort-age"), b.attr("#sort-age", "aria-sort", "==", "ascending"),
           b.click("#sort-age"), b.attr("#sort-age", "aria-sort", "==", "descending"),
           b.click("#sort-name"),
           b.js("!document.querySelector('#sort-age').hasAttribute('aria-sort')")),
      rule("initial", "rendering", f"Header cells are {cname}",
           b.style("#sort-name", "background-color", "==", b.rgb(chex))),
  )
  trs = "\n".join(f"    <tr><td>{r[0]}</td><td>{r[1]}</td><td>{r[2]}</td></tr>" for r in rows)
  body = f"""
<table id="{table_id}">
  <thead>
    <tr><th id="sort-name">Name</th><th id="sort-age">Age</th><th>City</th></tr>
  </thead>
  <tbody>
{trs}
  </tbody>
</table>"""
  css = (f"th {{ background: {chex}; color: #fff; cursor: pointer; padding: .3rem .8rem; }}\n"
         "td { padding: .3rem .8rem; }")
  script = f"""
const tbody = document.querySelector({jsv(T)});
const COLUMNS = {{ "sort-name": 0, "sort-age": 1 }};
let sortedBy = null;
let ascending = true;
function sortBy(header) {{
  ascending = sortedBy === header.id ? !ascending : true;
  sortedBy = header.id;
  const col = COLUMNS[header.id];
  const rows = Array.from(tbody.rows);
  rows.sort((a, b) => {{
    const x = a.cells[col].textContent;
    const y = b.cells[col].textContent;
    const order = col === 1 ? Number(x) - Number(y) : x.localeCompare(y);
    return ascending ? order : -order;
  }});
  rows.forEach((row) => tbody.appendChild(row));
  document.querySelectorAll("th").forEach((th) => th.removeAttribute("aria-sort"));
  header.setAttribute("aria-sort", ascending ? "ascending" : "descending");
}}
Object.keys(COLUMNS).forEach((id) => {{
  const header = document.getElementById(id);
  header.addEventListener("click", () => sortBy(header));
}});"""
  return b.Draft(request, rules, b.page("Sortable table", css, body, script))


def pagination(rng: random.Random) -> b.Draft:
  per = rng.randint(3, 10)
  pages = rng.randint(3, 8)
  total = per * (pages - 1) + rng.randint(1, per)
  noun = b.pick(rng, ("Item", "Article", "Post", "Product", "Photo", "Song"))
  list_id = b.pick(rng, ("list", "page-items", "feed", "results"))
  cname, chex = b.pick(rng, b.COLORS)
  request = " ".join([
      b.opening(rng, f"a paginated list of {total} entries"),
      f"Entries are \"{noun} 1\" to \"{noun} {total}\", shown {per} per page as `<li>` "
      f"elements of `#{list_id}`.",
      f"Buttons `#prev` and `#next` change the page and are disabled on the first and last "
      f"page; `#page-info` reads \"Page X of Y\" in {cname} ({chex}).",
  ])
  li = f"#{list_id} li"
  rules = (
      rule("initial", "core", f"The first page shows {noun} 1 to {noun} {per}",
           b.count(li, "==", per), b.text(f"{li}:first-child", "==", f"{noun} 1"),
           b.text("#page-info", "==", f"Page 1 of {pages}")),
      rule("dynamic", "core", "Next shows the second page",
           b.click("#next"), b.text(f"{li}:first-child", "==", f"{noun} {per + 1}"),
           b.text("#page-info", "==", f"Page 2 of {pages}")),
      rule("dynamic", "behavior", f"The last page shows the remaining {total - per * (pages - 1)}",
           *([b.click("#next")] * (pages - 1)), b.count(li, "==", total - per * (pages - 1)),
           b.text(f"{li}:last-child", "==", f"{noun} {total}"),
           b.js("document.querySelector('#next').disabled === true")),
      rule("initial", "behavior", "Previous is disabled on the first page",
           b.js("document.querySelector('#prev').disabled === true")),
      rule("dynamic", "behavior", "Next then Previous returns to page 1",
           b.click("#next"), b.click("#prev"), b.text("#page-info", "==", f"Page 1 of {pages}"),
           b.text(f"{li}:first-child", "==", f"{noun} 1")),
      rule("initial", "rendering", f"The page info is {cname}",
           b.style("#page-info", "color", "==", b.rgb(chex))),
  )
  body = f"""
<ul id="{list_id}"></ul>
<button id="prev">Previous</button>
<span id="page-info"></span>
<button id="next">Next</button>"""
  css = f"#page-info {{ color: {chex}; margin: 0 .5rem; }}"
  script = f"""
const TOTAL = {total};
const PER_PAGE = {per};
const PAGES = Math.ceil(TOTAL / PER_PAGE);
let page = 1;
const list = document.getElementById({jsv(list_id)});
function render() {{
  list.innerHTML = "";
  const first = (page - 1) * PER_PAGE + 1;
  for (let i = first; i < first + PER_PAGE && i <= TOTAL; i++) {{
    const li = document.createElement("li");
    li.textContent = {jsv(noun + " ")} + i;
    list.appendChild(li);
  }}
  document.getElementById("page-info").textContent = `Page ${{page}} of ${{PAGES}}`;
  document.getElementById("prev").disabled = page === 1;
  document.getElementById("next").disabled = page === PAGES;
}}
document.getElementById("prev").addEventListener("click", () => {{
  page -= 1;
  render();
}});
document.getElementById("next").addEventListener("click", () => {{
  page += 1;
  render();
}});
render();"""
  return b.Draft(request, rules, b.page("Pagination", css, body, script))


PRODUCTS = ("Mug", "Notebook", "Pencil", "Lamp", "Poster", "Backpack", "Sticker", "Candle",
            "Headphones", "Bottle")


def shopping_cart(rng: random.Random) -> b.Draft:
  names = b.pick(rng, PRODUCTS, rng.randint(3, 5))
  cents = [rng.randint(2, 60) * 100 + b.pick(rng, (0, 50, 99, 25)) for _ in names]
  sym = b.pick(rng, ("$", "€", "£"))
  cname, chex = b.pick(rng, b.COLORS)
  slug = [n.lower() for n in names]
  i, j = rng.sample(range(len(names)), 2)
  money = lambda c: f"{sym}{c // 100}.{c % 100:02d}"
  request = " ".join([
      b.opening(rng, "a small shop page with a cart"),
      "Products and prices: " + ", ".join(f"{n} {money(c)}" for n, c in zip(names, cents)) + ".",
      "Each product shows its price in `#price-NAME` and has an add button `#add-NAME` "
      "(NAME = product name in lower case).",
      f"`#cart-count` shows the number of items in the cart (on {b.article(cname)} {cname} "
      f"({chex}) badge), "
      f"`#cart-total` the total as \"{money(1234)}\"-style text, and `#cart-items` one `<li>` "
      "per product in the cart reading \"NAME × QTY\".",
      "`#clear` empties the cart.",
  ])
  ai, aj = f"#add-{slug[i]}", f"#add-{slug[j]}"
  rules = (
      rule("initial", "core", f"The cart starts empty at {money(0)}",
           b.text("#cart-count", "==", "0"), b.text("#cart-total", "==", money(0))),
      rule("initial", "behavior", f"{names[i]} is priced {money(cents[i])}",
           b.text(f"#price-{slug[i]}", "==", money(cents[i]))),
      rule("dynamic", "core", f"Two {names[i]} and one {names[j]} total "
           f"{money(2 * cents[i] + cents[j])}",
           b.click(ai), b.click(ai), b.click(aj), b.text("#cart-count", "==", "3"),
           b.text("#cart-total", "==", money(2 * cents[i] + cents[j]))),
      rule("dynamic", "behavior", "Adding a product twice gives one line with quantity 2",
           b.click(ai), b.click(ai), b.count("#cart-items li", "==", 1),
           b.text("#cart-items li", "contains", f"{names[i]} × 2")),
      rule("dynamic", "behavior", "Clear empties the cart",
           b.click(ai), b.click(aj), b.click("#clear"), b.count("#cart-items li", "==", 0),
           b.text("#cart-total", "==", money(0))),
      rule("initial", "rendering", f"The cart badge is {cname}",
           b.style("#cart-count", "background-color", "==", b.rgb(chex))),
  )
  cards = "\n".join(
      f'  <li>{n} <span id="price-{s}"></span> <button id="add-{s}" data-name="{n}">Add</button></li>'
      for n, s in zip(names, slug))
  body = f"""
<h1>Shop <span id="cart-count" class="badge">0</span></h1>
<ul>
{cards}
</ul>
<h2>Cart</h2>
<ul id="cart-items"></ul>
<p>Total: <span id="cart-total"></span></p>
<button id="clear">Clear cart</button>"""
  css = f".badge {{ background: {chex}; color: #fff; border-radius: 999px; padding: 0 .5rem; }}"
  prices = "{" + ", ".join(f"{jsv(n)}: {c}" for n, c in zip(names, cents)) + "}"
  script = f"""
const PRICES = {prices};
const SYMBOL = {jsv(sym)};
const cart = new Map();
function money(cents) {{
  return SYMBOL + (cents / 100).toFixed(2);
}}
function render() {{
  const list = document.getElementById("cart-items");
  list.innerHTML = "";
  let count = 0;
  let total = 0;
  for (const [name, qty] of cart) {{
    const li = document.createElement("li");
    li.textContent = `${{name}} \\u00d7 ${{qty}}`;
    list.appendChild(li);
    count += qty;
    total += qty * PRICES[name];
  }}
  document.getElementById("cart-count").textContent = String(count);
  document.getElementById("cart-total").textContent = money(total);
}}
for (const name of Object.keys(PRICES)) {{
  const key = name.toLowerCase();
  document.getElementById("price-" + key).textContent = money(PRICES[name]);
  document.getElementById("add-" + key).addEventListener("click", () => {{
    cart.set(name, (cart.get(name) || 0) + 1);
    render();
  }});
}}
document.getElementById("clear").addEventListener("click", () => {{
  cart.clear();
  render();
}});
render();"""
  return b.Draft(request, rules, b.page("Shop", css, body, script))


def js_round(x: float) -> int:
  """JavaScript's Math.round for the values used here."""
  return math.floor(x + 0.5)


def poll(rng: random.Random) -> b.Draft:
  kind = b.pick(rng, ("fruits", "languages"))
  options = b.pick(rng, WORDS[kind], rng.randint(3, 5))
  counts = [rng.randint(0, 12) for _ in options]
  counts[0] = max(counts[0], 1)
  slug = [o.lower() for o in options]
  question = b.pick(rng, (f"Which of these {kind} do you like best?", f"Pick your favourite {kind[:-1]}",
                          "Vote now"))
  cname, chex = b.pick(rng, b.COLORS)
  i = rng.randrange(len(options))
  total = sum(counts)
  pct = lambda c, t: f"{js_round(100 * c / t) if t else 0}%"
  request = " ".join([
      b.opening(rng, f"a poll: \"{question}\""),
      "Options with their current votes: "
      + ", ".join(f"{o} {c}" for o, c in zip(options, counts)) + ".",
      "For each option NAME (lower case) show a button `#vote-NAME`, the votes in "
      "`#count-NAME`, the share in `#pct-NAME` as a whole percentage like \"42%\" "
      "(Math.round; 0% when there are no votes) and a bar `#bar-NAME` whose width is the "
      f"share, coloured {cname} ({chex}).",
      "`#total` reads \"N votes\"; each click adds one vote; `#reset` sets all votes to 0.",
  ])
  o = slug[i]
  rules = (
      rule("initial", "core", f"The poll starts with {total} votes",
           b.text("#total", "==", f"{total} votes"),
           b.text(f"#count-{slug[0]}", "==", counts[0])),
      rule("initial", "behavior", f"{options[0]} has {pct(counts[0], total)}",
           b.text(f"#pct-{slug[0]}", "==", pct(counts[0], total))),
      rule("dynamic", "core", f"Voting for {options[i]} adds one vote",
           b.click(f"#vote-{o}"), b.text(f"#count-{o}", "==", counts[i] + 1),
           b.text("#total", "==", f"{total + 1} votes")),
      rule("dynamic", "behavior", "Percentages update after two votes",
           b.click(f"#vote-{o}"), b.click(f"#vote-{o}"),
           b.text(f"#pct-{o}", "==", pct(counts[i] + 2, total + 2))),
      rule("dynamic", "behavior", "Reset clears all votes",
           b.click(f"#vote-{o}"), b.click("#reset"), b.text("#total", "==", "0 votes"),
           b.text(f"#pct-{o}", "==", "0%"), b.text(f"#count-{o}", "==", "0")),
      rule("initial", "rendering", f"Bars are {cname}",
           b.style(f"#bar-{slug[0]}", "background-color", "==", b.rgb(chex))),
  )
  rows = "\n".join(
      f'  <li><button id="vote-{s}">{esc(n)}</button> <span id="count-{s}"></span> votes, '
      f'<span id="pct-{s}"></span><div class="track"><div class="bar" id="bar-{s}"></div></div></li>'
      for n, s in zip(options, slug))
  body = f"""
<h1>{esc(question)}</h1>
<ul class="poll">
{rows}
</ul>
<p id="total"></p>
<button id="reset">Reset</button>"""
  css = (".poll { list-style: none; padding: 0; }\n.track { background: #e5e7eb; height: 8px; }\n"
         f".bar {{ background: {chex}; height: 8px; }}")
  votes = "{" + ", ".join(f"{jsv(s)}: {c}" for s, c in zip(slug, counts)) + "}"
  script = f"""
const votes = {votes};
function render() {{
  const total = Object.values(votes).reduce((a, b) => a + b, 0);
  for (const [key, n] of Object.entries(votes)) {{
    const share = total ? Math.round(100 * n / total) : 0;
    document.getElementById("count-" + key).textContent = String(n);
    document.getElementById("pct-" + key).textContent = share + "%";
    document.getElementById("bar-" + key).style.width = share + "%";
  }}
  document.getElementById("total").textContent = `${{total}} votes`;
}}
for (const key of Object.keys(votes)) {{
  document.getElementById("vote-" + key).addEventListener("click", () => {{
    votes[key] += 1;
    render();
  }});
}}
document.getElementById("reset").addEventListener("click", () => {{
  for (const key of Object.keys(votes)) votes[key] = 0;
  render();
}});
render();"""
  return b.Draft(request, rules, b.page("Poll", css, body, script))
