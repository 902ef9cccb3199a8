# `make demo` and `make test` each build .venv and install what they need on a fresh machine.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
DEMO   ?= demo-out
SCALE  ?= 1

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "tether needs Python 3.11+"'
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --disable-pip-version-check --upgrade pip
	@$(BIN)/python -m pip install -q --disable-pip-version-check -e '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $(STAMP)

demo: $(STAMP) ## build the embedded demo under demo-out/ and show what tether learned
	@echo "== 1. the demo warehouse (fictional company, deterministic, with agent traps: docs/demo.md)"
	$(BIN)/tether demo init $(DEMO) --scale $(SCALE) --force
	@echo "== 2. what tether learned about each data product (tether profile)"
	$(BIN)/tether profile --project $(DEMO)

test: $(STAMP) ## the whole test suite (PostgreSQL tests run when TETHER_TEST_PG_URL is set)
	$(BIN)/python -m pytest -q

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

bench: $(STAMP) ## benchmarks; results go to docs/benchmarks.md
	$(BIN)/python bench/profile.py

clean:
	rm -rf $(VENV) $(DEMO) .pytest_cache .mypy_cache .ruff_cache
