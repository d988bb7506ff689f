"""Run a Makefile target for real, in a copy of the checkout's top whose environment holds stub programs
that record how they were called: what a recipe passes, without installing or building anything.
A stub fails (exit 1) where the test left a file ``fail-<program>`` beside the call log."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROGRAMS = ("python", "fhs", "lint-imports", "jupyter-book", "ruff", "mypy")
STUB = """#!{python}
import json, os, sys
args = sys.argv[1:]
if args and args[0].endswith("make_words.py"):  # the real splitter, which then calls a stub again
    os.execv({python!r}, [{python!r}, *args])
with open({log!r}, "a", encoding="utf-8") as handle:
    handle.write(json.dumps([os.path.basename(sys.argv[0]), *args]) + "\\n")
if os.path.exists({fails!r} + os.path.basename(sys.argv[0])):
    sys.exit(1)
"""


def checkout(tmp: Path) -> Path:
    """The Makefile and what its recipes read, with a ready environment of stubs under .venv."""
    top = tmp / "checkout"
    (top / "scripts").mkdir(parents=True)
    for name in ("Makefile", "pyproject.toml", "scripts/make_words.py"):
        shutil.copy(ROOT / name, top / name)
    past = time.time() - 3600
    for name in ("Makefile", "pyproject.toml"):
        os.utime(top / name, (past, past))  # the install stamps below are newer: nothing to install
    (top / ".venv" / "bin").mkdir(parents=True)
    for program in PROGRAMS:
        path = top / ".venv" / "bin" / program
        path.write_text(STUB.format(python=sys.executable, log=str(tmp / "calls.jsonl"), fails=str(tmp / "fail-")))
        path.chmod(0o755)
    for stamp in (".stamp-book", ".stamp-test", ".stamp-models"):
        (top / ".venv" / stamp).touch()
    return top


def run_target(tmp: Path, target: str, **variables: str) -> tuple[subprocess.CompletedProcess, list[list[str]]]:
    """``make TARGET NAME=value...`` in a fresh stub checkout: the result and each stub call's arguments."""
    top = checkout(tmp) if not (tmp / "checkout").exists() else tmp / "checkout"
    log = tmp / "calls.jsonl"
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE") and k not in variables}
    done = subprocess.run(["make", "--no-print-directory", target, *(f"{k}={v}" for k, v in variables.items())],
                          cwd=top, env=env, capture_output=True, text=True, timeout=120)
    calls = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    return done, calls
