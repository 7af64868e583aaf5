"""Tests for the format stage: finding the HTML app in a response."""

from absl.testing import absltest, parameterized
import pytest

from rcca_jax.evaluation import browser
from rcca_jax.evaluation.extract import extract_app

DOC = "<!DOCTYPE html>\n<html>\n<body><p id='x'>hi</p></body>\n</html>"
DOC2 = "<!doctype html>\n<html lang=\"en\"><body><b>second</b></body></html>"
F = "```"


def fenced(content: str, lang: str = "html") -> str:
  return f"{F}{lang}\n{content}\n{F}\n"


class ExtractTest(parameterized.TestCase):

  def assertApp(self, response: str, expected_html: str):
    e = extract_app(response)
    self.assertIsNotNone(e)
    self.assertEqual(e.html, expected_html)
    s, t = e.html_span
    self.assertEqual(response[s:t], expected_html)
    self.assertFalse(e.inlined)
    self.assertEqual(e.segments, ((0, s, t - s),))
    return e

  def test_fenced_document(self):
    response = "Here is the app:\n\n" + fenced(DOC) + "\nEnjoy!"
    e = self.assertApp(response, DOC)
    self.assertEqual(e.html_span[0], response.index("<!DOCTYPE"))

  @parameterized.parameters("html", "HTML", "htm", "xhtml", "html title=app", "index.html",
                            "{.html}", "")
  def test_fence_tags(self, lang):
    self.assertApp(fenced(DOC, lang), DOC)

  def test_other_language_fence_is_not_the_app(self):
    self.assertIsNone(extract_app(fenced(DOC, "xml")))
    self.assertIsNone(extract_app(fenced(DOC, "python")))

  def test_raw_document(self):
    response = "Sure.\n" + DOC + "\nThat is all."
    self.assertApp(response, DOC)

  def test_raw_document_without_doctype(self):
    doc = "<html>\n<body>x</body>\n</HTML>"
    self.assertApp("intro\n  " + doc + "\n", doc)

  def test_raw_document_must_end(self):
    self.assertIsNone(extract_app("Sure.\n<!DOCTYPE html>\n<html><body>hi"))

  @parameterized.named_parameters(
      ("fenced_then_fenced", lambda: fenced(DOC) + "better:\n" + fenced(DOC2)),
      ("fenced_then_raw", lambda: fenced(DOC) + "better:\n" + DOC2 + "\n"),
      ("raw_then_fenced", lambda: DOC + "\nbetter:\n" + fenced(DOC2)),
      ("raw_then_raw", lambda: DOC + "\nbetter:\n" + DOC2),
      ("untagged_last", lambda: fenced(DOC) + fenced(DOC2, "")),
  )
  def test_last_complete_document_wins(self, make):
    self.assertApp(make(), DOC2)

  def test_truncated_trailing_fence_is_not_complete(self):
    truncated = f"{F}html\n<!DOCTYPE html>\n<html><body><script>let a = 1"
    self.assertApp(fenced(DOC) + "Improved version:\n" + truncated, DOC)
    self.assertIsNone(extract_app(truncated))

  def test_unclosed_fence_with_complete_document_counts_as_raw(self):
    response = f"{F}html\n{DOC2}\n"
    self.assertApp(response, DOC2)

  def test_closing_fence_glued_to_document_end(self):
    self.assertApp(f"{F}html\n{DOC}{F}\nThanks!", DOC)

  def test_fence_without_content_is_not_complete(self):
    self.assertIsNone(extract_app(f"{F}html\n{F}\n"))

  def test_untagged_fragment_is_not_the_app(self):
    self.assertIsNone(extract_app(fenced("<div>hi</div>", "")))

  def test_fragment_alone_is_the_app(self):
    self.assertApp(fenced("<button id='b'>go</button>"), "<button id='b'>go</button>")

  def test_css_and_js_without_html_is_not_an_app(self):
    self.assertIsNone(extract_app(fenced("body{}", "css") + fenced("alert(1)", "js")))

  def test_no_code(self):
    self.assertIsNone(extract_app("I cannot help with that."))
    self.assertIsNone(extract_app(""))

  def test_prose_html_tag_does_not_swallow_fence(self):
    response = "<html> is the root element. Code:\n" + fenced(DOC)
    self.assertApp(response, DOC)

  def test_crlf_fence(self):
    doc = DOC.replace("\n", "\r\n")
    response = "x\r\n```html\r\n" + doc + "\r\n```\r\nbye"
    self.assertApp(response, doc)
    fragment = "<p>a</p>\r\n<p>b</p>"
    self.assertApp("```html\r\n" + fragment + "\r\n```\r\n", fragment)

  def test_longer_fence_keeps_inner_triple_backticks(self):
    doc = "<!DOCTYPE html>\n<html><script>\nconst md = `\n```js\nx\n```\n`;\n</script></html>"
    response = "````html\n" + doc + "\n````\n"
    self.assertApp(response, doc)

  def test_tilde_fence(self):
    self.assertApp("~~~html\n" + DOC + "\n~~~\n", DOC)

  def test_reasoning_before_think_end_is_ignored(self):
    response = ("<think>Maybe:\n" + fenced(DOC2) + "no, better the other.</think>\n"
                "Final answer:\n" + fenced(DOC))
    e = self.assertApp(response, DOC)
    self.assertGreater(e.html_span[0], response.index("</think>"))
    only_thinking = "<think>\n" + fenced(DOC) + "</think>\nSorry, no code."
    self.assertIsNone(extract_app(only_thinking))

  def test_unclosed_reasoning_has_no_app(self):
    self.assertIsNone(extract_app("<think>\nplan:\n" + fenced(DOC)))


class InlineTest(parameterized.TestCase):

  HTML = "<div id=\"app\"><button id=\"inc\">+</button></div>"
  CSS = "#app { color: red; }"
  JS = "document.getElementById('inc').onclick = () => {};"

  def response(self):
    return ("index.html:\n" + fenced(self.HTML) + "style.css:\n" + fenced(self.CSS, "css")
            + "app.js:\n" + fenced(self.JS, "javascript") + "Done.")

  def test_structure(self):
    response = self.response()
    e = extract_app(response)
    self.assertTrue(e.inlined)
    html = e.html
    self.assertTrue(html.startswith("<!DOCTYPE html>"))
    css_at, body_at, js_at = html.index(self.CSS), html.index(self.HTML), html.index(self.JS)
    self.assertLess(html.index("<style>"), css_at)
    self.assertLess(css_at, html.index("</head>"))
    self.assertLess(html.index("<body>"), body_at)
    self.assertLess(body_at, js_at)
    self.assertLess(html.index("<script>"), js_at)
    self.assertLess(js_at, html.index("</body>"))
    self.assertEqual(e.html_span, (response.index(self.HTML),
                                   response.index(self.JS) + len(self.JS)))

  def test_offsets_map_back(self):
    response = self.response()
    e = extract_app(response)
    for part in (self.HTML, self.CSS, self.JS):
      app_at, resp_at = e.html.index(part), response.index(part)
      for k in range(len(part)):
        self.assertEqual(e.to_response(app_at + k), resp_at + k)
        self.assertEqual(e.to_app(resp_at + k), app_at + k)
      self.assertEqual(e.span_to_response(app_at, app_at + len(part)),
                       [(resp_at, resp_at + len(part))])
    self.assertIsNone(e.to_response(0))                       # "<!DOCTYPE" glue
    self.assertIsNone(e.to_response(e.html.index("<script>")))
    self.assertIsNone(e.to_response(len(e.html)))
    self.assertIsNone(e.to_app(0))                            # the prose before the fences

  def test_span_across_glue_drops_it(self):
    response = self.response()
    e = extract_app(response)
    spans = e.span_to_response(0, len(e.html))
    self.assertEqual(sorted(spans), sorted(
        [(response.index(p), response.index(p) + len(p)) for p in (self.HTML, self.CSS, self.JS)]))
    glue_start = e.html.index("</style>")
    self.assertEqual(e.span_to_response(glue_start, glue_start + 5), [])

  def test_several_css_and_js_fences_are_kept_in_order(self):
    response = (fenced(".a{}", "css") + fenced("<p>x</p>") + fenced("let a=1;", "js")
                + fenced(".b{}", "css") + fenced("let b=a;", "js"))
    e = extract_app(response)
    html = e.html
    self.assertLess(html.index(".a{}"), html.index(".b{}"))
    self.assertLess(html.index(".b{}"), html.index("<p>x</p>"))
    self.assertLess(html.index("let a=1;"), html.index("let b=a;"))
    self.assertEqual(html.count("<script>"), 2)
    self.assertEqual(e.html_span, (response.index(".a{}"), response.index("let b=a;") + 8))

  def test_last_fragment_is_used(self):
    response = fenced("<p>old</p>") + fenced("<p>new</p>") + fenced("p{}", "css")
    e = extract_app(response)
    self.assertIn("<p>new</p>", e.html)
    self.assertNotIn("<p>old</p>", e.html)

  def test_full_document_beats_inlining(self):
    response = fenced(self.HTML) + fenced(self.CSS, "css") + fenced(DOC)
    e = extract_app(response)
    self.assertFalse(e.inlined)
    self.assertEqual(e.html, DOC)

  def test_truncated_js_fence_is_not_inlined(self):
    response = fenced(self.HTML) + fenced(self.CSS, "css") + f"{F}js\nlet x = ("
    e = extract_app(response)
    self.assertNotIn("let x", e.html)
    self.assertIn(self.CSS, e.html)


class PositionTest(parameterized.TestCase):

  def test_whole_document_maps_to_span(self):
    response = "pre\n" + fenced(DOC)
    e = extract_app(response)
    s = e.html_span[0]
    self.assertEqual(e.span_to_response(0, len(DOC)), [(s, s + len(DOC))])
    self.assertEqual(e.span_to_response(3, 8), [(s + 3, s + 8)])
    self.assertEqual(e.to_response(5), s + 5)
    self.assertIsNone(e.to_response(len(DOC)))

  def test_line_col_with_astral_characters(self):
    html = "<html>a😀b\nc😀😀d\n\n</html>"
    e = extract_app(html)
    self.assertEqual(e.html, html)
    self.assertEqual(html[e.line_col_to_app(0, 9)], "b")      # 6 + 'a' + 2 units
    self.assertEqual(e.line_col_to_app(1, 0), html.index("c"))
    first = html.index("c") + 1
    self.assertEqual(e.line_col_to_app(1, 1), first)
    self.assertEqual(e.line_col_to_app(1, 2), first)          # inside the surrogate pair
    self.assertEqual(e.line_col_to_app(1, 3), first + 1)
    self.assertEqual(html[e.line_col_to_app(1, 5)], "d")
    self.assertEqual(e.line_col_to_app(1, 99), html.index("d") + 1)  # clamped to line end
    self.assertEqual(e.line_col_to_app(2, 0), html.index("\n\n") + 1)
    self.assertEqual(e.line_col_to_app(50, 0), len(html))

  @parameterized.parameters(
      "<html>\nplain ascii\n</html>",
      "<html>\né ü 中文 😀x 👩‍👩‍👧 𝄞\n\t<b>🎉</b>\n</html>",
  )
  def test_line_col_round_trip_every_character(self, html):
    e = extract_app(html)
    for i, ch in enumerate(html):
      line = html.count("\n", 0, i)
      line_start = html.rfind("\n", 0, i) + 1
      column = len(html[line_start:i].encode("utf-16-le")) // 2   # what V8 reports
      self.assertEqual(e.line_col_to_app(line, column), i, msg=f"char {i} {ch!r}")

  def test_line_col_after_think_refers_to_app(self):
    response = "<think>🤔🤔</think>\n" + fenced("<html>😀\n<p>x</p></html>")
    e = extract_app(response)
    at = e.line_col_to_app(1, 1)
    self.assertEqual(e.html[at], "p")
    self.assertEqual(response[e.to_response(at)], "p")
    self.assertEqual(e.to_response(at), response.index("<p>") + 1)


@pytest.mark.browser
class ChromiumPositionTest(absltest.TestCase):
  """line_col_to_app agrees with the positions V8 reports over the DevTools protocol."""

  def test_exception_position_after_astral_characters(self):
    from playwright.sync_api import sync_playwright  # pylint: disable=import-outside-toplevel
    html = ("<!DOCTYPE html>\n<html><body>\n<p>" + "😀" * 12 + "</p><script>const a = '😀😀';"
            "  throw new Error('boom');</script>\n</body></html>")
    response = "<think>🤔</think>Here:\n```html\n" + html + "\n```\n"
    extraction = extract_app(response)
    details = []
    with sync_playwright() as p:
      chromium = p.chromium.launch(executable_path=browser.find_chromium(),
                                   args=list(browser.LAUNCH_ARGS))
      try:
        context = chromium.new_context()
        page = context.new_page()
        cdp = context.new_cdp_session(page)
        cdp.on("Runtime.exceptionThrown", lambda ev: details.append(ev["exceptionDetails"]))
        cdp.send("Runtime.enable")
        page.route("**/*", lambda route: route.fulfill(
            body=extraction.html, content_type="text/html; charset=utf-8")
                   if route.request.url == "http://app.test/" else route.abort())
        page.goto("http://app.test/", timeout=10_000)
        page.wait_for_timeout(50)
      finally:
        chromium.close()
    self.assertNotEmpty(details)
    at = extraction.line_col_to_app(details[0]["lineNumber"], details[0]["columnNumber"])
    self.assertTrue(extraction.html[at:].startswith("new Error('boom')"), msg=html[at:at + 20])
    resp_at = extraction.to_response(at)
    self.assertTrue(response[resp_at:].startswith("new Error('boom')"))


if __name__ == "__main__":
  absltest.main()
