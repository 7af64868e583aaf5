"""Tests for rcca_jax.credit.context: JS index and the four context relations."""

from absl.testing import absltest, parameterized

from rcca_jax.base.js_index import JsIndex
from rcca_jax.credit.context import expand_context
from rcca_jax.evaluation.source import parse_app

_APP = """<!DOCTYPE html><html><head><title>🙂 计数器</title></head><body>
<span id="count">0</span>
<button id="inc">+</button>
<button id="dec" onclick="dec()">-</button>
<button id="reset">reset</button>
<script>
const state = { count: 0 };
const countEl = document.getElementById('count');
function render() {
  countEl.textContent = '值 ' + state.count;
}
function clamp(v) {
  return Math.max(0, v);
}
function dec() {
  state.count = clamp(state.count - 1);
  render();
}
function onInc(e) {
  state.count += 1;
  render();
}
function unrelated() {
  const count = 5;
  return count * 2;
}
document.getElementById('inc').addEventListener('click', onInc);
document.getElementById('reset').onclick = () => { state.count = 0; render(); };
</script></body></html>"""


def _span(text, needle, nth=0):
  start = -1
  for _ in range(nth + 1):
    start = text.index(needle, start + 1)
  return (start, start + len(needle))


def _texts(html, spans):
  return [html[s:e] for s, e in spans]


class _ParsedAppTest(parameterized.TestCase):
  """Parses `_APP` and indexes its scripts once per test class."""

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    cls.app = parse_app(_APP)
    cls.ix = JsIndex(cls.app)


class JsIndexTest(_ParsedAppTest):

  def test_functions_named_with_str_offsets(self):
    names = [f.name for f in self.ix.functions]
    for name in ("render", "clamp", "dec", "onInc", "unrelated"):
      self.assertIn(name, names)
    (render,) = self.ix.functions_named("render")
    # Offsets are str indices although the document has multi-byte characters before.
    self.assertTrue(_APP[render.span[0]:render.span[1]].startswith("function render() {"))
    self.assertTrue(_APP[render.span[0]:render.span[1]].endswith("}"))
    self.assertEqual(render.statements, 1)

  def test_bindings(self):
    events = sorted((b.event, b.target, b.handler_name or "") for b in self.ix.bindings)
    self.assertIn(("click", "<attribute>", "dec"), events)
    self.assertIn(("click", "document.getElementById('inc')", "onInc"), events)
    self.assertIn(("click", "document.getElementById('reset')", ""), events)

  def test_element_writes_and_lookups(self):
    self.assertEqual(_texts(_APP, self.ix.element_writes("#count")),
                     ["countEl.textContent = '值 ' + state.count;"])
    self.assertEqual(_texts(_APP, self.ix.element_lookup_statements("#count")),
                     ["const countEl = document.getElementById('count');"])
    # A look-up used in place is the statement that changes the element.
    self.assertEqual(_texts(_APP, self.ix.element_writes("#reset")),
                     ["document.getElementById('reset').onclick = () => { state.count = 0; "
                      "render(); };"])
    self.assertEqual(self.ix.element_writes("#missing"), [])

  def test_unused_functions_and_variables(self):
    self.assertEqual([f.name for f in self.ix.unused_functions()], ["unrelated"])
    # `a` is only ever updated in place: no statement uses its value.
    app = parse_app("<script>let a = 1; let b = 2; a += b; function f(x) { const y = x; }"
                    "</script>")
    self.assertEqual(_texts(app.html, JsIndex(app).unread_variables()),
                     ["let a = 1;", "a += b;", "const y = x;"])

  def test_function_at(self):
    pos = _APP.index("function onInc")
    self.assertEqual(self.ix.function_at(pos).name, "onInc")
    self.assertEqual(self.ix.function_at(_APP.index("state.count += 1")).name, "onInc")
    self.assertIsNone(self.ix.function_at(_APP.index("const state")))


class ExpandContextTest(_ParsedAppTest):

  def _ctx(self, direct):
    return expand_context(self.ix, direct)

  def test_enclosing_function(self):
    d = _span(_APP, "state.count += 1;")
    ctx = _texts(_APP, self._ctx([d]))
    self.assertIn("function onInc(e) {\n  ", ctx)
    self.assertTrue(any(t.startswith("\n  render();\n}") for t in ctx))

  def test_event_binding_addeventlistener(self):
    (f,) = self.ix.functions_named("onInc")
    ctx = _texts(_APP, self._ctx([f.span]))
    self.assertIn("document.getElementById('inc').addEventListener('click', onInc);", ctx)

  def test_event_binding_attribute(self):
    (f,) = self.ix.functions_named("dec")
    ctx = self._ctx([f.span])
    self.assertIn(_span(_APP, "dec()", 0), ctx)

  def test_event_binding_onx_assignment(self):
    arrow = _span(_APP, "() => { state.count = 0; render(); }")
    ctx = _texts(_APP, self._ctx([arrow]))
    self.assertIn("document.getElementById('reset').onclick = ", ctx)

  def test_state_reads_and_writes(self):
    d = _span(_APP, "state.count += 1;")
    ctx = self._ctx([d])
    for other in ("state.count = clamp(state.count - 1);",
                  "countEl.textContent = '值 ' + state.count;",
                  "const state = { count: 0 };"):
      self.assertTrue(any(s <= _span(_APP, other)[0] and _span(_APP, other)[1] <= e for s, e in ctx),
                      other)
    # A local variable with the same name in another function is a different variable.
    local = _span(_APP, "const count = 5;")
    self.assertFalse(any(s < local[1] and local[0] < e for s, e in ctx))

  def test_reads_bring_their_writers(self):
    d = _span(_APP, "countEl.textContent = '值 ' + state.count;")
    ctx = _texts(_APP, self._ctx([d]))
    self.assertIn("const countEl = document.getElementById('count');", ctx)
    self.assertIn("state.count += 1;", ctx)

  def test_callees_and_callers(self):
    d = _span(_APP, "state.count = clamp(state.count - 1);")
    ctx = _texts(_APP, self._ctx([d]))
    self.assertIn("function clamp(v) {\n  return Math.max(0, v);\n}", ctx)   # callee
    (render,) = self.ix.functions_named("render")
    ctx = _texts(_APP, self._ctx([render.span]))
    self.assertEqual(ctx.count("render();"), 3)                               # callers
    self.assertNotIn("function clamp(v) {\n  return Math.max(0, v);\n}", ctx)

  def test_context_excludes_direct_and_is_sorted_merged(self):
    d1 = _span(_APP, "state.count += 1;")
    d2 = _span(_APP, "render();", 1)
    ctx = self._ctx([d2, d1])
    self.assertEqual(ctx, sorted(ctx))
    for (a, b), (c, _) in zip(ctx, ctx[1:]):
      self.assertLess(b, c)
    for s, e in ctx:
      for ds, de in (d1, d2):
        self.assertFalse(s < de and ds < e)
    self.assertEqual(ctx, self._ctx([d1, d2]))

  def test_html_element_brings_lookups(self):
    tag = _span(_APP, '<span id="count">')
    ctx = _texts(_APP, expand_context(self.ix, [tag], [("count", tag)]))
    self.assertIn("const countEl = document.getElementById('count');", ctx)


if __name__ == "__main__":
  absltest.main()
