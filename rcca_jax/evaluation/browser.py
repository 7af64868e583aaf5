"""Locating and launching headless Chromium for the evaluator."""

from __future__ import annotations

import glob
import os
import shutil
import sys

# Flags that work as root in containers (docs/environment.md#browser). The dead proxy and
# the resolver rule are defence in depth: request routing already aborts everything.
LAUNCH_ARGS = (
  "--no-sandbox",
  "--disable-gpu",
  "--disable-dev-shm-usage",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
  "--disable-quic",
  "--disable-extensions",
  "--mute-audio",
  "--proxy-server=http://127.0.0.1:9",
  "--proxy-bypass-list=<-loopback>",
  "--host-resolver-rules=MAP * ~NOTFOUND",
  "--force-webrtc-ip-handling-policy=disable_non_proxied_udp",
)


# The switches Playwright launches headless Chromium with (the pinned version's, less
# --disable-features/--enable-features, which page_session.py repeats with its own;
# tests/evaluation/test_browser_session.py compares them with a Playwright launch's command line).
PLAYWRIGHT_SWITCHES = (
  "--disable-field-trial-config", "--disable-background-networking",
  "--disable-background-timer-throttling", "--disable-backgrounding-occluded-windows",
  "--disable-back-forward-cache", "--disable-breakpad",
  "--disable-component-extensions-with-background-pages", "--disable-component-update",
  "--no-default-browser-check", "--disable-default-apps", "--disable-dev-shm-usage",
  "--disable-edgeupdater", "--disable-extensions", "--allow-pre-commit-input",
  "--disable-hang-monitor", "--disable-ipc-flooding-protection", "--disable-popup-blocking",
  "--disable-prompt-on-repost", "--disable-renderer-backgrounding",
  "--disable-updater-scheduler", "--force-color-profile=srgb", "--metrics-recording-only",
  "--no-first-run", "--password-store=basic", "--use-mock-keychain", "--no-service-autorun",
  "--disable-search-engine-choice-screen", "--unsafely-disable-devtools-self-xss-warnings",
  "--enable-unsafe-swiftshader", "--edge-skip-compat-layer-relaunch",
  "--disable-stack-profiler", "--disable-infobars", "--disable-sync", "--do-not-de-elevate",
  "--headless", "--hide-scrollbars", "--mute-audio",
  "--blink-settings=primaryHoverType=2,availableHoverTypes=2,primaryPointerType=4,"
  "availablePointerTypes=4",
  "--no-sandbox",
)
PLAYWRIGHT_ENABLED_FEATURES = ("CDPScreenshotNewSurface", "SkipListAccountsWithoutGaiaCookies")


def launch_args(js_heap_mb: int) -> list[str]:
  """Chromium command-line flags, with V8's heap capped at `js_heap_mb` MiB."""
  return [*LAUNCH_ARGS, f"--js-flags=--max-old-space-size={int(js_heap_mb)}"]

# The headless shell (Chromium's old headless mode, without the browser UI that new
# headless mode still runs) is what Playwright launches for headless pages, and it costs
# about half the CPU per page load; the full browser is the fallback. The Debian binaries
# themselves start faster than the /usr/bin shell wrappers.
_SYSTEM_SHELLS = (
  "/usr/lib/chromium/chromium-headless-shell",
  "/usr/bin/chromium-headless-shell",
)
_SYSTEM_BROWSERS = (
  "/usr/lib/chromium/chromium",
  "/usr/bin/chromium",
  "/usr/bin/chromium-browser",
  "/usr/bin/google-chrome",
  "/snap/bin/chromium",
)
_PLAYWRIGHT_SHELL = os.path.join("chromium_headless_shell-*", "chrome-*", "*headless[-_]shell")
_PLAYWRIGHT_BROWSER = os.path.join("chromium-*", "chrome-linux*", "chrome")


def _playwright_managed(pattern: str) -> str | None:
  cache = os.environ.get("PLAYWRIGHT_BROWSERS_PATH") or os.path.expanduser("~/.cache/ms-playwright")
  found = [p for p in sorted(glob.glob(os.path.join(cache, pattern))) if os.access(p, os.X_OK)]
  return found[-1] if found else None


def find_headless_shell() -> str | None:
  """A system or Playwright-managed Chromium headless shell, if one is installed."""
  for path in _SYSTEM_SHELLS:
    if os.access(path, os.X_OK):
      return path
  return shutil.which("chromium-headless-shell") or _playwright_managed(_PLAYWRIGHT_SHELL)


def find_chromium() -> str | None:
  """Returns a Chromium executable: $RCCA_CHROMIUM, else a headless shell, else a full
  browser (system first, then Playwright's)."""
  env = os.environ.get("RCCA_CHROMIUM")
  if env:
    return env if os.access(env, os.X_OK) else None
  shell = find_headless_shell()
  if shell:
    return shell
  for path in _SYSTEM_BROWSERS:
    if os.access(path, os.X_OK):
      return path
  for name in ("chromium", "chromium-browser", "google-chrome"):
    found = shutil.which(name)
    if found:
      return found
  return _playwright_managed(_PLAYWRIGHT_BROWSER)


if __name__ == "__main__":
  for flag, finder, missing in (
      ("--find-headless-shell", find_headless_shell, "no Chromium headless shell found"),
      ("--find", find_chromium, "no Chromium found (set RCCA_CHROMIUM or run `make browser`)")):
    if flag in sys.argv[1:]:
      path = finder()
      if path is None:
        print(missing, file=sys.stderr)
        sys.exit(1)
      print(path)
      break
