# Two commands on a fresh machine:  make up  (install and run)  ·  make test  (the whole suite)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HASH   := $(shell cat pyproject.toml testkit/pyproject.toml | sha256sum | cut -c1-12)
# Two installs: what running needs (make up), and that plus the test toolchain (make test).
RUN_STAMP  := $(VENV)/.installed-run-$(HASH)
STAMP      := $(VENV)/.installed-$(HASH)

.PHONY: up test lint install schema bench-scheduler clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(RUN_STAMP): pyproject.toml testkit/pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e .
	rm -f $(VENV)/.installed-run-* && touch $(RUN_STAMP)

$(STAMP): pyproject.toml testkit/pyproject.toml | $(VENV)/bin/python
	$(BIN)/pip install --quiet -e '.[test]' -e ./testkit
	rm -f $(VENV)/.installed-* && touch $(STAMP) $(RUN_STAMP)

install: $(STAMP)

up: $(RUN_STAMP)
	$(BIN)/crondepot up $(ARGS)

# The whole suite: lint, types, then tests in parallel against a real PostgreSQL
# (CRONDEPOT_TEST_DATABASE_URL if set, else the embedded one).
test: $(STAMP)
	$(BIN)/ruff check src testkit tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/pytest -n 2 -p no:cacheprovider $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src testkit tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports

# db/sql/schema.sql, the current schema for reading, after a migration or definition changes.
schema: $(STAMP)
	$(BIN)/python -m crondepot.db.schema_dump

bench-scheduler: $(STAMP)
	$(BIN)/python bench/scheduler.py $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info
