"""Game families: tic-tac-toe, guess the number, quiz."""

from __future__ import annotations

import random

from rcca_jax.data.families import base as b
from rcca_jax.data.families.base import esc, jsv, rule

WIN_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def tic_tac_toe(rng: random.Random) -> b.Draft:
  first, second = b.pick(rng, (("X", "O"), ("O", "X")))
  status_id = b.pick(rng, ("status", "message", "turn"))
  restart_id = b.pick(rng, ("restart", "new-game", "reset"))
  win_fmt = b.pick(rng, ("{} wins!", "Winner: {}", "Player {} won"))
  turn_fmt = b.pick(rng, ("Next: {}", "{}'s turn", "Turn: {}"))
  draw_msg = b.pick(rng, ("Draw!", "It's a tie", "No winner"))
  cname, chex = b.pick(rng, b.COLORS)
  line = b.pick(rng, WIN_LINES)
  others = [c for c in range(9) if c not in line]
  blockers = rng.sample(others, 2)  # the second player's two marks cannot win
  free = [c for c in others if c not in blockers]
  moves = [line[0], blockers[0], line[1], blockers[1], line[2]]
  cell = lambda k: f"#board .cell[data-index='{k}']"
  request = " ".join([
      b.opening(rng, "a two-player tic-tac-toe game"),
      "`#board` holds 9 buttons with class `cell` and `data-index` 0-8 (row by row).",
      f"{first} moves first, then players alternate; a move writes the mark into the cell, "
      "and taken cells or moves after the game ended are ignored.",
      f"`#{status_id}` shows \"{turn_fmt.format('P')}\" for the player to move, "
      f"\"{win_fmt.format('P')}\" when P completes a row, column or diagonal, and "
      f"\"{draw_msg}\" when the board fills without a winner.",
      f"The winning cells get class `win` with {b.article(cname)} {cname} ({chex}) background; "
      f"`#{restart_id}` starts a new game.",
  ])
  play = [b.click(cell(k)) for k in moves]
  S = f"#{status_id}"
  rules = (
      rule("initial", "core", "The board has 9 empty cells and it is the first player's turn",
           b.count("#board .cell", "==", 9), b.text(S, "==", turn_fmt.format(first)),
           b.text(cell(4), "==", "")),
      rule("dynamic", "core", f"The first click places {first}, the next {second}",
           b.click(cell(moves[0])), b.click(cell(moves[1])),
           b.text(cell(moves[0]), "==", first), b.text(cell(moves[1]), "==", second),
           b.text(S, "==", turn_fmt.format(first))),
      rule("dynamic", "behavior", "Clicking a taken cell does nothing",
           b.click(cell(moves[0])), b.click(cell(moves[0])),
           b.text(cell(moves[0]), "==", first), b.text(S, "==", turn_fmt.format(second))),
      rule("dynamic", "core", f"Completing a line shows \"{win_fmt.format(first)}\"",
           *play, b.text(S, "==", win_fmt.format(first))),
      rule("dynamic", "behavior", "No moves are accepted after a win",
           *play, b.click(cell(free[0])),
           b.count("#board .cell:empty", "==", 4)),
      rule("dynamic", "rendering", f"Winning cells are highlighted {cname}",
           *play, b.count("#board .cell.win", "==", 3),
           b.style(cell(line[1]), "background-color", "==", b.rgb(chex))),
      rule("dynamic", "behavior", f"A full board without a line shows \"{draw_msg}\"",
           *[b.click(cell(k)) for k in (0, 1, 2, 4, 3, 5, 7, 6, 8)],
           b.text(S, "==", draw_msg), b.text(cell(8), "==", first)),
      rule("dynamic", "behavior", "Restart clears the board",
           *play[:3], b.click(f"#{restart_id}"), b.count("#board .cell:empty", "==", 9),
           b.text(S, "==", turn_fmt.format(first))),
  )
  cells = "\n".join(f'  <button class="cell" data-index="{k}"></button>' for k in range(9))
  body = f"""
<div id="board">
{cells}
</div>
<p id="{status_id}"></p>
<button id="{restart_id}">Restart</button>"""
  css = f"""
#board {{ display: grid; grid-template-columns: repeat(3, 3rem); gap: 4px; }}
.cell {{ width: 3rem; height: 3rem; font-size: 1.5rem; margin: 0; background: #f3f4f6; }}
.cell.win {{ background: {chex}; color: #fff; }}"""
  wf = win_fmt.split("{}")
  tf = turn_fmt.split("{}")
  script = f"""
const LINES = {jsv([list(w) for w in WIN_LINES])};
const cells = Array.from(document.querySelectorAll("#board .cell"));
const status = document.getElementById({jsv(status_id)});
let board;
let player;
let over;
function start() {{
  board = Array(9).fill("");
  player = {jsv(first)};
  over = false;
  cells.forEach((cell) => {{
    cell.textContent = "";
    cell.classList.remove("win");
  }});
  status.textContent = {jsv(tf[0])} + player + {jsv(tf[1])};
}}
function play(index) {{
  if (over || board[index]) return;
  board[index] = player;
  cells[index].textContent = player;
  const line = LINES.find((l) => l.every((k) => board[k] === player));
  if (line) {{
    over = true;
    line.forEach((k) => cells[k].classList.add("win"));
    status.textContent = {jsv(wf[0])} + player + {jsv(wf[1])};
  }} else if (board.every(Boolean)) {{
    over = true;
    status.textContent = {jsv(draw_msg)};
  }} else {{
    player = player === "X" ? "O" : "X";
    status.textContent = {jsv(tf[0])} + player + {jsv(tf[1])};
  }}
}}
cells.forEach((cell) => cell.addEventListener("click", () => play(Number(cell.dataset.index))));
document.getElementById({jsv(restart_id)}).addEventListener("click", start);
start();"""
  return b.Draft(request, rules, b.page("Tic-tac-toe", css, body, script))


def guess_number(rng: random.Random) -> b.Draft:
  hi = b.pick(rng, (10, 20, 50, 100))
  target = rng.randint(2, hi - 1)
  low, high = rng.randint(1, target - 1), rng.randint(target + 1, hi)
  in_id = b.pick(rng, ("guess", "guess-input", "number"))
  btn_id = b.pick(rng, ("check", "submit-guess", "try"))
  msg_id = b.pick(rng, ("feedback", "hint", "message"))
  words = b.pick(rng, (("Too low", "Too high", "Correct!"), ("Higher!", "Lower!", "You got it!"),
                       ("Go up", "Go down", "Bingo!")))
  out_msg = f"Enter a number from 1 to {hi}"
  cname, chex = b.pick(rng, (("green", "#16a34a"), ("teal", "#0d9488"), ("blue", "#2563eb")))
  request = " ".join([
      b.opening(rng, f"a guess-the-number game (1 to {hi})"),
      f"The secret number is {target}: put it in the `data-target` attribute of `#game` and "
      "read it from there.",
      f"The player types into `#{in_id}` and clicks `#{btn_id}`; `#{msg_id}` then shows "
      f"\"{words[0]}\" if the guess is below the secret, \"{words[1]}\" if above, "
      f"\"{words[2]}\" (in {cname}, {chex}) if equal, and \"{out_msg}\" for anything that "
      f"is not a whole number in range.",
      "`#attempts` counts valid guesses, starting at 0.",
  ])
  guess = lambda v: (b.fill(f"#{in_id}", v), b.click(f"#{btn_id}"))
  M = f"#{msg_id}"
  rules = (
      rule("initial", "core", "The secret is stored and no attempts are made",
           b.attr("#game", "data-target", "==", target), b.text("#attempts", "==", "0")),
      rule("dynamic", "core", f"Guessing {low} says \"{words[0]}\"",
           *guess(low), b.text(M, "==", words[0])),
      rule("dynamic", "core", f"Guessing {high} says \"{words[1]}\"",
           *guess(high), b.text(M, "==", words[1])),
      rule("dynamic", "core", f"Guessing {target} says \"{words[2]}\"",
           *guess(target), b.text(M, "==", words[2])),
      rule("dynamic", "behavior", "Valid guesses are counted",
           *guess(low), *guess(high), b.text("#attempts", "==", "2")),
      rule("dynamic", "behavior", f"1 and {hi} are valid guesses",
           *guess(1), b.text(M, "==", words[0]), *guess(hi), b.text(M, "==", words[1])),
      rule("dynamic", "behavior", "Out-of-range input is rejected and not counted",
           *guess(hi + 5), b.text(M, "==", out_msg), b.text("#attempts", "==", "0")),
      rule("dynamic", "rendering", f"The success message is {cname}",
           *guess(target), b.style(M, "color", "==", b.rgb(chex))),
  )
  body = f"""
<div id="game" data-target="{target}">
  <input id="{in_id}" type="number" min="1" max="{hi}">
  <button id="{btn_id}">Guess</button>
  <p id="{msg_id}"></p>
  <p>Attempts: <span id="attempts">0</span></p>
</div>"""
  css = f".correct {{ color: {chex}; font-weight: bold; }}"
  script = f"""
const MAX = {hi};
const game = document.getElementById("game");
const message = document.getElementById({jsv(msg_id)});
let attempts = 0;
document.getElementById({jsv(btn_id)}).addEventListener("click", () => {{
  const target = Number(game.dataset.target);
  const guess = Number(document.getElementById({jsv(in_id)}).value);
  message.className = "";
  if (!Number.isInteger(guess) || guess < 1 || guess > MAX) {{
    message.textContent = {jsv(out_msg)};
    return;
  }}
  attempts += 1;
  document.getElementById("attempts").textContent = String(attempts);
  if (guess < target) {{
    message.textContent = {jsv(words[0])};
  }} else if (guess > target) {{
    message.textContent = {jsv(words[1])};
  }} else {{
    message.textContent = {jsv(words[2])};
    message.className = "correct";
  }}
}});"""
  return b.Draft(request, rules, b.page("Guess the number", css, body, script))


QUESTION_BANK = (
    ("What is 2 + 3?", ("4", "5", "6")),
    ("Which planet is known as the red planet?", ("Venus", "Mars", "Jupiter")),
    ("What is the capital of France?", ("Paris", "Lyon", "Nice")),
    ("How many days are in a week?", ("5", "7", "10")),
    ("Which gas do plants absorb?", ("Oxygen", "Carbon dioxide", "Helium")),
    ("What colour do you get mixing blue and yellow?", ("Green", "Purple", "Orange")),
    ("How many legs does a spider have?", ("6", "8", "10")),
    ("Which ocean is the largest?", ("Atlantic", "Indian", "Pacific")),
    ("What is 9 × 3?", ("27", "24", "21")),
    ("Which language runs in web browsers?", ("COBOL", "JavaScript", "Fortran")),
)
ANSWERS = {q: a for q, a in zip(
    (x[0] for x in QUESTION_BANK),
    ("5", "Mars", "Paris", "7", "Carbon dioxide", "Green", "8", "Pacific", "27", "JavaScript"))}


def quiz(rng: random.Random) -> b.Draft:
  qs = b.pick(rng, QUESTION_BANK, rng.randint(3, 5))
  n = len(qs)
  submit_id = b.pick(rng, ("submit", "grade", "check-answers", "finish"))
  score_id = b.pick(rng, ("score", "result", "grade-text"))
  fmt_style = rng.randrange(2)
  fmt = lambda k: (f"Score: {k}/{n}", f"You got {k} of {n} right")[fmt_style]
  cname, chex = b.pick(rng, b.COLORS)
  options = [list(o) for _, o in qs]
  for o in options:
    rng.shuffle(o)
  correct = [o.index(ANSWERS[q]) for (q, _), o in zip(qs, options)]
  wrong = [(c + 1) % 3 for c in correct]
  request = " ".join([
      b.opening(rng, f"a {n}-question multiple-choice quiz"),
      " ".join(f"Q{k}: \"{q}\" options " + ", ".join(f"\"{x}\"" for x in o) +
               f" (correct: \"{ANSWERS[q]}\")." for k, ((q, _), o) in enumerate(zip(qs, options), 1)),
      f"Question K's options are radio inputs named `qK` whose values are the option texts, "
      f"each inside its `<label>`. The button `#{submit_id}` grades the quiz and shows "
      f"\"{fmt('N')}\" in `#{score_id}` (empty before grading).",
      f"Correctly answered questions (elements with class `question`) get class `correct` "
      f"and {b.article(cname)} {cname} ({chex}) border colour.",
  ])
  radio = lambda k, x: f"input[name='q{k}'][value='{x}']"
  pick_all = lambda picks: [b.check(radio(k, options[k - 1][p])) for k, p in enumerate(picks, 1)]
  S = f"#{score_id}"
  half = [c if k % 2 == 0 else w for k, (c, w) in enumerate(zip(correct, wrong))]
  n_half = sum(1 for k in range(n) if k % 2 == 0)
  rules = (
      rule("initial", "core", f"There are {n} questions with 3 options each",
           b.count("input[type='radio']", "==", 3 * n), b.text(S, "==", "")),
      rule("dynamic", "core", f"All correct answers score {n}",
           *pick_all(correct), b.click(f"#{submit_id}"), b.text(S, "==", fmt(n))),
      rule("dynamic", "core", f"Answering every other question correctly scores {n_half}",
           *pick_all(half), b.click(f"#{submit_id}"), b.text(S, "==", fmt(n_half))),
      rule("dynamic", "behavior", "Unanswered questions count as wrong",
           b.click(f"#{submit_id}"), b.text(S, "==", fmt(0))),
      rule("dynamic", "rendering", f"Correct questions are marked {cname}",
           *pick_all(half), b.click(f"#{submit_id}"), b.count(".question.correct", "==", n_half),
           b.style(".question.correct", "border-color", "==", b.rgb(chex))),
      rule("initial", "behavior", "The first question's text is shown",
           b.text(".question", "contains", qs[0][0])),
  )
  blocks = []
  for k, ((q, _), o) in enumerate(zip(qs, options), 1):
    opts = "\n".join(f'    <label><input type="radio" name="q{k}" value="{esc(x)}"> {esc(x)}</label>'
                     for x in o)
    blocks.append(f'<fieldset class="question">\n  <legend>{esc(q)}</legend>\n{opts}\n</fieldset>')
  body = "\n".join(blocks) + f'\n<button id="{submit_id}">Submit</button>\n<p id="{score_id}"></p>'
  css = (".question { border: 2px solid #d1d5db; margin-bottom: .6rem; }\n"
         f".question.correct {{ border-color: {chex}; }}\nlabel {{ display: block; }}")
  score_expr = ("`Score: ${score}/${ANSWERS.length}`",
                "`You got ${score} of ${ANSWERS.length} right`")[fmt_style]
  script = f"""
const ANSWERS = {jsv([ANSWERS[q] for q, _ in qs])};
document.getElementById({jsv(submit_id)}).addEventListener("click", () => {{
  let score = 0;
  document.querySelectorAll(".question").forEach((box, i) => {{
    const chosen = box.querySelector("input:checked");
    const right = chosen !== null && chosen.value === ANSWERS[i];
    box.classList.toggle("correct", right);
    if (right) score += 1;
  }});
  document.getElementById({jsv(score_id)}).textContent = {score_expr};
}});"""
  return b.Draft(request, rules, b.page("Quiz", css, body, script))
