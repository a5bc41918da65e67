# Two commands set everything up on a fresh machine: `make lab` and `make test`.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# The stamp is newer than pyproject.toml only when the venv was built from this version of it.
STAMP := $(VENV)/.installed

.PHONY: venv test lab app bench data clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip setuptools wheel
	$(BIN)/python -m pip install -e '.[dev]'
	touch $(STAMP)

test: $(STAMP)
	$(BIN)/python -m pytest

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/00_tour.ipynb $(if $(filter 0,$(shell id -u)),--allow-root,)

app: $(STAMP)
	$(BIN)/voila notebooks/dashboard.ipynb --no-browser

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

data: $(STAMP)
	$(BIN)/python -m hetsched.io.make_data

clean:
	rm -rf $(VENV) build *.egg-info
