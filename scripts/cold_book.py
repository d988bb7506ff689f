#!/usr/bin/env python3
"""A newcomer's cold `make book`, timed: a fresh clone, an empty HOME, then the build report.

The README's book time is a claim about a first build on a two-core machine with no pip,
wheel, model or matplotlib cache. This script makes exactly that build of the current
commit, so that the claim can be checked on any CPU with one command:

    python3 scripts/cold_book.py                       # into /tmp/fhs-cold (deleted first)
    python3 scripts/cold_book.py --mask on             # AVX2 kernels on an AVX-512 CPU (cpuid_fault)
    python3 scripts/cold_book.py --bench               # then the encoder's and llama.cpp's throughput
    python3 scripts/cold_book.py --slowdown 1.6        # as on a CPU 1.6 times slower (scripts/slow_cpu.py)

It clones HEAD (uncommitted changes are not built: commit first), times
`make install-book models` and `make book` in the clone with HOME pointed at an empty
folder, and prints the CPU and the table of ``fhs.book.build_report`` (install, every
chapter, closing checks, new model calls), also written to OUT/report.md. Logs go to
OUT/install.log and OUT/book.log. ``--bench`` then runs `fhs bench cpu --part all` in the clone
(the encoder's concepts/s and llama.cpp's tokens/s, each setting beside the one it replaced, on
the kernels the build ran) and adds its tables to the report. Needs FHS_DATA (or ../shared/data
beside the checkout). ``--slowdown K`` runs every step in a cgroup frozen for 1 - 1/K of each
tenth of a second (``scripts/slow_cpu.py``; needs root): a stand-in for a CPU K times slower,
which the provenance page and the report name.
Exit status: make's, else 1 if any closing check is not OK.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from slow_cpu import CannotSlow, SlowGroup

ROOT = Path(__file__).resolve().parent.parent
Run = Callable[..., subprocess.CompletedProcess]  # subprocess.run, or SlowGroup.run under --slowdown


def timed(command: list[str], cwd: Path, env: dict[str, str], log: Path,
          run: Run = subprocess.run) -> tuple[int, float]:
    started = time.perf_counter()
    with log.open("w") as handle:
        status = run(command, cwd=cwd, env=env, stdout=handle, stderr=subprocess.STDOUT).returncode
    return status, time.perf_counter() - started


def bench(clone: Path, env: dict[str, str], mask: bool, log: Path, run: Run = subprocess.run) -> str:
    """`fhs bench cpu --part all` on the kernels the build ran (the bench masks CPUID itself)."""
    command = [str(clone / ".venv" / "bin" / "fhs"), "bench", "cpu", "--part", "all",
               "--isa", "x86-64-v3" if mask else "native", "--concepts", "8192", "--rounds", "2"]
    status, seconds = timed(command, clone, env, log, run)
    print(f"fhs bench cpu: {seconds:.1f} s (exit {status}; {log})", flush=True)
    return f"`fhs {' '.join(command[1:])}` ({seconds:.0f} s, exit {status})\n\n{log.read_text()}"


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return set(line.partition(":")[2].split())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="/tmp/fhs-cold", help="scratch folder, deleted first (default /tmp/fhs-cold)")
    parser.add_argument("--mask", choices=("auto", "on", "off"), default="off",
                        help="preload the CPUID mask to x86-64-v3 for the whole build: on, off (default), "
                             "or auto (on where the CPU has AVX-512 and cpuid_fault)")
    parser.add_argument("--profile", default="cpu", help="the book's profile (default cpu)")
    parser.add_argument("--bench", action="store_true",
                        help="after the build, run `fhs bench cpu --part all` in the clone and add it to the report")
    parser.add_argument("--slowdown", type=float, default=1.0, metavar="K",
                        help="run install, book and bench as on a CPU K times slower: frozen for 1 - 1/K of "
                             "every tenth of a second (scripts/slow_cpu.py; needs root)")
    args = parser.parse_args(argv)

    data = os.environ.get("FHS_DATA") or str((ROOT.parent / "shared" / "data").resolve())
    if not Path(data).is_dir():
        print(f"error: data directory {data} not found; set FHS_DATA (README, Data)", file=sys.stderr)
        return 2
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                           capture_output=True, text=True).stdout.strip()
    if dirty:
        print("warning: uncommitted changes are not part of the clone this script builds", file=sys.stderr)
    flags = cpu_flags()
    mask = args.mask == "on" or (args.mask == "auto" and {"avx512f", "cpuid_fault"} <= flags)

    if args.slowdown == 1.0:
        return build(args, data, mask)
    try:
        group = SlowGroup(args.slowdown)
    except (CannotSlow, ValueError) as error:
        print(f"error: --slowdown: {error}", file=sys.stderr)
        return 2
    print(group.describe(), flush=True)
    try:
        return build(args, data, mask, group.run)  # cpu_record's "slowed down" row names it
    finally:
        group.remove()


def build(args: argparse.Namespace, data: str, mask: bool, run: Run = subprocess.run) -> int:
    """Clone, install, build and report; ``run`` starts the timed steps (in the --slowdown cgroup)."""
    out = Path(args.out).resolve()
    shutil.rmtree(out, ignore_errors=True)
    (out / "home").mkdir(parents=True)
    clone = out / "main"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    env = {key: value for key, value in os.environ.items() if key not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env.update(HOME=str(out / "home"), FHS_DATA=data, PROFILE=args.profile)

    status, install = timed(["make", "install-book", "models"], clone, env, out / "install.log", run)
    print(f"install: {install:.1f} s (exit {status}; {out / 'install.log'})", flush=True)
    if status:
        return status
    python = str(clone / ".venv" / "bin" / "python")
    if mask:
        library = subprocess.run(
            [python, "-c", "from pathlib import Path; from fhs.run.machine import x86_64_v3_library as v3; "
                           "print(v3(Path.home() / '.cache/fhs'))"],
            env=env, capture_output=True, text=True, check=True).stdout.strip()
        env["LD_PRELOAD"] = library
        print(f"CPUID masked to x86-64-v3 for the build ({library})", flush=True)
    status, book = timed(["make", "book"], clone, env, out / "book.log", run)
    print(f"make book: {book:.1f} s (exit {status}; {out / 'book.log'})", flush=True)

    cpu = run([python, "-c", "from fhs.run.machine import cpu_record\n"
                             "for k, v in cpu_record().items(): print(f'- {k}: {v}')"],
              env=env, capture_output=True, text=True).stdout
    log = clone / "_build" / ".notebooks" / "executions.json"
    chapters = sum(entry["seconds"] for entry in json.loads(log.read_text()).values()) if log.is_file() else 0.0
    steps = ["--step", f"install={install:.1f}", "--step", f"make book outside the chapters (HTML)={book - chapters:.1f}"]
    report = subprocess.run([python, "-m", "fhs.book.build_report", str(clone), *steps],
                            env=env, capture_output=True, text=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=clone, capture_output=True,
                            text=True).stdout.strip()
    text = (f"Cold `make book` of {commit} (make book {book:.1f} s wall, install {install:.1f} s)\n\n"
            f"{cpu}\n{report.stdout}")
    if args.bench:
        text += "\n" + bench(clone, {k: v for k, v in env.items() if k != "LD_PRELOAD"}, mask, out / "bench.log", run)
    (out / "report.md").write_text(text)
    print(text + report.stderr)
    if status or report.returncode:
        return status or report.returncode
    total = next((line for line in report.stdout.splitlines() if line.startswith("| **total**")), "")
    not_ok = " FAIL" in total or " NEW" in total
    return 1 if not_ok else 0


if __name__ == "__main__":
    sys.exit(main())
