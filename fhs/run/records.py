"""Per-fact result records on disk: appended as they finish, resumed after a crash.

A run directory holds ``records.jsonl`` (one JSON object per finished fact)
and ``metrics.json`` (written atomically at the end), stamped by
``run-config.json`` (settings and input digests, ``fhs.run.stamp``). Records
are flushed to the operating system as they are written and fsynced at most
once a second and on close: a killed process loses nothing, a power cut at
most the last second. (One fsync per record cost chapter 1, which writes
229,458 records, a fifth of its time.) A killed run leaves every finished fact's record intact;
at most the line being written is cut off, and the next run drops that
fragment with a warning and continues with the facts it has not seen.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError, warn
from fhs.core.files import atomic_write, write_text_atomic
from fhs.run.lock import RunLock
from fhs.run.stamp import differences

STAMP_NAME = "run-config.json"


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Write JSON via a temporary file and a rename, so readers never see half a file."""
    with atomic_write(path, fsync=True) as handle:
        json.dump(payload, handle, indent=2, ensure_ascii=False, sort_keys=False)
        handle.write("\n")


def _parse_lines(path: Path) -> tuple[list[dict], bool]:
    """Records of ``path`` and whether a torn last line (a killed write) was dropped.

    Lines are decoded one by one, so a write cut inside a multi-byte character
    only loses its own line. A damaged line anywhere but at the end is not a
    fragment of a killed write: it is an error naming the line, and nothing is
    rewritten.
    """
    lines = path.read_bytes().split(b"\n")
    last = max((i for i, line in enumerate(lines) if line.strip()), default=-1)
    records: list[dict] = []
    torn = False
    for index, raw in enumerate(lines):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                raise ValueError("not a record")
        except ValueError:  # JSONDecodeError and UnicodeDecodeError included
            if index == last:
                torn = True
                break
            raise InputError("not a record (a JSON object with an 'id')", path=path, line=index + 1,
                             fix=f"repair or remove line {index + 1}; the other records are kept") from None
        records.append(record)
    return records, torn


def read_records(path: str | Path) -> list[dict]:
    """All complete records of a ``records.jsonl`` (a torn last line is ignored)."""
    path = Path(path)
    if not path.exists():
        return []
    return _parse_lines(path)[0]


class RecordWriter:
    """Appends finished records to ``records.jsonl``, resuming where a previous run stopped.

    Holds the run directory's lock while open. ``fresh`` discards the records
    (and the stamp) of an earlier run instead of resuming from them.
    ``sync_seconds``: the longest a flushed record waits for its fsync.
    """

    def __init__(self, path: str | Path, config: Mapping[str, Any] | None = None, *, fresh: bool = False,
                 sync_seconds: float = 1.0) -> None:
        self.path = Path(path)
        self.sync_seconds = sync_seconds
        self._synced = time.monotonic()
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise InputError("is a file, not a run directory", path=self.path.parent,
                             fix="pass a directory to --out")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = RunLock(self.path.parent).acquire()
        try:
            if fresh:
                for name in (self.path.name, "metrics.json", STAMP_NAME):
                    (self.path.parent / name).unlink(missing_ok=True)
            existing, torn = _parse_lines(self.path) if self.path.exists() else ([], False)
            self._check_config(config, bool(existing))
            if torn:
                warn(f"{self.path}: dropped a torn last line (a run was stopped while writing it); "
                     f"{len(existing)} finished records are kept")
            self._rewrite_clean(existing)
            self.done: dict[str, dict] = {record["id"]: record for record in existing}
            self._handle = self.path.open("a", encoding="utf-8")
        except BaseException:
            self._lock.release()
            raise

    def _check_config(self, config: Mapping[str, Any] | None, has_records: bool) -> None:
        """Refuse to mix records of different settings or inputs in one directory."""
        if config is None:
            return
        stamp = self.path.with_name(STAMP_NAME)
        fix = "use another --out directory, or pass --fresh to discard the old records"
        if has_records and not stamp.exists():
            raise InputError(f"holds records but no {STAMP_NAME}, so nothing says what they were made from",
                             path=self.path.parent, fix=fix)
        if has_records:
            try:
                previous = json.loads(stamp.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise InputError("not valid JSON", path=stamp, fix=fix) from None
            # Where the files were read from may move with the folder; their contents are in "inputs".
            changed = differences({k: v for k, v in previous.items() if k != "sources"},
                                  {k: v for k, v in json.loads(json.dumps(config)).items() if k != "sources"})
            if changed:
                inputs = [name for name in changed if name.startswith("inputs.")]
                what = "inputs" if inputs else "settings"
                raise InputError(
                    f"this run directory holds records made with other {what} "
                    f"({', '.join(changed[:6])}{', ...' if len(changed) > 6 else ''} changed)",
                    path=self.path.parent, fix=fix)
        write_json_atomic(stamp, dict(config))

    def _rewrite_clean(self, records: list[dict]) -> None:
        """Drop a torn trailing fragment so appends start on a fresh line."""
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            write_text_atomic(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))

    def __contains__(self, fact_id: str) -> bool:
        return fact_id in self.done

    def write(self, record: Mapping[str, Any]) -> None:
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.flush()
        if time.monotonic() - self._synced >= self.sync_seconds:
            self._sync()
        self.done[record["id"]] = dict(record)

    def _sync(self) -> None:
        os.fsync(self._handle.fileno())
        self._synced = time.monotonic()

    def close(self) -> None:
        try:
            try:
                self._handle.flush()
                self._sync()
            finally:
                self._handle.close()
        finally:
            self._lock.release()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def records_in_order(self, fact_ids: Iterable[str]) -> list[dict]:
        return [self.done[fid] for fid in fact_ids if fid in self.done]
