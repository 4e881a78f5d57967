# Two commands do all the set-up: `make demo` and `make test` (each bootstraps .venv).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,plot]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/ctxlife demo

test: $(STAMP)
	$(BIN)/pytest

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_dispatch.py

clean:
	rm -rf $(VENV) workspace .pytest_cache .hypothesis build *.egg-info src/*.egg-info strategies/*.egg-info
