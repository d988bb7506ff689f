"""One run at a time per run directory: a lock file that says who holds it.

Two runs appending to one ``records.jsonl`` would interleave records and pay
for every model call twice. The lock records pid, host and start time; a lock
left by a process that is gone (same host, pid no longer alive) is taken over
with a warning, so a killed run never blocks the next one.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from fhs.core.errors import InputError, warn

LOCK_NAME = "run.lock"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


class RunLock:
    """``with RunLock(run_dir):`` holds the directory's lock for the block."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / LOCK_NAME
        self.held = False

    def acquire(self) -> RunLock:
        me = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                holder = self._holder()
                pid = holder.get("pid")
                if not isinstance(pid, int) or (holder.get("host") == me["host"] and not _alive(pid)):
                    warn(f"{self.path}: taking over a stale lock (pid {pid} is no longer running)")
                    self.path.unlink(missing_ok=True)
                    continue
                raise InputError(
                    f"another fhs run holds this run directory (pid {holder.get('pid', '?')} on "
                    f"{holder.get('host', '?')}, started {holder.get('started', '?')})",
                    path=self.path.parent,
                    fix=f"wait for it, or use another --out; if that run is gone, delete {self.path}",
                ) from None
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(me, handle)
            self.held = True
            return self
        raise InputError("could not take the run lock", path=self.path)

    def _holder(self) -> dict:
        try:
            holder = json.loads(self.path.read_text(encoding="utf-8"))
            return holder if isinstance(holder, dict) else {}
        except (OSError, ValueError):
            return {}

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()
