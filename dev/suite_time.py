"""The test suite's time per tier, measured in this checkout and kept as a record the book renders.

    python -m dev.suite_time                      # every tier, one after another
    python -m dev.suite_time --tiers fast         # the fast tier alone
    python -m dev.suite_time --note "one core busy with a book build"

The tiers are ``pyproject.toml``'s markers, split so that together they are what ``make test``
runs (every test but ``vllm``): ``fast`` (``-m 'not model and not data'``), ``data`` (``data``
without ``model``) and ``model``. Each runs as its own ``pytest -q -p no:cacheprovider`` with this
interpreter, spread over ``--cores`` as ``make test`` spreads its phases (``dev/test_phases.py``:
two workers a core without models; one a core, one thread each, with); the record gives each
tier's seconds, workers and pytest's counts, the machine (``fhs.run.cpu_info``) and the load average when it started (a shared machine's times are not a
quiet one's). It is written to ``book/records/<date>-<commit>-suite.json`` (``--record-dir``;
``--no-record`` writes none), from which ``python -m dev.measurements`` renders the Measured builds
page. Exit status: 1 if any tier had a failure or an error, else 0.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from dev.cold_book import pytest_counts
from dev.measurements import RECORDS, write_record
from dev.test_phases import PHASES, Phase, usable_cores

ROOT = Path(__file__).resolve().parent.parent
TIERS = {"fast": "not model and not data", "data": "data and not model", "model": "model"}
Run = Callable[..., subprocess.CompletedProcess]
PHASE_OF = {"fast": PHASES[0], "data": PHASES[0], "model": PHASES[1]}  # make test's phase that runs each tier


def run_tier(name: str, python: str, run: Run = subprocess.run, durations: int = 0,
             log_dir: Path | None = None, cores: int = 1) -> dict[str, Any]:
    """One tier through pytest: its step of the record (seconds, workers, pytest's counts); its whole output
    (with the ``durations`` slowest tests, when asked) kept in ``log_dir/<tier>.log``."""
    command = [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", TIERS[name]]
    env, phase, workers = None, PHASE_OF.get(name, Phase(name, TIERS[name])), 1
    if cores > 1:
        workers = cores * phase.workers_per_core
        command += ["-n", str(workers), *phase.spread]
        env = {**os.environ, **phase.spread_env}
    if durations:
        command.append(f"--durations={durations}")
    started = time.perf_counter()
    done = run(command, cwd=ROOT, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - started
    output = (done.stdout or "") + (done.stderr or "")
    if log_dir is not None:
        log_dir.mkdir(parents=True, exist_ok=True)
        (log_dir / f"{name}.log").write_text(output)
    print(output.rstrip().splitlines()[-1] if output.strip() else f"{name}: no output", file=sys.stderr)
    return {"step": name, "seconds": round(seconds, 1), "workers": workers, "tests": pytest_counts(output),
            "exit": done.returncode}


def machine() -> dict[str, Any]:
    from fhs.run.cpu_info import cpu_record

    cpu = {k: str(v) for k, v in cpu_record().items()}
    family = cpu.get("family / model / stepping")
    name = cpu.get("cpu", "unknown CPU")
    described: dict[str, Any] = {"cpu": f"{name} ({family})" if family else name, "details": cpu}
    cores = cpu.get("cores (this process may use)", "")
    if cores.isdigit():
        described["cores"] = int(cores)
    return described


def commit() -> str:
    return subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip() or "unknown"


def suite_record(steps: Sequence[dict[str, Any]], started: datetime, tiers: Sequence[str], note: str | None,
                 load: float, machine_: dict[str, Any], commit_: str, cores: int) -> dict[str, Any]:
    totals: dict[str, int] = {}
    for step in steps:
        for word, n in step["tests"].items():
            totals[word] = totals.get(word, 0) + n
    options = [] if list(tiers) == list(TIERS) else ["--tiers", ",".join(tiers)]
    if cores != usable_cores():
        options += ["--cores", str(cores)]
    return {"kind": "suite", "date": started.date().isoformat(), "started": started.isoformat(timespec="seconds"),
            "commit": commit_, "profile": "test", "command": " ".join(["python -m dev.suite_time", *options]),
            "machine": machine_,
            "conditions": {"cpuid_mask": None, "slowdown": None, "load_average": round(load, 2),
                           **({"note": note} if note else {})},
            "steps": [{k: v for k, v in step.items() if k != "exit"} for step in steps],
            "totals": {"seconds": round(sum(step["seconds"] for step in steps), 1), "tests": totals},
            "source": "python -m dev.suite_time"}


def main(argv: Sequence[str] | None = None, run: Run = subprocess.run) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.suite_time", description=__doc__.split("\n")[0])
    parser.add_argument("--tiers", default=",".join(TIERS), help=f"comma-separated, of {', '.join(TIERS)}")
    parser.add_argument("--python", default=sys.executable, help="the interpreter that runs pytest")
    parser.add_argument("--note", default=None, help="what the record should say about the conditions")
    parser.add_argument("--record-dir", default=str(RECORDS), help="where the record goes (default book/records)")
    parser.add_argument("--no-record", action="store_true", help="print the times, write no record")
    parser.add_argument("--cores", type=int, default=usable_cores(),
                        help="cores the tiers spread over, as make test's TEST_CORES (default: the usable cores)")
    parser.add_argument("--durations", type=int, default=0, help="list this many slowest tests of each tier")
    parser.add_argument("--log-dir", default=None, help="keep each tier's whole output here as <tier>.log")
    args = parser.parse_args(argv)
    tiers = [t.strip() for t in args.tiers.split(",") if t.strip()]
    unknown = [t for t in tiers if t not in TIERS]
    if unknown or not tiers:
        parser.error(f"--tiers: {', '.join(unknown) or 'none given'}; choose from {', '.join(TIERS)}")
    started, load = datetime.now().astimezone(), os.getloadavg()[0]
    log_dir = Path(args.log_dir) if args.log_dir else None
    steps = [run_tier(name, args.python, run, args.durations, log_dir, args.cores) for name in tiers]
    record = suite_record(steps, started, tiers, args.note, load, machine(), commit(), args.cores)
    for step in record["steps"]:
        print(f"{step['step']}: {step['seconds']:.1f} s, {step['tests']}")
    if not args.no_record:
        print(f"record: {write_record(record, Path(args.record_dir))}")
    failed = any(step["exit"] not in (0, 5) for step in steps)  # 5: the tier selected no test
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
