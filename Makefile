# Every target creates a virtualenv and installs what it needs on first use.
# AIOCOORD_ZK=host:port,... runs tests and demo against your own ZooKeeper;
# ZOOKEEPER_HOME=/path/to/apache-zookeeper uses a release tarball's jars.
# PYTHON=python3.13 runs on that interpreter, in a virtualenv of its own (.venv-3.13);
# the default python3 uses .venv.
# ZOOKEEPER_VERSION=3.9 (or 3.8, the default: Debian 12's) picks the server that tests,
# demo, chaos and bench launch; CURATOR_VERSION=5.7 (or 5.4, the default) the Curator of
# the interop tests. 3.9 and 5.7 are Debian 13's 3.9.3 and 5.7.1, fetched on first use
# into .cache/jars by scripts/fetch-zookeeper.sh.

PYTHON ?= python3
VENV ?= $(if $(filter python3,$(PYTHON)),.venv,.venv-$(patsubst python%,%,$(notdir $(PYTHON))))
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help test lint demo zookeeper bench docs chaos clean

# The test kit (aiocoord.testing) and the interop harness read these.
ifdef ZOOKEEPER_VERSION
export ZOOKEEPER_VERSION
endif
ifdef CURATOR_VERSION
export CURATOR_VERSION
endif

help:
	@echo "make demo   a ticket sale on an embedded ZooKeeper: no oversell, no lost sale"
	@echo "make test   run the test suite against real ZooKeeper servers"
	@echo "make lint   ruff and mypy --strict"
	@echo "make bench  aiocoord against Curator, kazoo and aiozk (bench/README.md)"
	@echo "make docs   the documentation site in site/ (MkDocs, warnings are errors)"
	@echo "make chaos  every recipe through 3 minutes of seeded faults on 3 nodes (chaos/README.md)"

# The docs extra (MkDocs, mkdocstrings) is installed on first use, as bench's is.
DOCS_STAMP := $(VENV)/.docs-installed

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[docs]'
	@touch $@

docs: $(DOCS_STAMP)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# The test extra's gssapi builds against MIT Kerberos: its headers come first.
$(STAMP): pyproject.toml scripts/setup-venv.sh scripts/ensure-kerberos.sh
	sh scripts/ensure-kerberos.sh
	PYTHON=$(PYTHON) sh scripts/setup-venv.sh $(VENV)
	@touch $@

zookeeper:
	@sh scripts/ensure-zookeeper.sh

# The short chaos run in the suite always runs ZooKeeper 3.9 (tests/integration/test_chaos.py
# says why), so its jars are fetched even when the rest of the suite runs on 3.8.
test: $(STAMP)
	@WITH_CURATOR=1 sh scripts/ensure-zookeeper.sh
	@sh scripts/ensure-kerberos.sh
	@[ -n "$${ZOOKEEPER_HOME:-}" ] || ZOOKEEPER_VERSION=3.9 sh scripts/fetch-zookeeper.sh
	$(PY) -m pytest -m "not chaos" $(PYTEST_ARGS)

# CHAOS_ARGS: e.g. "--seed 7 --duration 60 --workers 3 --out /tmp/chaos" (chaos/README.md).
chaos: $(STAMP) zookeeper
	$(PY) -m chaos $(CHAOS_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check aiocoord tests examples bench chaos
	$(VENV)/bin/ruff format --check aiocoord tests examples bench chaos
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict tests/typecheck

demo: $(STAMP) zookeeper
	$(PY) examples/tickets.py

# BENCH_SECONDS, BENCH_REPEAT, BENCH_ONLY, BENCH_WARMUP, BENCH_WAITERS: see bench/README.md.
BENCH_STAMP := $(VENV)/.bench-installed

$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[bench]'
	@touch $@

bench: $(BENCH_STAMP)
	@WITH_CURATOR=1 sh scripts/ensure-zookeeper.sh
	@command -v taskset >/dev/null 2>&1 || { \
		echo "installing util-linux (taskset)" >&2; \
		SUDO=""; [ "$$(id -u)" -eq 0 ] || SUDO=sudo; \
		$$SUDO apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq util-linux; }
	$(PY) -m bench.run
	$(PY) -m bench.recovery

clean:
	rm -rf .venv .venv-* .cache .pytest_cache .mypy_cache .ruff_cache
