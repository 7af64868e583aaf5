"""App responses and a one-rubric task, for the pool and browser tests."""

from rcca_jax.data import tasks as tasks_lib

HEADING_TASK = tasks_lib.parse_task({
    "id": "p", "request": "a heading",
    "rubrics": [{"id": "r1", "kind": "initial", "level": "core", "text": "shows Hi",
                 "check": 'expect text "h1" == "Hi"'}]})


def app(body: str) -> str:
  """A response holding one HTML page with `body`."""
  return f"```html\n<!DOCTYPE html><html><body>{body}</body></html>\n```"


def heading_app(text: str, script: str = "") -> str:
  """An app whose <h1> shows `text` (`HEADING_TASK` passes on "Hi"), running `script`."""
  return app(f"<h1>{text}</h1><script>{script}</script>")
