#!/usr/bin/env python3
"""Run a command on a slower CPU: this machine's cores, with a cgroup quota on their time.

A cold `make book` must stay within the hour on the slowest two-core CPU a newcomer may have.
Where that CPU cannot be reached, a faster one can stand in for it: the kernel's CPU bandwidth
control (cgroup v1 ``cpu.cfs_quota_us`` or v2 ``cpu.max``) lets the command's processes use
only ``cores / slowdown`` cores' worth of time, every ``PERIOD_US``. Every engine (Python,
ONNX Runtime, llama.cpp, the compiler) then runs ``slowdown`` times slower, so a slowdown at
least as large as the slow CPU's measured ratio on every engine (``fhs bench cpu`` on both)
bounds that CPU's time from above. It does not emulate a different cache or memory system.

    sudo python3 scripts/slow_cpu.py 1.6 -- make book

Needs write access to the cgroup file system (root, or a delegated cgroup).
Exit status: the command's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

PERIOD_US = 10_000  # short, so the command is held back in many small pauses, not a few long ones
CGROUP_ROOT = Path("/sys/fs/cgroup")


class CannotSlow(RuntimeError):
    """The cgroup needed for a CPU quota cannot be made here (with what to do instead)."""


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def quota_us(slowdown: float, cores: int, period_us: int = PERIOD_US) -> int:
    """The CPU time per period that makes ``cores`` cores run ``slowdown`` times slower."""
    if not slowdown >= 1.0:
        raise ValueError(f"slowdown must be at least 1 (got {slowdown})")
    return max(1000, round(cores * period_us / slowdown))  # the kernel refuses quotas under 1 ms


def own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as controller -> path; cgroup v2's single line is under ""."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def cpu_hierarchy(root: Path = CGROUP_ROOT) -> tuple[str, Path] | None:
    """("v1", mount) where the cpu controller is mounted alone or with cpuacct, else ("v2", root)."""
    for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        if (root / name / "cpu.cfs_quota_us").is_file():
            return "v1", root / name
    controllers = root / "cgroup.controllers"
    if controllers.is_file() and "cpu" in controllers.read_text().split():
        return "v2", root
    return None


class SlowGroup:
    """A child cgroup of this process's own, with a CPU quota; ``enter`` moves the calling process in."""

    def __init__(self, slowdown: float, cores: int | None = None, root: Path = CGROUP_ROOT) -> None:
        self.slowdown = slowdown
        self.cores = cores or usable_cores()
        found = cpu_hierarchy(root)
        if found is None:
            raise CannotSlow(f"no cgroup cpu controller under {root}; run on Linux with cgroups mounted")
        self.version, mount = found
        own = own_cgroups(Path("/proc/self/cgroup").read_text())
        parent = own.get("cpu" if self.version == "v1" else "", "/").lstrip("/")
        self.path = mount / parent / f"fhs-slow-{os.getpid()}"
        self.quota = quota_us(slowdown, self.cores)
        try:
            self.path.mkdir()
            if self.version == "v1":
                (self.path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
                (self.path / "cpu.cfs_quota_us").write_text(str(self.quota))
            else:
                (self.path / "cpu.max").write_text(f"{self.quota} {PERIOD_US}")
        except OSError as error:
            self.remove()
            raise CannotSlow(f"cannot make the cgroup {self.path} with a CPU quota ({error.strerror}); run as "
                             "root, or in a cgroup delegated to you with the cpu controller enabled") from None

    def describe(self) -> str:
        return (f"CPU time limited to {self.quota / PERIOD_US:.2f} of {self.cores} cores, {self.slowdown:g} times "
                f"slower (cgroup {self.version} {self.path}, {self.quota} us per {PERIOD_US} us)")

    def enter(self) -> None:
        """Move this process (and the children it starts afterwards) into the group: a ``preexec_fn``."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass  # not made, or a process of the command outlived it; the kernel keeps the group


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("slowdown", type=float, help="how many times slower every core runs (at least 1)")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    try:
        group = SlowGroup(args.slowdown)
    except (CannotSlow, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(group.describe(), file=sys.stderr, flush=True)
    try:
        return subprocess.run(command, preexec_fn=group.enter).returncode
    finally:
        group.remove()


if __name__ == "__main__":
    sys.exit(main())
