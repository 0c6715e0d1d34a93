# make run: the receiver on the embedded default (SQLite, no Redis).
# make test: lint and the whole suite (needs PostgreSQL and Redis on localhost).
# make test-install: the built wheel installed without the lock files runs every process.
# make test-deploy: deploy/'s container image and compose file, built and run with podman.
# make fmt: fix imports and formatting as lint wants them.
# make docs: docs/configuration.md from the settings, then the docs site (strict).
# make bench: the benchmarks (also needs wrk and pgbench); make bench-smoke: a quick check.
# make bench-hostile: slow clients and a flood of bad signatures (bench/hostile.py).
# make bench-retention: cleanup's rate against ingest's, and a soak (bench/retention.py).
# make bench-arrivals: events arriving over HTTP while (or before) workers run (bench/arrivals.py).
# make bench-replay: a bulk replay of 10,000 dead events beside live deliveries (bench/replay.py).
# make bench-reconcile: 10,000 missing Stripe events fetched beside live ones (bench/reconcile.py).
# make bench-ordering: unkeyed drain with and without ordering, and a hot key (bench/ordering.py).
# make bench-memory: the work horse's memory with large bodies, small events' drain (bench/memory.py).
# make bench-bad-bytes: a flood of NULs in paths: answers and log bytes (bench/bad_bytes.py).
# make bench-forwarding: forwarding to each kind against its client library alone (bench/forwarding.py).
# make chaos: processes killed at random under load, five runs (see bench/chaos.py).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: run install install-dev install-bench lock lint fmt test test-install test-deploy docs bench bench-smoke bench-hostile bench-retention bench-arrivals bench-replay bench-reconcile bench-ordering bench-memory bench-bad-bytes bench-forwarding chaos

$(BIN)/python:
	@echo "making $(VENV)"
	@$(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip

# Editable installs in setuptools' strict mode: app/, workers/ and migrations/ appear as
# hooklatch, hooklatch.workers and hooklatch.migrations through a tree of links under
# build/, which mypy can read (it cannot follow the default mode's import hook). A new
# module (or any file added to or removed from those folders) needs a new link: the list
# of their files is a prerequisite of every install (PACKAGE_FILES below).
EDITABLE := --config-settings editable_mode=strict

# Dependencies come from lock files with hashes (requirements/, made by `make lock` from
# pyproject.toml): pip refuses anything whose hash differs. hooklatch itself is then
# installed without dependencies, built with the locked setuptools.
HASHED := --quiet --require-hashes --no-deps -r
SELF := --quiet --no-deps --no-build-isolation $(EDITABLE) -e .
# setuptools warns at every strict editable install that build/ holds its links.
QUIET_EDITABLE := PYTHONWARNINGS="ignore:Editable installation"
# gunicorn's C HTTP parser, built from source with the setuptools just installed.
FAST := --quiet --require-hashes --no-deps --no-build-isolation -r requirements/fast.txt

# Each install leaves a stamp in the virtualenv, and runs again only when what it installs
# from is newer: pyproject.toml, its lock file, or the list of the package's files, which
# is rewritten (each time make reads this file) only when a file is added or removed. So
# `make run` starts at once when nothing changed, and `make --question install-dev` says
# whether an install is due. A dev install holds every package of main.txt (dev.txt is
# main.txt and more, bench.txt is dev.txt and more): it stamps the smaller ones too.
STAMPS := $(VENV)/.installed
PACKAGE_FOLDERS := app workers migrations
PACKAGE_FILES := $(STAMPS)/package-files
LISTED := $(shell mkdir -p $(STAMPS) && find $(PACKAGE_FOLDERS) -name __pycache__ -prune \
	-o -type f ! -name '*.py[co]' -print | LC_ALL=C sort > $(PACKAGE_FILES).new \
	&& { cmp -s $(PACKAGE_FILES).new $(PACKAGE_FILES) || mv $(PACKAGE_FILES).new $(PACKAGE_FILES); } \
	; rm -f $(PACKAGE_FILES).new)
INSTALLED_FROM := pyproject.toml requirements/fast.txt $(PACKAGE_FILES)

install: $(STAMPS)/main
install-dev: $(STAMPS)/dev
install-bench: $(STAMPS)/bench

$(STAMPS)/main: requirements/main.txt $(INSTALLED_FROM) | $(BIN)/python
	$(call install_from,main)
	@touch $@

$(STAMPS)/dev: requirements/dev.txt $(INSTALLED_FROM) | $(BIN)/python
	$(call install_from,dev)
	@touch $(STAMPS)/main $@

$(STAMPS)/bench: requirements/bench.txt $(INSTALLED_FROM) | $(BIN)/python
	$(call install_from,bench)
	@touch $(STAMPS)/main $(STAMPS)/dev $@

# The lock file's packages, gunicorn's C parser, then hooklatch itself (editable).
define install_from
@echo "installing requirements/$(1).txt and hooklatch (editable) into $(VENV)"
@$(BIN)/pip install $(HASHED) requirements/$(1).txt
@$(BIN)/pip install $(FAST)
@$(QUIET_EDITABLE) $(BIN)/pip install $(SELF)
endef

# Re-resolve the lock files after a change to pyproject.toml's dependencies.
LOCK := .venv-lock/bin/pip-compile --quiet --generate-hashes --allow-unsafe --strip-extras \
	--no-emit-index-url --no-emit-find-links pyproject.toml requirements/build.in \
	requirements/markers.in

lock:
	$(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install --quiet pip-tools
	$(LOCK) -o requirements/main.txt
	$(LOCK) --extra dev --extra docs -o requirements/dev.txt
	$(LOCK) --extra dev --extra docs --extra bench -o requirements/bench.txt
	.venv-lock/bin/pip-compile --quiet --generate-hashes --no-emit-index-url \
		--no-emit-find-links requirements/fast.in -o requirements/fast.txt
	.venv-lock/bin/pip-compile --quiet --generate-hashes --no-emit-index-url \
		--no-emit-find-links requirements/deploy.in -o requirements/deploy.txt

run: install
	$(BIN)/hooklatch serve $(HOOKLATCH_SERVE_ARGS)

# The same four checks run as a pre-commit hook (.pre-commit-config.yaml).
LINTED := app workers migrations tests bench examples

lint: install-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache

# Rewrites what lint would refuse and can be fixed mechanically: imports, formatting.
fmt: install-dev
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format $(LINTED)

test: lint
	$(BIN)/python -m pytest -n 2 --ignore=tests/deploy $(PYTEST_ARGS)

# deploy/Dockerfile built and deploy/compose.yaml run (tests/deploy): needs podman, runc
# and mmdebstrap (.ci/run installs them), PostgreSQL and Redis on localhost. The base
# image is made from Debian's packages and kept in /var/cache/hooklatch-deploy.
test-deploy: install-dev $(STAMPS)/deploy
	$(BIN)/python -m pytest -s tests/deploy $(PYTEST_ARGS)

# podman-compose, pinned beside the dev lock file (requirements/deploy.in).
$(STAMPS)/deploy: requirements/deploy.txt | $(BIN)/python
	@$(BIN)/pip install $(HASHED) requirements/deploy.txt
	@touch $@

# The pages of docs/ as a site (mkdocs.yml), into site/. Strict: a broken link or anchor,
# or a page left out of nav, fails it. The configuration page is written from the table
# in app/settings_reference.py first, the admin API's from its OpenAPI description (a test
# fails when a committed one differs).
docs: install-dev
	$(BIN)/python -m hooklatch.settings_reference docs/configuration.md
	$(BIN)/python -m hooklatch.admin.apidocs docs/api.md
	$(BIN)/mkdocs build --strict --quiet

# The wheel installed from its own metadata (no lock file) into fresh virtualenvs, newest
# and lowest releases, running every process (tests/clean_install.py; needs PyPI).
test-install: install-dev
	$(BIN)/python -m pytest -n 2 tests/clean_install.py $(PYTEST_ARGS)

bench: install-bench
	$(BIN)/python -m bench

bench-smoke: install-bench
	$(BIN)/python -m bench --smoke
	$(BIN)/python -m bench.hostile --smoke
	$(BIN)/python -m bench.retention --smoke
	$(BIN)/python -m bench.arrivals --smoke
	$(BIN)/python -m bench.replay --smoke
	$(BIN)/python -m bench.reconcile --smoke
	$(BIN)/python -m bench.ordering --smoke
	$(BIN)/python -m bench.memory --smoke
	$(BIN)/python -m bench.bad_bytes --smoke
	$(BIN)/python -m bench.forwarding --smoke

# Slow clients and a flood of bad signatures, in one run (docs/benchmarks.md).
bench-hostile: install-bench
	$(BIN)/python -m bench.hostile $(HOSTILE_ARGS)

# Cleanup against ingest, and a soak whose tables must level off (docs/benchmarks.md).
bench-retention: install-bench
	$(BIN)/python -m bench.retention

# Load built as production builds it: a burst through gunicorn with workers running, and
# a backlog after an outage; hooklatch against the naive receiver (bench/arrivals.py).
bench-arrivals: install-bench
	$(BIN)/python -m bench.arrivals

# A bulk replay of dead events while deliveries keep arriving (docs/benchmarks.md).
bench-replay: install-bench
	$(BIN)/python -m bench.replay

# A reconcile of 10,000 Stripe events that never arrived, fetched from a local server that
# answers as Stripe's API does, while live deliveries keep arriving (docs/benchmarks.md).
bench-reconcile: install-bench
	$(BIN)/python -m bench.reconcile

# Per-entity ordering: unkeyed outage drains against the last commit before it (in a git
# worktree), and one key's 1,000 events against its handler's speed (docs/benchmarks.md).
bench-ordering: install-bench
	$(BIN)/python -m bench.ordering

# A flood of requests with a NUL in their path: how they are answered and what the web
# process logs for them (docs/benchmarks.md).
bench-bad-bytes: install-bench
	$(BIN)/python -m bench.bad_bytes

# The work horse's peak memory with 4 MiB and 25 MB bodies, and small events' outage drain,
# each against the last commit before bodies were read apart from claims (docs/benchmarks.md).
bench-memory: install-bench
	$(BIN)/python -m bench.memory

# Forwarding to each kind of destination (http, nats, rabbitmq, redis) with events arriving
# through gunicorn, against the same client library publishing straight to the same broker;
# and a rate-limited destination beside ingest and handlers (docs/benchmarks.md).
bench-forwarding: install-bench
	$(BIN)/python -m bench.forwarding $(FORWARDING_ARGS)

chaos: install-bench
	$(BIN)/python -m bench.chaos $(CHAOS_ARGS)
