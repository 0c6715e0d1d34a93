# make run: the receiver on the embedded default (SQLite, no Redis).
# make test: lint and the whole suite (needs PostgreSQL and Redis on localhost).
# make bench: the benchmarks (also needs wrk and pgbench); make bench-smoke: a quick check.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run install install-dev install-bench lint test bench bench-smoke

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e .

install-dev: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'

install-bench: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev,bench]'

run: install
	$(BIN)/hooklatch serve $(HOOKLATCH_SERVE_ARGS)

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check app workers migrations tests bench examples
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -n 2 $(PYTEST_ARGS)

bench: install-bench
	$(BIN)/python -m bench

bench-smoke: install-bench
	$(BIN)/python -m bench --smoke
