# The two commands a fresh machine needs:  make demo   and   make test
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
DELTA_JARS := $(VENV)/share/cdc-lakehouse/delta-jars
LAKE ?= .lake
DEMO_LANDING ?= .demo/landing

.PHONY: install services browser demo test clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml setup.py jars/pom.xml
	@command -v java >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; }
	@command -v mvn >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[local,dev]'
	# delta-spark's jars, once, into the venv: Spark loads them from there (runtime/session.py)
	# and never downloads anything at run time. Spark itself ships every other dependency.
	rm -rf $(DELTA_JARS)
	mvn -q -f jars/pom.xml dependency:copy-dependencies -DincludeScope=runtime \
		-DincludeGroupIds=io.delta,io.unitycatalog -DoutputDirectory=$(abspath $(DELTA_JARS))
	touch $@

# The demo lands into a copy of fixtures/landing: snapshot reconcile writes its corrections
# into the landing folder, and the fixtures stay as committed.
# `cdc-lakehouse demo` prints and runs each of its commands, all in one Python and Spark process.
demo: install
	rm -rf $(DEMO_LANDING) && mkdir -p $(dir $(DEMO_LANDING)) && cp -r fixtures/landing $(DEMO_LANDING)
	$(BIN)/cdc-lakehouse demo --landing $(DEMO_LANDING) --lake $(LAKE)

# PostgreSQL and MariaDB binaries for the live capture tests (installed, never started here).
services:
	bash .ci/services

# Headless Chromium for the dashboard rendering test.
browser:
	bash .ci/browser

test: install services browser
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy
	$(BIN)/python -m pytest -q

clean:
	rm -rf $(VENV) $(LAKE) .pytest_cache
