# Two commands do all the set-up: `make demo` and `make test` (each bootstraps .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint format bench docs mutate clean

EXAMPLE := docs/examples/ctxlife-redact

$(STAMP): pyproject.toml $(EXAMPLE)/pyproject.toml $(EXAMPLE)/src/ctxlife_redact/__init__.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,plot]'
	# The third-party example plugin of docs/writing-a-strategy.md, installed as a user would.
	$(BIN)/pip install --quiet ./$(EXAMPLE)
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ctxlife demo

# CI runs this (.ci/run): lint and types first, then every test.
test: lint
	$(BIN)/pytest

# While developing: everything except the tests marked slow (crash loops, soak, real crews).
test-fast: $(STAMP)
	$(BIN)/pytest -m "not slow"

LINTED := src/ctxlife strategies/ctxlife_strategies docs/examples/ctxlife-redact/src

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

# Mutation testing of the core ([tool.mutmut] in pyproject.toml; <= 20 minutes on 2 cores, niced).
# mutmut runs in a staged copy, build/mutate (benchmarks/mutation_stage.py: strategies beside
# src/ctxlife, functions outside the scope marked); the report with the survivors is docs/mutation.md.
MUTATE_DIR := build/mutate
mutate: $(MUTATE_STAMP)
	$(BIN)/python benchmarks/mutation_stage.py $(MUTATE_DIR)
	cd $(MUTATE_DIR) && start=$$(date +%s) && nice -n 10 $(abspath $(BIN))/mutmut run --max-children 2; \
	  $(abspath $(BIN))/python $(abspath benchmarks/mutation_report.py) --write $(abspath docs/mutation.md) \
	  --seconds $$(( $$(date +%s) - start ))

docs: $(STAMP)
	$(BIN)/python -m ctxlife.docgen docs

clean:
	rm -rf $(VENV) workspace .pytest_cache .hypothesis .mypy_cache .ruff_cache build *.egg-info src/*.egg-info strategies/*.egg-info
