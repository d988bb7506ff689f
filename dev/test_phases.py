"""`make test`'s pytest: the tests that run no model, then the model tests, each phase spread over the cores.

    python -m dev.test_phases [--cores=N] [PYTEST ARGUMENTS...]

The tests that run no model wait on simulated servers, subprocesses, notebook kernels and the disk
as much as on the CPU, so two pytest-xdist workers a core overlap those waits. The model tests run
llama.cpp and the embedding runtime, which would each take every core: spread over one worker a
core, each computes with one thread (``FHS_LLAMA_THREADS``, ``FHS_DENSE_THREADS``), which changes
no reply (``tests/test_llm.py``) and overlaps the set-up between model calls; a module's tests stay
on one worker (``--dist loadscope``), so a real model's run that the module shares is made once.
The phases run one after the other so that a phase's workers never contend with the other phase's.
``--cores`` is the cores the tests may use (default: the cores this process may use); 0 or 1
runs each phase in one process, with the default threads. Arguments that choose the tests' markers or
workers themselves (``-m``, ``-n``) make one plain pytest run of exactly what was asked.
Exit status: pytest's, 0 when each phase passed or selected nothing (5) and some phase ran a test.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Phase:
    name: str
    markers: str
    workers_per_core: int = 1
    spread: tuple[str, ...] = ()  # pytest-xdist's options besides -n
    spread_env: dict[str, str] = field(default_factory=dict)  # each worker's environment when spread


ONE_THREAD = {"FHS_LLAMA_THREADS": "1", "FHS_DENSE_THREADS": "1"}
PHASES = (
    Phase("no model", "not model and not vllm", workers_per_core=2),
    Phase("model", "model and not vllm", spread=("--dist", "loadscope"), spread_env=ONE_THREAD),
)
NO_TESTS = 5  # pytest's exit status when its selection is empty


@dataclass(frozen=True)
class Command:
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)  # set on top of this process's environment


Run = Callable[[Command], int]


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def chooses_itself(args: Sequence[str]) -> bool:
    return any(arg.startswith(("-m", "-n", "--numprocesses")) for arg in args)


def commands(args: Sequence[str], cores: int, python: str = sys.executable) -> list[Command]:
    """The pytest command of each phase, on ``cores`` cores."""
    pytest = [python, "-m", "pytest"]
    if chooses_itself(args):
        return [Command([*pytest, *args])]
    if cores <= 1:
        return [Command([*pytest, "-m", phase.markers, *args]) for phase in PHASES]
    return [Command([*pytest, "-m", phase.markers, "-n", str(cores * phase.workers_per_core), *phase.spread, *args],
                    dict(phase.spread_env)) for phase in PHASES]


def call(command: Command) -> int:
    return subprocess.call(command.argv, env={**os.environ, **command.env} if command.env else None)


def combined(codes: Sequence[int]) -> int:
    if all(code == NO_TESTS for code in codes):
        return NO_TESTS
    failed = [code for code in codes if code not in (0, NO_TESTS)]
    return failed[0] if failed else 0


def main(argv: Sequence[str] | None = None, run: Run = call) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    cores = usable_cores()
    if args and args[0].startswith("--cores="):
        value = args.pop(0).split("=", 1)[1]
        if value.strip():
            if not value.isdigit():
                raise SystemExit(f"make: TEST_CORES: expected a whole number of cores, got {value!r}")
            cores = int(value)
    codes = []
    for command in commands(args, cores):
        shown = [f"{name}={value}" for name, value in command.env.items()] + command.argv[1:]
        print("+", " ".join(shown), file=sys.stderr, flush=True)
        codes.append(run(command))
    return combined(codes)


if __name__ == "__main__":
    sys.exit(main())
