"""Run a command on a slower CPU: this machine's cores, frozen for part of every tenth of a second.

A cold `make book` must stay within the hour on the slowest two-core CPU a newcomer may have.
Where that CPU cannot be reached, a faster one can stand in for it. The command runs in a
cgroup of its own that is frozen for ``1 - 1/slowdown`` of every ``PERIOD_S`` and thawed for
the rest (the cgroup freezer: v1 ``freezer.state``, v2 ``cgroup.freeze``). All its processes
and threads stop and resume together, so every engine (Python, ONNX Runtime, llama.cpp, the
compiler) gets the same share of wall time, single-threaded or not. A CPU quota
(``cpu.cfs_quota_us``) would not do: it leaves one busy thread of two cores untouched and
throttles threads that wait for each other (llama.cpp's) about twice as hard as asked.
Freezing and thawing cost a little, so the measured slowdown is somewhat above the nominal one;
``python -m dev.bench_cpu`` under this script says by how much on each engine. It does not emulate a
different cache or memory system.

    python -m dev.slow_cpu 1.6 -- make book          # as root

Children see ``FHS_SLOWDOWN`` (the provenance page records it). Needs write access to the
cgroup file system (root, or a delegated cgroup). Exit status: the command's.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

PERIOD_S = 0.1  # one freeze per period: long against the freezer's own cost, short against a step
CGROUP_ROOT = Path("/sys/fs/cgroup")
ENV = "FHS_SLOWDOWN"


class CannotSlow(RuntimeError):
    """The cgroup needed to freeze the command cannot be made here (with what to do instead)."""


def duty(slowdown: float, period_s: float = PERIOD_S) -> tuple[float, float]:
    """Seconds thawed and frozen per period for a CPU ``slowdown`` times slower."""
    if not slowdown >= 1.0:
        raise ValueError(f"slowdown must be at least 1 (got {slowdown})")
    running = period_s / slowdown
    return running, period_s - running


def own_cgroups(text: str) -> dict[str, str]:
    """``/proc/self/cgroup`` as controller -> path; cgroup v2's single line is under ""."""
    paths: dict[str, str] = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            paths[controller] = path
    return paths


def freezer_hierarchy(root: Path = CGROUP_ROOT) -> tuple[str, Path] | None:
    """("v1", the freezer's mount) where cgroup v1 has one, else ("v2", root) where v2 is mounted there."""
    if (root / "freezer" / "freezer.state").is_file() or (root / "freezer" / "cgroup.procs").is_file():
        return "v1", root / "freezer"
    if (root / "cgroup.controllers").is_file():
        return "v2", root
    return None


class SlowGroup:
    """A child cgroup of this process's own; ``enter`` moves the calling process in, ``throttling`` freezes it."""

    def __init__(self, slowdown: float, root: Path = CGROUP_ROOT, own: str | None = None) -> None:
        self.slowdown = slowdown
        self.running_s, self.frozen_s = duty(slowdown)
        found = freezer_hierarchy(root)
        if found is None:
            raise CannotSlow(f"no cgroup freezer under {root}; run on Linux with cgroups mounted")
        self.version, mount = found
        text = own if own is not None else Path("/proc/self/cgroup").read_text()
        parent = own_cgroups(text).get("freezer" if self.version == "v1" else "", "/").lstrip("/")
        self.path = mount / parent / f"fhs-slow-{os.getpid()}"
        self.switch = self.path / ("freezer.state" if self.version == "v1" else "cgroup.freeze")
        self.states = ("FROZEN", "THAWED") if self.version == "v1" else ("1", "0")
        try:
            self.path.mkdir()
            self.switch.write_text(self.states[1])
        except OSError as error:
            self.remove()
            raise CannotSlow(f"cannot make the cgroup {self.path} ({error.strerror}); run as root, or in a "
                             "cgroup delegated to you") from None

    def describe(self) -> str:
        return (f"{self.slowdown:g} times slower: frozen {self.frozen_s * 1000:.1f} ms of every "
                f"{(self.running_s + self.frozen_s) * 1000:.0f} ms (cgroup {self.version} {self.path})")

    def environment(self, env: dict[str, str] | None = None) -> dict[str, str]:
        return {**(os.environ if env is None else env), ENV: self.describe()}

    def enter(self) -> None:
        """Move this process (and the children it starts afterwards) into the group: a ``preexec_fn``."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    @contextlib.contextmanager
    def throttling(self) -> Iterator[None]:
        """Freeze and thaw the group in a background thread while the block runs; thawed after it."""
        stop = threading.Event()

        def cycle() -> None:
            while not stop.wait(self.running_s):
                self.switch.write_text(self.states[0])
                stop.wait(self.frozen_s)
                self.switch.write_text(self.states[1])

        worker = threading.Thread(target=cycle, name="slow-cpu", daemon=True)
        worker.start()
        try:
            yield
        finally:
            stop.set()
            worker.join()
            self.switch.write_text(self.states[1])

    def run(self, command: list[str], **kwargs) -> subprocess.CompletedProcess:
        """``subprocess.run`` in the group, frozen and thawed while it runs."""
        kwargs["env"] = self.environment(kwargs.get("env"))
        with self.throttling():
            return subprocess.run(command, preexec_fn=self.enter, **kwargs)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.switch.write_text(self.states[1])
        deadline = time.monotonic() + 5
        while self.path.exists() and time.monotonic() < deadline:
            try:
                self.path.rmdir()
            except OSError:  # a process of the command is still exiting
                time.sleep(0.1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("slowdown", type=float, help="how many times slower the command runs (at least 1)")
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
        return group.run(command).returncode
    finally:
        group.remove()


if __name__ == "__main__":
    sys.exit(main())
