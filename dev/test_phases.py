"""`make test`'s pytest: the tests that run no model spread over the cores, then the model tests in one process.

    python -m dev.test_phases [--workers=N] [PYTEST ARGUMENTS...]

The model tests run llama.cpp on every core, so two of them at once only contend. The others wait
on simulated servers, subprocesses, notebook kernels and the disk as much as on the CPU, and
pytest-xdist's workers overlap those waits. ``--workers`` defaults to the cores this process may
use; 0 or 1 runs the first phase in one process too. Arguments that choose the tests' markers or
workers themselves (``-m``, ``-n``) make one plain pytest run of exactly what was asked.
Exit status: pytest's, 0 when each phase passed or selected nothing (5) and some phase ran a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Phase:
    name: str
    markers: str
    spread: bool  # over pytest-xdist's workers


PHASES = (Phase("spread", "not model and not vllm", spread=True), Phase("model", "model and not vllm", spread=False))
NO_TESTS = 5  # pytest's exit status when its selection is empty

Run = Callable[[list[str]], int]


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def chooses_itself(args: Sequence[str]) -> bool:
    return any(arg.startswith(("-m", "-n", "--numprocesses")) for arg in args)


def commands(args: Sequence[str], workers: int, python: str = sys.executable) -> list[list[str]]:
    """The pytest command of each phase."""
    pytest = [python, "-m", "pytest"]
    if chooses_itself(args):
        return [[*pytest, *args]]
    return [[*pytest, "-m", phase.markers, *(["-n", str(workers)] if phase.spread and workers > 1 else []), *args]
            for phase in PHASES]


def combined(codes: Sequence[int]) -> int:
    if all(code == NO_TESTS for code in codes):
        return NO_TESTS
    failed = [code for code in codes if code not in (0, NO_TESTS)]
    return failed[0] if failed else 0


def main(argv: Sequence[str] | None = None, run: Run = lambda command: subprocess.call(command)) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    workers = usable_cores()
    if args and args[0].startswith("--workers="):
        value = args.pop(0).split("=", 1)[1]
        if value.strip():
            if not value.isdigit():
                raise SystemExit(f"make: TEST_WORKERS: expected a whole number of pytest-xdist workers, got {value!r}")
            workers = int(value)
    codes = []
    for command in commands(args, workers):
        print("+", " ".join(command[1:]), file=sys.stderr, flush=True)
        codes.append(run(command))
    return combined(codes)


if __name__ == "__main__":
    sys.exit(main())
