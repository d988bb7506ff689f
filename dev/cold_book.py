"""A newcomer's cold `make book` (or `make test`), timed, and kept as a record the book renders.

A claim about how long a first build takes needs the build a newcomer makes: a fresh
clone, no pip, wheel, model or matplotlib cache. This script makes exactly that build of
the current commit, so the claim can be checked on any CPU with one command:

    python -m dev.cold_book                       # into /tmp/fhs-cold (deleted first)
    python -m dev.cold_book --tests               # `make test` instead, as .ci/run runs it
    python -m dev.cold_book --mask x86-64-v3      # AVX2 kernels on an AVX-512 CPU (cpuid_fault)
    python -m dev.cold_book --bench               # then the encoder's and llama.cpp's throughput
    python -m dev.cold_book --slowdown 1.6        # as on a CPU 1.6 times slower (dev/slow_cpu.py)

It clones HEAD (uncommitted changes are not built: commit first), times
`make install-book models` and `make book` in the clone with HOME pointed at an empty
folder, and prints the CPU and the table of ``fhs.book.build_report`` (install, every
chapter, closing checks, new model calls), also written to OUT/report.md. It writes the
same figures as a JSON record into ``book/records/`` of this checkout (``--record-dir``;
``--no-record`` writes none), from which ``python -m dev.measurements`` renders the book's
page of measured builds: commit the record to publish the build. Logs go to
OUT/install.log and OUT/book.log. The build runs unmasked, as a newcomer's does;
``--mask x86-64-v3`` preloads the CPUID mask (``dev/cpuid_mask.py``) for the whole build, and
the record says so. ``--bench`` then runs ``python -m dev.bench_cpu --part all`` in the clone
and adds its tables to the report. Needs FHS_DATA (or ../shared/data beside the checkout).
``--slowdown K`` runs every step in a cgroup frozen for 1 - 1/K of each tenth of a second
(``dev/slow_cpu.py``; needs root): a stand-in for a CPU K times slower, which the
provenance page, the report and the record name.
Exit status: make's, else 1 if any closing check is not OK.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from dev.measurements import RECORDS, checks_text, write_record
from dev.slow_cpu import CannotSlow, SlowGroup

ROOT = Path(__file__).resolve().parent.parent
Run = Callable[..., subprocess.CompletedProcess]  # subprocess.run, or SlowGroup.run under --slowdown
MASKS = ("x86-64-v3",)
# what the clone's Python prints: the CPU record and, after a book build, each chapter's cost (JSON)
CPU_CODE = "import json; from fhs.run.cpu_info import cpu_record; print(json.dumps(cpu_record()))"
COSTS_CODE = ("import json, sys; from dataclasses import asdict; from pathlib import Path; "
              "from fhs.book.build_report import chapter_costs; "
              "print(json.dumps([asdict(c) for c in chapter_costs(Path(sys.argv[1]))]))")
PYTEST_SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|deselected|errors?|xfailed|xpassed)")


def timed(command: list[str], cwd: Path, env: dict[str, str], log: Path,
          run: Run = subprocess.run) -> tuple[int, float]:
    started = time.perf_counter()
    with log.open("w") as handle:
        status = run(command, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode
    return status, time.perf_counter() - started


def bench(clone: Path, env: dict[str, str], mask: str | None, log: Path, run: Run = subprocess.run) -> str:
    """``python -m dev.bench_cpu --part all`` on the kernels the build ran (the bench masks CPUID itself)."""
    command = [str(clone / ".venv" / "bin" / "python"), "-m", "dev.bench_cpu", "--part", "all",
               "--isa", mask or "native", "--concepts", "8192", "--rounds", "2"]
    status, seconds = timed(command, clone, env, log, run)
    print(f"python -m dev.bench_cpu: {seconds:.1f} s (exit {status}; {log})", flush=True)
    return f"`python {' '.join(command[1:])}` ({seconds:.0f} s, exit {status})\n\n{log.read_text()}"


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.cold_book", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="/tmp/fhs-cold", help="scratch folder, deleted first (default /tmp/fhs-cold)")
    parser.add_argument("--tests", action="store_true",
                        help="time `make install-test models` and `make test` instead of the book (as .ci/run)")
    parser.add_argument("--mask", choices=MASKS, default=None,
                        help="preload the CPUID mask for the whole build (default: none, as a newcomer builds)")
    parser.add_argument("--profile", default="cpu", help="the book's profile (default cpu)")
    parser.add_argument("--bench", action="store_true",
                        help="after the build, run `python -m dev.bench_cpu --part all` in the clone and add it "
                             "to the report")
    parser.add_argument("--slowdown", type=float, default=1.0, metavar="K",
                        help="run install, book and bench as on a CPU K times slower: frozen for 1 - 1/K of "
                             "every tenth of a second (dev/slow_cpu.py; needs root)")
    parser.add_argument("--record-dir", default=str(RECORDS), help="where the JSON record goes (default book/records)")
    parser.add_argument("--no-record", action="store_true", help="write no record")
    parser.add_argument("--note", default=None, help="a note on the conditions, kept in the record")
    args = parser.parse_args(argv)

    data = os.environ.get("FHS_DATA") or str((ROOT.parent / "shared" / "data").resolve())
    if not Path(data).is_dir():
        print(f"error: data directory {data} not found; set FHS_DATA (README, Data)", file=sys.stderr)
        return 2
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        print("warning: uncommitted changes are not part of the clone this script builds", file=sys.stderr)
    if args.mask and "cpuid_fault" not in cpu_flags():
        print("error: --mask needs CPUID faulting (cpuid_fault in /proc/cpuinfo), which this CPU lacks",
              file=sys.stderr)
        return 2

    if args.slowdown == 1.0:
        return build(args, data)
    try:
        group = SlowGroup(args.slowdown)
    except (CannotSlow, ValueError) as error:
        print(f"error: --slowdown: {error}", file=sys.stderr)
        return 2
    print(group.describe(), flush=True)
    try:
        return build(args, data, group.run)  # cpu_record's "slowed down" row names it
    finally:
        group.remove()


def build(args: argparse.Namespace, data: str, run: Run = subprocess.run) -> int:
    """Clone, install, build (or test) and report; ``run`` starts the timed steps (in the --slowdown cgroup)."""
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    (out / "home").mkdir(parents=True)
    clone = out / "main"
    started = datetime.now().astimezone()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(HOME=str(out / "home"), FHS_DATA=data, PROFILE=args.profile)

    install_targets = ["install-test", "models"] if args.tests else ["install-book", "models"]
    status, install = timed(["make", *install_targets], clone, env, out / "install.log", run)
    print(f"install: {install:.1f} s (exit {status}; {out / 'install.log'})", flush=True)
    if status:
        return status
    python = str(clone / ".venv" / "bin" / "python")
    if args.mask:
        library = subprocess.run([python, "-m", "dev.cpuid_mask"], cwd=clone, env=env, capture_output=True,
                                 text=True, check=True).stdout.strip()
        env["LD_PRELOAD"] = library
        print(f"CPUID masked to {args.mask} for the build ({library})", flush=True)
    target = "test" if args.tests else "book"
    status, seconds = timed(["make", target], clone, env, out / f"{target}.log", run)
    print(f"make {target}: {seconds:.1f} s (exit {status}; {out / f'{target}.log'})", flush=True)

    cpu = json.loads(run([python, "-c", CPU_CODE], env=env, capture_output=True, text=True).stdout or "{}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                            text=True).stdout.strip()
    record = base_record(args, commit, started, cpu)
    if args.tests:
        tests = pytest_counts((out / "test.log").read_text(errors="replace"))
        record["steps"] = [{"step": "install", "seconds": round(install, 1)},
                           {"step": "pytest", "seconds": round(seconds, 1)}]
        record["totals"] = {"seconds": round(install + seconds, 1), "tests": tests}
        text = f"Cold `make test` of {commit}: install {install:.1f} s, make test {seconds:.1f} s; {tests}\n"
        not_ok = bool(tests.get("failed") or tests.get("errors") or tests.get("error"))
    else:
        text, not_ok = book_record(record, clone, env, python, install, seconds, cpu)
        if args.bench:
            text += "\n" + bench(clone, {k: v for k, v in env.items() if k != "LD_PRELOAD"}, args.mask,
                                 out / "bench.log", run)
    (out / "report.md").write_text(text)
    print(text)
    if not args.no_record:
        print(f"record: {write_record(record, Path(args.record_dir))}")
    return status or (1 if not_ok else 0)


def base_record(args: argparse.Namespace, commit: str, started: datetime, cpu: dict[str, str]) -> dict[str, Any]:
    """What every record says: the run, the machine (the clone's ``cpu_record``) and the conditions."""
    name = cpu.get("cpu", "unknown CPU")
    family = cpu.get("family / model / stepping")
    machine: dict[str, Any] = {"cpu": f"{name} ({family})" if family else name}
    cores = cpu.get("cores (this process may use)", "")
    if cores.isdigit():
        machine["cores"] = int(cores)
    machine["details"] = cpu
    options = [*(["--tests"] if args.tests else []), *(["--mask", args.mask] if args.mask else []),
               *(["--slowdown", f"{args.slowdown:g}"] if args.slowdown != 1 else [])]
    command = " ".join(["python -m dev.cold_book", *options])
    return {"kind": "tests" if args.tests else "cold-book", "date": started.date().isoformat(),
            "started": started.isoformat(timespec="seconds"), "commit": commit,
            "profile": "test" if args.tests else args.profile, "command": command, "machine": machine,
            "conditions": {"cpuid_mask": args.mask, "slowdown": args.slowdown if args.slowdown != 1 else None,
                           **({"note": args.note} if args.note else {})},
            "steps": [], "totals": {}, "source": "python -m dev.cold_book"}


def book_record(record: dict[str, Any], clone: Path, env: dict[str, str], python: str, install: float,
                book: float, cpu: dict[str, str]) -> tuple[str, bool]:
    """Fill ``record`` with the install, every chapter's cost and the HTML build; the report's text, and
    whether any closing check was not OK."""
    costs = json.loads(subprocess.run([python, "-c", COSTS_CODE, str(clone)], env=env, capture_output=True,
                                      text=True).stdout or "[]")
    chapters = sum(c["seconds"] for c in costs)
    steps: list[dict[str, Any]] = [{"step": "install", "seconds": round(install, 1)}]
    for c in costs:
        model = c["model"]
        steps.append({"step": c["chapter"], "seconds": round(c["seconds"], 1), "checks": c["checks"],
                      "model_calls": model["calls"], "prompt_tokens": model["tokens_in"],
                      "reply_tokens": model["tokens_out"], "model_seconds": round(model["seconds"], 1)})
    steps.append({"step": "html", "seconds": round(book - chapters, 1)})
    checks: dict[str, int] = {}
    for c in costs:
        for status, n in c["checks"].items():
            checks[status] = checks.get(status, 0) + n
    record["steps"] = steps
    record["totals"] = {"seconds": round(install + book, 1), "checks": {k: n for k, n in checks.items() if n},
                        "model_calls": sum(c["model"]["calls"] for c in costs),
                        "model_seconds": round(sum(c["model"]["seconds"] for c in costs), 1),
                        "prompt_tokens": sum(c["model"]["tokens_in"] for c in costs),
                        "reply_tokens": sum(c["model"]["tokens_out"] for c in costs)}
    lines = [f"Cold `make book` of {record['commit']} (make book {book:.1f} s wall, install {install:.1f} s)", ""]
    lines += [f"- {k}: {v}" for k, v in cpu.items()] + ["", "| step | seconds | closing checks | model calls |",
                                                         "|---|---:|---|---:|"]
    lines += [f"| {s['step']} | {s['seconds']:.1f} | {checks_text(s.get('checks'))} | {s.get('model_calls', '')} |"
              for s in steps]
    lines.append(f"| **total** | **{install + book:.1f}** | {checks_text(checks)} | "
                 f"{record['totals']['model_calls']} |")
    not_ok = not costs or any(checks.get(status) for status in ("FAIL", "NEW"))
    return "\n".join(lines) + "\n", not_ok


def pytest_counts(log: str) -> dict[str, int]:
    """The counts of pytest's last summary line ("1233 passed, 1 skipped in ...")."""
    summary = next((line for line in reversed(log.splitlines()) if " in " in line and PYTEST_SUMMARY.search(line)), "")
    return {word: int(n) for n, word in PYTEST_SUMMARY.findall(summary)}


if __name__ == "__main__":
    sys.exit(main())
