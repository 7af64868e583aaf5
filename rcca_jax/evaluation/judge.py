"""Judge backend for rubrics without an executable check.

Talks to any OpenAI-compatible chat-completions endpoint (vLLM, SGLang, ...): POST
`{base}/chat/completions` with the model name, asking for a JSON verdict
`{"passed": bool, "severity": "minor|major|critical"|null, "evidence": [quoted code],
"reason": str}`. Replies are parsed robustly (bare JSON, JSON in a code fence or inside
prose); transport errors are retried a bounded number of times; a reply that never
parses makes the rubric ungraded with the reason. A rubric's requests share one time
budget (tries, back-off and `Retry-After` waits together), so a judge that never
answers costs at most that budget.

`ChatClient` is the one retrying chat client (bounded retries with exponential
back-off, a request budget, usage counting); the rubric `Judge` and the benchmark
judges (`rcca_jax.bench`) both send through it.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import email.utils
import json
import re
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Callable, Iterator

from rcca_jax.base.schema import SEVERITIES

_SYSTEM = (
    "You grade one requirement of a generated single-file web app. Read the app code and "
    "decide whether the requirement is met. Answer with JSON only: {\"passed\": true|false, "
    "\"severity\": null|\"minor\"|\"major\"|\"critical\", \"evidence\": [exact code excerpts "
    "copied from the app that support your verdict], \"reason\": \"one sentence\"}. "
    "Severity when not passed: critical = the feature is missing or cannot be used, major = "
    "it exists but behaves wrongly, minor = a small deviation.")


@dataclasses.dataclass
class Verdict:
  passed: bool | None                 # None: ungraded (no usable answer)
  severity: str | None
  quotes: list[str]
  reason: str


def chat_url(base_url: str) -> str:
  """`.../v1` or a bare server URL -> the chat-completions endpoint."""
  base = base_url.rstrip("/")
  if base.endswith("/chat/completions"):
    return base
  if not base.endswith("/v1"):
    base += "/v1"
  return base + "/chat/completions"


# Errors a chat request can raise: transport, HTTP status, a body that is not the
# expected JSON shape.
TRANSPORT_ERRORS = (urllib.error.URLError, OSError, ValueError, KeyError, IndexError,
                    TypeError)


def post_chat(url: str, payload: dict[str, Any], *, timeout: float,
              api_key: str | None = None) -> dict[str, Any]:
  """One POST to a chat-completions endpoint; returns the decoded reply body."""
  headers = {"Content-Type": "application/json"}
  if api_key:
    headers["Authorization"] = f"Bearer {api_key}"
  req = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers,
                               method="POST")
  with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310
    text = resp.read().decode("utf-8", "replace")
  try:
    body = json.loads(text)
  except json.JSONDecodeError as e:
    raise ValueError(f"the reply is not JSON ({e}): {text[:200]!r}") from None
  if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
    raise ValueError(f"not a chat-completions reply: {str(body)[:200]}")
  return body


def retry_after(error: Exception) -> float | None:
  """Seconds an HTTP 429 or 503 reply asks to wait (`Retry-After`: seconds or an
  HTTP date); None for other errors or without a usable header."""
  if not isinstance(error, urllib.error.HTTPError) or error.code not in (429, 503):
    return None
  value = (error.headers or {}).get("Retry-After")
  if not value:
    return None
  try:
    return max(0.0, float(value))
  except ValueError:
    pass
  try:
    when = email.utils.parsedate_to_datetime(value)
  except (TypeError, ValueError):
    return None
  return max(0.0, when.timestamp() - time.time())


class JudgeError(RuntimeError):
  """No usable reply: the server failed after the retries, or the budget is spent."""


class BudgetSpent(JudgeError):
  """The run's judge request budget is used up."""


@dataclasses.dataclass
class ChatClient:
  """An OpenAI-compatible chat endpoint with bounded retries and a request budget.

  `retries`: extra tries after a transport failure (HTTP error, timeout, a body that is
  not JSON or not the chat schema), with exponential back-off (0.5 s doubling, at most
  `max_backoff` s; the `Retry-After` of a 429 or 503 instead), or after a reply the
  caller cannot use; `budget`: seconds one `complete` may take, tries and waits
  together (0 = no limit; each try's timeout is cut to what is left); `max_requests`:
  requests over the client's life (0 = no limit; when spent, BudgetSpent). Safe to
  share between threads. The API key is left out of its repr.
  """

  base_url: str
  model: str
  timeout: float = 120.0
  retries: int = 2
  max_requests: int = 0
  max_tokens: int = 2048
  temperature: float = 0.0
  api_key: str | None = dataclasses.field(default=None, repr=False)
  max_backoff: float = 8.0
  budget: float = 0.0
  requests: int = 0               # sent so far
  _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, init=False,
                                            repr=False, compare=False)

  @property
  def url(self) -> str:
    return chat_url(self.base_url)

  def payload(self, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"model": self.model, "messages": messages, "temperature": self.temperature,
            "max_tokens": self.max_tokens, **extra}

  def _spend(self) -> None:
    with self._lock:
      if self.max_requests and self.requests >= self.max_requests:
        raise BudgetSpent(f"judge request budget of {self.max_requests} spent")
      self.requests += 1

  def complete(self, payload: dict[str, Any], usage: collections.Counter | None = None,
               *, usable: Callable[[dict[str, Any]], bool] | None = None
               ) -> dict[str, Any]:
    """The reply message; counts requests and tokens into `usage`.

    A reply that `usable` rejects is asked again at once (no back-off); the last try's
    reply is returned either way. Raises BudgetSpent, or JudgeError (naming the last
    failure) after the last try or when the time budget is spent.
    """
    error = ""
    deadline = time.monotonic() + self.budget if self.budget else None
    for attempt in range(self.retries + 1):
      timeout = self.timeout
      if deadline is not None:
        timeout = min(timeout, deadline - time.monotonic())
        if timeout <= 0:
          raise JudgeError(f"judge time budget of {self.budget:g}s spent after "
                           f"{attempt} tries: {error}"[:500])
      self._spend()
      if usage is not None:
        usage["requests"] += 1
      try:
        body = post_chat(self.url, payload, timeout=timeout, api_key=self.api_key)
        message = body["choices"][0]["message"]
        if not isinstance(message, dict):
          raise TypeError("the reply's message is not an object")
        ok = usable is None or usable(message)
      except TRANSPORT_ERRORS as e:
        error = f"{type(e).__name__}: {e}"
        if attempt < self.retries:
          wait = retry_after(e)
          wait = min(0.5 * 2 ** attempt, self.max_backoff) if wait is None else wait
          if deadline is not None and time.monotonic() + wait >= deadline:
            raise JudgeError(f"judge time budget of {self.budget:g}s spent after "
                             f"{attempt + 1} tries (next wait {wait:g}s): {error}"[:500])
          time.sleep(wait)
        continue
      if usage is not None:
        for name in ("prompt_tokens", "completion_tokens"):
          value = (body.get("usage") or {}).get(name)
          if isinstance(value, int):
            usage[name] += value
      if ok or attempt == self.retries:
        return message
    raise JudgeError(f"judge unavailable after {self.retries + 1} tries: {error}"[:500])

  async def complete_async(self, payload: dict[str, Any], usage: collections.Counter
                           ) -> dict[str, Any]:
    """`complete` in a worker thread (the event loop goes on meanwhile)."""
    return await asyncio.to_thread(self.complete, payload, usage)


def json_objects(text: str):
  """Candidate JSON objects in `text`: fenced blocks first, then every balanced {...}."""
  for m in re.finditer(r"```(?:json)?\s*(.*?)```", text, re.DOTALL):
    yield m.group(1).strip()
  depth, start, in_str, esc = 0, None, False, False
  for i, ch in enumerate(text):
    if in_str:
      esc = (ch == "\\") and not esc
      if ch == '"' and not esc:
        in_str = False
      continue
    if ch == '"' and depth:
      in_str, esc = True, False
    elif ch == "{":
      if depth == 0:
        start = i
      depth += 1
    elif ch == "}" and depth:
      depth -= 1
      if depth == 0:
        yield text[start:i + 1]


def json_dicts(text: str) -> Iterator[dict[str, Any]]:
  """The JSON objects of `text` that parse (`json_objects`' order)."""
  for candidate in json_objects(text):
    try:
      obj = json.loads(candidate)
    except json.JSONDecodeError:
      continue
    if isinstance(obj, dict):
      yield obj


def parse_verdict(text: str) -> Verdict:
  """The first JSON object in `text` with a boolean `passed`; ungraded if none."""
  for obj in json_dicts(text):
    if not isinstance(obj.get("passed"), bool):
      continue
    passed = obj["passed"]
    severity = obj.get("severity")
    severity = severity.strip().lower() if isinstance(severity, str) else None
    if passed:
      severity = None
    elif severity not in SEVERITIES:
      severity = "major"  # a failure without a usable severity counts as an ordinary failure
    quotes = obj.get("evidence") or []
    if isinstance(quotes, str):
      quotes = [quotes]
    quotes = [q for q in quotes if isinstance(q, str) and q.strip()][:10]
    return Verdict(passed, severity, quotes, str(obj.get("reason", ""))[:500])
  return Verdict(None, None, [], f"unparseable judge reply: {text[:200]!r}")


def _content(message: dict[str, Any]) -> str:
  return message["content"] or ""


class Judge:
  """Grades rubric texts against app code through a chat-completions endpoint."""

  def __init__(self, base_url: str, model: str, *, timeout: float = 20.0, retries: int = 2,
               max_app_chars: int = 24000, api_key: str | None = None,
               budget: float = 0.0):
    self.client = ChatClient(base_url, model, timeout=timeout, retries=retries,
                             max_tokens=512, api_key=api_key, max_backoff=4.0,
                             budget=budget)
    self.max_app_chars = max_app_chars

  def messages(self, request: str, rubric_text: str, app: str) -> list[dict[str, str]]:
    if len(app) > self.max_app_chars:
      app = app[:self.max_app_chars] + "\n<!-- (cut) -->"
    user = (f"User request:\n{request}\n\nRequirement to check:\n{rubric_text}\n\n"
            f"App code:\n```html\n{app}\n```")
    return [{"role": "system", "content": _SYSTEM}, {"role": "user", "content": user}]

  def grade(self, request: str, rubric_text: str, app: str) -> Verdict:
    """One verdict; transport failures and unparseable replies are tried again, `retries`
    times in all, then ungraded (with the last reply's reason when it did not parse)."""
    payload = self.client.payload(self.messages(request, rubric_text, app))
    try:
      message = self.client.complete(
          payload, usable=lambda m: parse_verdict(_content(m)).passed is not None)
    except JudgeError as e:
      return Verdict(None, None, [], str(e))
    return parse_verdict(_content(message))
