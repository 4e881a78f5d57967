# Two commands do all the set-up: `make demo` and `make test` (each bootstraps .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench docs clean

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

test: $(STAMP)
	$(BIN)/pytest

BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(BIN)/pip install --quiet -e '.[bench]'
	touch $(BENCH_STAMP)

# Writes benchmarks/results/latest.json, docs/benchmarks.md and docs/benchmarks/*.png.
bench: $(BENCH_STAMP)
	$(BIN)/python benchmarks/bench.py

docs: $(STAMP)
	$(BIN)/python -m ctxlife.docgen docs

clean:
	rm -rf $(VENV) workspace .pytest_cache .hypothesis build *.egg-info src/*.egg-info strategies/*.egg-info
