# Every target creates .venv and installs what it needs on first use.
# AIOCOORD_ZK=host:port,... runs tests and demo against your own ZooKeeper;
# ZOOKEEPER_HOME=/path/to/apache-zookeeper uses a release tarball's jars.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: help test lint demo zookeeper clean

help:
	@echo "make demo   a ticket sale on an embedded ZooKeeper: no oversell, no lost sale"
	@echo "make test   run the test suite against real ZooKeeper servers"
	@echo "make lint   ruff and mypy --strict"

$(STAMP): pyproject.toml scripts/setup-venv.sh
	PYTHON=$(PYTHON) sh scripts/setup-venv.sh $(VENV)
	@touch $@

zookeeper:
	@sh scripts/ensure-zookeeper.sh

test: $(STAMP)
	@WITH_CURATOR=1 sh scripts/ensure-zookeeper.sh
	$(PY) -m pytest -m "not chaos" $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check aiocoord tests examples
	$(VENV)/bin/ruff format --check aiocoord tests examples
	$(VENV)/bin/mypy

demo: $(STAMP) zookeeper
	$(PY) examples/tickets.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
