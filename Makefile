# Set-up and entry points. `make demo` and `make test` do the whole set-up on a fresh
# Debian/Ubuntu machine: virtualenv, pinned pip packages, and a Chromium for the evaluator.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BROWSER_STAMP := $(VENV)/.browser
PYTEST_ARGS ?=

.PHONY: install browser demo test test-slow test-all bench clean

install: $(STAMP) $(BROWSER_STAMP)

$(STAMP): requirements.txt setup.cfg
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	# PyTorch (CPU build) only serves the parity tests against transformers' reference model.
	$(PY) -m pip install --quiet --extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# A system Chromium is preferred (installed with apt when running as root); otherwise
# Playwright downloads its own managed browser into the user's cache.
$(BROWSER_STAMP): $(STAMP)
	@if $(PY) -m rcca_jax.evaluation.browser --find >/dev/null 2>&1; then \
	  echo "browser: $$($(PY) -m rcca_jax.evaluation.browser --find)"; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  (apt-get install -y --no-install-recommends chromium || \
	   (apt-get update && apt-get install -y --no-install-recommends chromium)) >/dev/null; \
	else \
	  $(PY) -m playwright install chromium; \
	fi
	$(PY) -m rcca_jax.evaluation.browser --find
	touch $(BROWSER_STAMP)

browser: $(BROWSER_STAMP)

demo: install
	$(PY) -m rcca_jax.demo

test: install
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

test-slow: install
	$(PY) -m pytest -q -m "slow" $(PYTEST_ARGS)

test-all: install
	$(PY) -m pytest -q $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
