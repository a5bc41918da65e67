# hetsched: two commands set everything up on a fresh machine, `make lab` and `make test`.
#
#   make lab     JupyterLab on notebooks/00_tour.ipynb     (LAB_ARGS="--port=8899" to add options)
#   make test    the whole suite in one pytest run        (PYTEST_ARGS="-k gantt -x" to narrow it)
#   make app     the dashboard as a web app (Voila)       (APP_ARGS="--port=8867" to add options)
#   make bench   every benchmark, then docs/benchmarks.md (BENCH_ARGS="--only evaluate")
#   make data    regenerate the bundled graphs in data/graphs
#   make venv    just build .venv;  make clean  removes it (EXTRAS=dev leaves torch out)
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The stamp is newer than pyproject.toml and constraints.txt only when .venv was installed from them.
STAMP := $(VENV)/.installed
# What .venv holds: everything the tests and notebooks use, torch's CPU build included (constraints.txt
# says why it is pinned). EXTRAS=dev leaves torch out: its tests and notebook are then skipped, loudly.
EXTRAS ?= dev,torch

# A stamp without a working interpreter (deleted or moved venv) is no stamp.
ifeq ($(wildcard $(BIN)/python),)
$(shell rm -f $(STAMP))
endif

.PHONY: help venv test lab app bench data clean

help:
	@sed -n '1,8p' Makefile | sed 's/^# \{0,1\}//'

venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@test -n "$(PYTHON)" || { echo "make: no python3 found; install Python 3.11" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "make: hetsched needs Python >= 3.11, $(PYTHON) is $$($(PYTHON) -V 2>&1)" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --constraint constraints.txt -e '.[$(EXTRAS)]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

# The same commands a pip user runs (hetsched/launch.py): JupyterLab on the checkout's own notebooks
# (opened in place, not copied), Voila with the kernel-culling options, without opening a browser.
lab: $(STAMP)
	$(BIN)/hetsched lab notebooks $(LAB_ARGS)

app: $(STAMP)
	$(BIN)/hetsched app --no-browser $(APP_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

data: $(STAMP)
	@$(BIN)/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("hetsched.io.make_data") is None)' || { \
	  echo "make data: hetsched.io.make_data is not written yet (the model zoo, issue 3)." >&2; exit 1; }
	$(BIN)/python -m hetsched.io.make_data

clean:
	rm -rf $(VENV) build dist *.egg-info test-artifacts
