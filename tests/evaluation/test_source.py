"""Tests for the source stage: tree-sitter parsing of HTML, inline JS/CSS and handlers."""

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.evaluation import browser, extract, source

VALID_JS = {
    "classes": """
      class Counter extends Base {
        #count = 0;
        static instances = 0;
        static { Counter.instances = 1; }
        get value() { return this.#count; }
        set value(v) { this.#count = v; }
        #bump() { this.#count++; }
        async *ticks() { for await (const t of this.stream()) yield t; }
      }""",
    "async_await": """
      async function load() {
        try { const r = await Promise.all([a(), b()]); return r; }
        catch { return null; } finally { done(); }
      }
      const f = async ({a, b: [c, ...d] = []}, ...rest) => ({ ...a, [c]: await g(d) });""",
    "template_literals": "const s = `a ${b + `nested ${c ? `${d}` : 'e'}`} f`;\n"
                         "const t = html`<div class=\"${cls}\">"
                         "${items.map(i => `<li>${i}</li>`)}</div>`;",
    "optional_chaining": "const v = a?.b?.[c]?.(d) ?? 0; x ??= 1; y ||= 2; z &&= 3;",
    "regex_literals": r"const r = /[/\]]+\/(?<name>\d{2,})/giu; if (/^<\/script>$/i.test(s)) {}"
                      r" const q = a / b / c; s.replace(/\s+/g, ' ');",
    "split_script_tag": "document.write('<script src=x><\\/script>');"
                        " const e = \"</scr\" + \"ipt>\";",
    "misc": "label: for (const [k, v] of Object.entries(o)) { if (!v) continue label; }\n"
            "let big = 1_000_000n ** 2n; const {a = 1, ...rest} = obj;\n"
            "function* g() { yield* [1]; }\n"
            "switch (x) { case 1: { break; } default: }\n"
            "const o2 = { get x() { return 1; }, ['y' + 1]: 2, async m() {}, *gen() {} };",
    "asi": "let a = 1\nlet b = a\n++b\nconst c = () => {\n  return\n}\n",
    "unicode": "const café = '😀 ünï'; const π = Math.PI; // comment with </div>\n"
               "/* block </p> comment */ console.log(café, π);",
}


def doc(body: str, head: str = "") -> str:
  return f"<!DOCTYPE html>\n<html>\n<head>{head}</head>\n<body>\n{body}\n</body>\n</html>\n"


def fatal(parsed):
  return [e for e in parsed.errors if e.fatal]


class ValidSourceTest(parameterized.TestCase):

  @parameterized.named_parameters(*VALID_JS.items())
  def test_modern_js_has_no_errors(self, js):
    parsed = source.parse_app(doc(f"<script>{js}</script>"))
    self.assertEqual(parsed.errors, [])
    (block,) = parsed.js_blocks()
    self.assertEqual(block.text, js)
    self.assertEqual(block.kind, "script")

  def test_module_script(self):
    js = "import { a } from './a.js';\nexport default class {}\nconsole.log(import.meta.url);"
    parsed = source.parse_app(doc(f'<script type="module">{js}</script>'))
    self.assertEqual(parsed.errors, [])
    self.assertLen(parsed.js_blocks(), 1)

  def test_modern_css_has_no_errors(self):
    css = """
      :root { --accent: #0af; --gap: calc(1rem + 2px); }
      .grid { display: grid; grid-template-columns: repeat(auto-fill, minmax(8rem, 1fr)); }
      @media (max-width: 600px) and (prefers-color-scheme: dark) { .grid { gap: var(--gap); } }
      @keyframes pulse { from { opacity: 0; } 50% { opacity: .5 } to { opacity: 1; } }
      a:hover::after, input[type="text"]:focus-visible { content: "→"; color: rgb(0 0 0 / 50%); }
      @font-face { font-family: X; src: local("X"); }
      @import url("x.css");"""
    parsed = source.parse_app(doc("<p>x</p>", head=f"<style>{css}</style>"))
    self.assertEqual(parsed.errors, [])
    (block,) = parsed.css_blocks()
    self.assertEqual((block.kind, block.text), ("style", css))

  def test_comment_with_script_is_not_a_block(self):
    parsed = source.parse_app(doc("<!-- <script>let x = (;</script> --><p>hi</p>"))
    self.assertEqual(parsed.blocks, [])
    self.assertEqual(parsed.errors, [])

  @parameterized.parameters('type="application/json"', 'type="text/template"',
                            'type="text/x-handlebars"', 'src="app.js"')
  def test_non_js_scripts_are_skipped(self, attrs):
    parsed = source.parse_app(doc(f"<script {attrs}>{{ not js ((</script>"))
    self.assertEqual(parsed.blocks, [])
    self.assertEqual(parsed.errors, [])

  @parameterized.parameters("", 'type="text/javascript"', 'type="module"',
                            'type="application/javascript"', 'type=" Text/JavaScript "')
  def test_js_script_types_are_parsed(self, attrs):
    parsed = source.parse_app(doc(f"<script {attrs}>let x = 1;</script>"))
    self.assertLen(parsed.js_blocks(), 1)

  def test_template_content_is_inert(self):
    parsed = source.parse_app(doc("<template><script>let x = (;</script></template>"))
    self.assertEqual(fatal(parsed), [])

  def test_empty_script_and_document(self):
    parsed = source.parse_app(doc("<script></script>"))
    (block,) = parsed.blocks
    self.assertEqual((block.text, block.app_start), ("", block.app_end))
    self.assertEqual(parsed.errors, [])
    self.assertEqual(source.parse_app("").errors, [])


class ErrorTest(parameterized.TestCase):

  @parameterized.named_parameters(
      ("extra_brace", "function f() { return 1; }}", "JS syntax error: unexpected '}'", "}"),
      ("missing_paren", "function f() {\n  count++;\n  render(;\n}", "JS syntax error: missing ')'",
       "render(;"),
      ("bad_declaration", "const = 5;", "JS syntax error: unexpected 'const ='", "const ="),
      # The statement that opens the string, where the parser also fails.
      ("unterminated_string", "let s = 'abc;\nfoo();", "JS syntax error: unterminated string",
       "let s = 'abc;"),
      ("dangling_operator", "x = 1 +;", "JS syntax error: unexpected '+'", "+"),
  )
  def test_js_syntax_error_is_fatal(self, js, message, text):
    html = doc(f"<p>😀 ünï</p><script>{js}</script>")
    parsed = source.parse_app(html)
    (err,) = parsed.errors
    self.assertEqual(err.language, "js")
    self.assertTrue(err.fatal)
    self.assertTrue(err.message.startswith(message), msg=err.message)
    s, e = err.app_span
    self.assertEqual(html[s:e], text)
    self.assertTrue(parsed.fatal)

  def test_missing_node_without_statement_is_one_char(self):
    html = doc("<script>for (let i = 0; i < 3; i++) {</script>")
    (err,) = parsed_errors = source.parse_app(html).errors
    self.assertTrue(err.fatal, msg=parsed_errors)
    s, e = err.app_span
    self.assertGreater(e, s)
    self.assertIn("missing '}'", err.message)

  @parameterized.parameters("script", "style")
  def test_unterminated_raw_text_element_is_fatal(self, tag):
    html = f"<!DOCTYPE html><html><body><p>x</p><{tag}>let a = 1;\n"
    parsed = source.parse_app(html)
    (err,) = parsed.errors
    self.assertTrue(err.fatal)
    self.assertEqual(err.language, "html")
    self.assertEqual(err.message,
                     f"unterminated <{tag}>: no </{tag}> before the end of the document")
    self.assertEqual(html[err.app_span[0]:err.app_span[1]], f"<{tag}>")

  @parameterized.parameters("</script)>", "</scriptx>", "<\\/script>")
  def test_almost_end_tags_do_not_close_a_script(self, almost):
    html = f"<html><body><script>let a = 1;{almost}\n<p>x</p>"
    (err,) = [e for e in source.parse_app(html).errors if e.fatal]
    self.assertTrue(err.message.startswith("unterminated <script>"))

  @parameterized.parameters("</script>", "</SCRIPT >", "</Script\n>", "</script/>")
  def test_end_tag_variants_close_a_script(self, end_tag):
    html = f"<html><body><script>let a = 1;{end_tag}<p>x</p></body></html>"
    parsed = source.parse_app(html)
    self.assertEqual([e for e in parsed.errors if e.fatal], [])
    (block,) = parsed.blocks
    self.assertEqual(block.text, "let a = 1;")

  def test_stray_less_than_before_end_tag(self):
    html = "<html><head><style>p { color: red }<</style></head><body><p>x</p></body></html>"
    parsed = source.parse_app(html)
    self.assertFalse(parsed.fatal, msg=parsed.errors)
    (block,) = parsed.css_blocks()
    self.assertEqual(block.text, "p { color: red }<")

  def test_css_error_is_not_fatal(self):
    html = doc("<p>x</p>", head="<style>a { color: red; }} b {</style>")
    parsed = source.parse_app(html)
    self.assertNotEqual(parsed.errors, [])
    self.assertTrue(all(e.language == "css" and not e.fatal for e in parsed.errors))
    self.assertEqual(html[slice(*parsed.errors[0].app_span)], "} b {")

  def test_html_error_is_not_fatal(self):
    html = "<div><p>x</div></span>"
    (err,) = source.parse_app(html).errors
    self.assertEqual((err.language, err.fatal), ("html", False))
    self.assertEqual(html[slice(*err.app_span)], "</span>")

  def test_error_count_is_capped(self):
    js = "\n".join(f"const = {i};" for i in range(50))
    parsed = source.parse_app(doc(f"<script>{js}</script>"))
    self.assertLen(parsed.errors, source.MAX_ERRORS_PER_BLOCK)

  def test_each_script_is_parsed_on_its_own(self):
    html = doc("<script>function f() {</script><script>f();</script>")
    parsed = source.parse_app(html)
    self.assertLen(parsed.js_blocks(), 2)
    (err,) = parsed.errors
    self.assertLess(err.app_span[0], parsed.js_blocks()[1].app_start)


class AttributeTest(parameterized.TestCase):

  def test_handler_is_parsed_as_statements(self):
    html = doc('<button id="b" onclick="count++; render()">+</button>')
    parsed = source.parse_app(html)
    (block,) = parsed.blocks
    self.assertEqual((block.kind, block.language, block.text), ("attr", "js", "count++; render()"))
    self.assertEqual(html[block.app_start:block.app_end], "count++; render()")
    self.assertEqual(parsed.errors, [])
    at = html.index("render")
    self.assertEqual(html[slice(*parsed.statement_at(at))], "render()")

  def test_entities_are_decoded_and_mapped_back(self):
    html = doc('<p>😀</p><button onClick="say(&quot;hi&quot;); 😀 ((">x</button>')
    parsed = source.parse_app(html)
    (block,) = parsed.blocks
    self.assertEqual(block.text, 'say("hi"); 😀 ((')
    (err,) = parsed.errors
    self.assertFalse(err.fatal)
    self.assertIn("event-handler attribute", err.message)
    self.assertTrue(html[slice(*err.app_span)].startswith("😀"), msg=html[slice(*err.app_span)])
    call = block.tree.root_node.named_children[0]
    self.assertEqual(html[slice(*block.node_app_span(call))], "say(&quot;hi&quot;);")

  def test_non_handler_attributes_are_not_code(self):
    parsed = source.parse_app(doc('<a href="javascript:((" title="once (" data-on="x(">a</a>'))
    self.assertEqual(parsed.blocks, [])
    self.assertEqual(parsed.errors, [])


class NavigationTest(parameterized.TestCase):

  HTML = doc("<p id='msg'>héllo 😀</p>\n<button id=\"inc\" class=a>+</button>\n"
             "<script>\nlet count = 0;\nconst el = document.getElementById('inc');\n"
             "el.addEventListener('click', () => {\n  count += 1;\n  show(`n=${count} 😀`);\n"
             "});\nfunction show(t) { document.getElementById('msg').textContent = t; }\n"
             "</script>", head="<style>#msg { color: red; }</style>")

  def setUp(self):
    super().setUp()
    self.parsed = source.parse_app(self.HTML)

  def span_text(self, span):
    return self.HTML[span[0]:span[1]]

  def test_no_errors(self):
    self.assertEqual(self.parsed.errors, [])

  @parameterized.parameters(
      ("count += 1", "count += 1;"),
      ("n=${", "show(`n=${count} 😀`);"),
      ("count} 😀", "show(`n=${count} 😀`);"),
      ("let count", "let count = 0;"),
      ("getElementById('inc')", "const el = document.getElementById('inc');"),
      ("textContent", "document.getElementById('msg').textContent = t;"),
  )
  def test_statement_at(self, needle, statement):
    at = self.HTML.index(needle)
    self.assertEqual(self.span_text(self.parsed.statement_at(at)), statement)

  def test_statement_at_in_whitespace_of_function_body(self):
    at = self.HTML.index("function show(t) {") + len("function show(t) {")
    self.assertTrue(self.span_text(self.parsed.statement_at(at)).startswith("function show"))

  def test_statement_at_outside_js(self):
    self.assertIsNone(self.parsed.statement_at(self.HTML.index("héllo")))
    self.assertIsNone(self.parsed.statement_at(self.HTML.index("color: red")))
    script_start = self.parsed.js_blocks()[0].app_start
    self.assertIsNone(self.parsed.statement_at(script_start))  # the newline before `let`

  def test_block_at(self):
    css, js = self.parsed.css_blocks()[0], self.parsed.js_blocks()[0]
    self.assertIs(self.parsed.block_at(self.HTML.index("color: red")), css)
    self.assertIs(self.parsed.block_at(self.HTML.index("count += 1")), js)
    self.assertIsNone(self.parsed.block_at(self.HTML.index("héllo")))
    self.assertIsNone(self.parsed.block_at(js.app_end))

  def test_node_at_and_span_with_multibyte_text(self):
    (js,) = self.parsed.js_blocks()
    at = self.HTML.index("`n=")
    node = js.node_at(at)
    self.assertEqual(node.type, "template_string")
    self.assertEqual(self.span_text(js.node_app_span(node)), "`n=${count} 😀`")
    after = self.HTML.index("t; }")
    self.assertEqual(js.node_at(after).type, "identifier")
    self.assertIsNone(js.node_at(js.app_end))

  def test_start_tags_and_element_span(self):
    span = self.parsed.start_tag_for_id("inc")
    self.assertEqual(self.span_text(span), '<button id="inc" class=a>')
    tags = [t for t in self.parsed.start_tags if t.tag == "button"]
    self.assertEqual(tags[0].attributes, {"id": "inc", "class": "a"})
    self.assertIsNone(self.parsed.start_tag_for_id("nope"))
    element = self.parsed.html_tree.root_node.descendant_for_byte_range(0, 0)
    self.assertEqual(self.parsed.element_span(element), (0, len("<!")))

  def test_element_spans_and_self_closing_tags(self):
    parsed = source.parse_app(doc('<div id="a"><b>x</b></div><img id="i"><input id="s" />'))
    div, _, img = [t for t in parsed.start_tags if t.tag in ("div", "b", "img")]
    self.assertEqual(parsed.html[slice(*div.element_span)], '<div id="a"><b>x</b></div>')
    self.assertEqual(img.element_span, img.app_span)          # a void element
    self.assertNotIn("input", [t.tag for t in parsed.start_tags])
    (closed,) = parsed.self_closing_tags
    self.assertEqual((closed.tag, closed.attributes), ("input", {"id": "s"}))
    self.assertEqual(parsed.html[slice(*closed.element_span)], '<input id="s" />')

  def test_duplicate_id_is_ambiguous(self):
    parsed = source.parse_app(doc('<i id="a"></i><b id="a"></b>'))
    self.assertIsNone(parsed.start_tag_for_id("a"))


class ResponseCoordinatesTest(absltest.TestCase):

  def test_check_source_and_issues_on_inlined_app(self):
    js = "let n = 0;\nfunction inc() {\n  n++;\n  render(;\n}"
    response = ("Files:\n```html\n<p id=\"n\">0</p>\n```\n```css\np { color: red }\n```\n"
                f"```js\n{js}\n```\n")
    extraction = extract.extract_app(response)
    self.assertTrue(extraction.inlined)
    errors = source.check_source(extraction)
    (err,) = errors
    self.assertTrue(err.fatal)
    (issue,) = source.source_issues(extraction)
    self.assertEqual(issue.stage, "source")
    self.assertIsNone(issue.severity)
    self.assertEqual(issue.message, "JS syntax error: missing ')'")
    self.assertEqual([response[s:e] for s, e in issue.direct], ["render(;"])
    self.assertEqual(issue.evidence["node_span"], list(issue.direct[0]))
    self.assertTrue(issue.evidence["fatal"])
    self.assertEqual(issue.context, [])          # the statement is the direct span

  def test_context_is_rest_of_statement(self):
    response = ("```html\n<!DOCTYPE html><html><body><script>\nlet y = 2; x = 1 +;\n"
                "</script></body></html>\n```")
    extraction = extract.extract_app(response)
    (issue,) = source.source_issues(extraction)
    direct = [response[s:e] for s, e in issue.direct]
    context = [response[s:e] for s, e in issue.context]
    self.assertEqual(direct, ["+"])
    self.assertEqual(context, ["x = 1 ", ";"])
    for cs, ce in issue.context:
      for ds, de in issue.direct:
        self.assertTrue(ce <= ds or cs >= de)


# Valid classic-script JS that parsers get wrong easily: regex vs division, ASI, JSX-like
# comparisons, contextual keywords, HTML-like comments.
TRICKY_VALID_JS = [
    "if (a<b && c>d) {}", "x = a < b ? c : d > e", "x = a <b> c", "x = y / 2 / z",
    "a = b ? /re/ : c", "let a = b\n/hi/g.exec(c)", "if (x) {} /foo/.test(y)",
    "switch (1) { case /x/.test(s): break }", "<!-- html-like comment\nx = 1",
    "x = a /* c */ / b", "obj.if = 1; obj.class = 2;", "let async = 1; async = 2;",
    "var get = 1, set = 2, of = 3, yield = 4, let = 5;", "for (let of of xs);",
    "class A { static = 1; get = 2; async = 3 }", "x = { async: 1, get: 2, static: 4 }",
    "a\n++b", "x = a\n? b\n: c", "x = `\\``", "x = '\\\n'", "with (o) { x }",
    "class A { #p; has(o) { return #p in o } }", "x = 0b1010 + 0o17 + 0xFF + 1e-3 + .5",
    "const re = /(?<y>\\d{4})-(?<m>\\d\\d)/v", "x = (-x) ** 2", "f(a, b,)", "let [a,,b] = c",
    "x = async function*() { yield await 1 }", "(a) => (a)", "new Foo.Bar()",
    *VALID_JS.values(),
]
# tree-sitter is more lenient than V8 on early errors (`function () {}` as a statement,
# `let x; let x;`, top-level `await` in a classic script); the runtime stage reports those.
INVALID_JS = ["a(", "x = 1 +;", "function f( {}", "let s = 'abc;\nf()", "if (a { b() }",
              "x = {a: 1", "const = 5;", "a => {}}", "for (;;) {"]


@pytest.mark.browser
class ChromiumAgreementTest(absltest.TestCase):
  """Whatever V8 compiles must not be a (gating) source error, and clear errors are caught."""

  def test_against_v8(self):
    from playwright.sync_api import sync_playwright  # pylint: disable=import-outside-toplevel
    snippets = TRICKY_VALID_JS + INVALID_JS
    with sync_playwright() as p:
      chromium = p.chromium.launch(executable_path=browser.find_chromium(),
                                   args=list(browser.LAUNCH_ARGS))
      try:
        page = chromium.new_page()
        compiles = page.evaluate(
            "ss => ss.map(s => { try { new Function(s); return true; } catch { return false; } })",
            snippets)
      finally:
        chromium.close()
    self.assertEqual(compiles, [True] * len(TRICKY_VALID_JS) + [False] * len(INVALID_JS))
    for snippet, ok in zip(snippets, compiles):
      parsed = source.parse_app(doc(f"<script>{snippet}</script>"))
      self.assertEqual(not parsed.fatal, ok, msg=f"{snippet!r}: {parsed.errors}")


if __name__ == "__main__":
  absltest.main()
