# hetsched: two commands set everything up on a fresh machine, `make lab` and `make test`.
#
#   make lab     JupyterLab on notebooks/00_tour.ipynb     (LAB_ARGS="--port=8899" to add options)
#   make test    the whole suite in one pytest run        (PYTEST_ARGS="-k gantt -x" to narrow it)
#   make app     the dashboard as a web app (Voila)       (APP_ARGS="--port=8867")
#   make bench   every benchmark, then docs/benchmarks.md (BENCH_ARGS="--only evaluate")
#   make data    regenerate the bundled graphs in data/graphs
#   make venv    just build .venv;  make clean  removes it
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The stamp is newer than pyproject.toml only when .venv was installed from this version of it.
STAMP := $(VENV)/.installed
# Every page load starts a kernel (~230 MB); a class reloading pages would pile them up. Voila culls
# kernels whose page is gone once idle this long (seconds), checking this often.
APP_CULL ?= --MappingKernelManager.cull_idle_timeout=300 --MappingKernelManager.cull_interval=60
# Voila runs the notebook before it sends the page; nbclient drops a cell's outputs (the dashboard
# itself) when they reach it more than iopub_timeout seconds after the cell finished (default 4 s),
# which a busy server (kernels starting and being culled, a class loading pages) exceeds.
APP_IOPUB ?= --VoilaExecutor.iopub_timeout=60
# JupyterLab refuses to run as root unless told to (CI and containers run as root).
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

# A stamp without a working interpreter (deleted or moved venv) is no stamp.
ifeq ($(wildcard $(BIN)/python),)
$(shell rm -f $(STAMP))
endif

.PHONY: help venv test lab app bench data clean

help:
	@sed -n '1,8p' Makefile | sed 's/^# \{0,1\}//'

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "make: no python3 found; install Python 3.11" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || \
	  { echo "make: hetsched needs Python >= 3.11, $(PYTHON) is $$($(PYTHON) -V 2>&1)" >&2; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest $(PYTEST_ARGS)

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/00_tour.ipynb $(ALLOW_ROOT) $(LAB_ARGS)

app: $(STAMP)
	@test -f notebooks/dashboard.ipynb || { \
	  echo "make app: notebooks/dashboard.ipynb does not exist yet (the dashboard arrives with the" >&2; \
	  echo "widgets work, issue 8). Meanwhile 'make lab' opens the tour notebook." >&2; exit 1; }
	$(BIN)/voila notebooks/dashboard.ipynb --no-browser $(APP_CULL) $(APP_IOPUB) $(APP_ARGS)

bench: $(STAMP)
	$(BIN)/python bench/run_all.py $(BENCH_ARGS)

data: $(STAMP)
	@$(BIN)/python -c 'import importlib.util as u, sys; sys.exit(u.find_spec("hetsched.io.make_data") is None)' || { \
	  echo "make data: hetsched.io.make_data is not written yet (the model zoo, issue 3)." >&2; exit 1; }
	$(BIN)/python -m hetsched.io.make_data

clean:
	rm -rf $(VENV) build dist *.egg-info test-artifacts
