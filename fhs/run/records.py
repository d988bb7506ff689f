"""Per-fact result records on disk: appended as they finish, resumed after a crash.

A run directory holds ``records.jsonl`` (one JSON object per finished fact)
and ``metrics.json`` (written atomically at the end), stamped by
``run-config.json`` (settings and input digests, ``fhs.run.digests``). Records
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
import threading
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from fhs.core.errors import InputError, warn
from fhs.core.files import atomic_write
from fhs.run.digests import differences
from fhs.run.lock import RunLock
from fhs.run.summary import record_summary

STAMP_NAME = "run-config.json"


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Write JSON via a temporary file and a rename, so readers never see half a file."""
    with atomic_write(path, fsync=True) as handle:
        json.dump(payload, handle, indent=2, ensure_ascii=False, sort_keys=False)
        handle.write("\n")


class _Torn(NamedTuple):
    """A damaged last line (a killed write) and the byte offset where it starts."""

    offset: int


def _scan(path: Path) -> Iterator[tuple[int, dict] | _Torn]:
    """``(offset, record)`` of ``path`` one line at a time, then a ``_Torn`` if the last line is a
    killed write's fragment.

    Lines are decoded one by one, so a write cut inside a multi-byte character
    only loses its own line. A damaged line anywhere but at the end is not a
    fragment of a killed write: it is an error naming the line, and nothing is
    rewritten. Only one line is held at a time, whatever the file's size.
    """
    damaged: tuple[int, int] | None = None  # (line number, offset) of a bad line not yet known to be the last
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            start, offset = offset, offset + len(raw)
            if not raw.strip():
                continue
            if damaged is not None:
                raise _not_a_record(path, damaged[0])
            try:
                record = json.loads(raw)
                if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                    raise ValueError("not a record")
            except ValueError:  # JSONDecodeError and UnicodeDecodeError included
                damaged = (number, start)
                continue
            yield start, record
    if damaged is not None:
        yield _Torn(damaged[1])


def _not_a_record(path: Path, line: int) -> InputError:
    return InputError(
        "not a record (a JSON object with an 'id')",
        path=path,
        line=line,
        fix=f"repair or remove line {line}; the other records are kept",
    )


def iter_records(path: str | Path, fields: Sequence[str] | None = None) -> Iterator[dict]:
    """The complete records of a ``records.jsonl`` one at a time (a torn last line is ignored).

    ``fields`` keeps only those keys of each record (those it has), so a reader
    of a large run holds one full record at a time and only what it asked for.
    """
    path = Path(path)
    if not path.exists():
        return
    for item in _scan(path):
        if isinstance(item, _Torn):
            return
        yield _chosen(item[1], fields)


def _chosen(record: dict, fields: Sequence[str] | None) -> dict:
    return record if fields is None else {name: record[name] for name in fields if name in record}


def records_at(path: str | Path, summaries: Iterable[Mapping], fields: Sequence[str] | None = None) -> Iterator[dict]:
    """The records that ``summaries`` (from :class:`RecordWriter`) point to, in their order.

    Each summary holds its record's byte ``offset``, so this reads only those
    records, one at a time, however many others the file holds.
    """
    with Path(path).open("rb") as handle:
        for summary in summaries:
            handle.seek(summary["offset"])
            record = json.loads(handle.readline())
            if record.get("id") != summary["id"]:
                raise InputError(
                    f"holds another record where {summary['id']!r} was written; the file changed "
                    "since this run was read",
                    path=path,
                    fix="read the run again",
                )
            yield _chosen(record, fields)


def read_records(path: str | Path) -> list[dict]:
    """All complete records of a ``records.jsonl``: loads every record, so small runs only
    (:func:`iter_records` streams them)."""
    return list(iter_records(path))


def _pack(summary: Mapping[str, Any]) -> bytes:
    return json.dumps(summary, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _unpack(packed: bytes) -> dict:
    return json.loads(packed)


class PackedSummaries:
    """Facts' packed summaries in one growing buffer, found by fact id: no Python object per fact.

    As one bytes object per fact they were small long-lived blocks made throughout a run
    between the facts' short-lived ones; here a fact costs its id's dict slot and eight
    bytes of offset (``dev/bench_memory.py`` saw no change beyond its noise at 3,000
    facts). A fact stored again (a failed fact retried) is appended anew and the id points
    at the newest.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._ends = array("q")  # where each stored summary ends in the buffer
        self._slot: dict[str, int] = {}  # fact id -> its newest summary's position in _ends

    def __setitem__(self, fact_id: str, packed: bytes) -> None:
        self._buffer += packed
        self._ends.append(len(self._buffer))
        self._slot[fact_id] = len(self._ends) - 1

    def __getitem__(self, fact_id: str) -> bytes:
        return self.packed_at(self._slot[fact_id])

    def packed_at(self, slot: int) -> bytes:
        return bytes(self._buffer[self._ends[slot - 1] if slot else 0 : self._ends[slot]])

    def slot(self, fact_id: str) -> int:
        return self._slot[fact_id]

    def __contains__(self, fact_id: object) -> bool:
        return fact_id in self._slot

    def __len__(self) -> int:
        return len(self._slot)

    def __bool__(self) -> bool:
        return bool(self._slot)


class Summaries(Sequence):
    """Facts' summaries kept packed, each unpacked only while it is read.

    A summary is a few hundred bytes packed and about 2.5 KB as a dict; a run's
    metrics read every summary a few times, one at a time, so holding them all
    unpacked at the end of a run cost memory in proportion to its facts. Built from
    a list of packed summaries, or from a ``PackedSummaries`` and the slots to read.
    """

    def __init__(self, packed: Sequence[bytes] | PackedSummaries, slots: Sequence[int] | None = None) -> None:
        if isinstance(packed, PackedSummaries):
            self._store: PackedSummaries | None = packed
            self._items: Sequence = array("q", slots or [])
        else:
            self._store, self._items = None, list(packed)

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, index):
        if isinstance(index, slice):
            if self._store is not None:
                return Summaries(self._store, self._items[index])
            return Summaries(self._items[index])
        item = self._items[index]
        return _unpack(self._store.packed_at(item) if self._store is not None else item)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    def __repr__(self) -> str:
        return f"Summaries({len(self)} facts)"


def encoded(record: Mapping[str, Any]) -> tuple[str, bytes, dict]:
    """A record as :meth:`RecordWriter.append` takes it: its fact id, its line, its summary."""
    return record["id"], (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"), record_summary(record)


class RecordWriter:
    """Appends finished records to ``records.jsonl``, resuming where a previous run stopped.

    Holds the run directory's lock while open. ``fresh`` discards the records
    (and the stamp) of an earlier run instead of resuming from them.
    ``sync_seconds``: the longest a flushed record waits for its fsync.
    Keeps no record in memory, only each fact's summary (``fhs.run.summary``:
    what resuming and the metrics need), held as compact JSON bytes (a few
    hundred bytes, in one buffer: ``PackedSummaries``; as dicts they were kilobytes,
    scattered over the heap by the threads that made them); a later record of the same fact (a failed
    fact retried) replaces the earlier one. Safe to write from several threads.
    """

    def __init__(
        self,
        path: str | Path,
        config: Mapping[str, Any] | None = None,
        *,
        fresh: bool = False,
        sync_seconds: float = 1.0,
    ) -> None:
        self.path = Path(path)
        self.sync_seconds = sync_seconds
        self._synced = time.monotonic()
        self._write_lock = threading.Lock()
        if self.path.parent.exists() and not self.path.parent.is_dir():
            raise InputError("is a file, not a run directory", path=self.path.parent, fix="pass a directory to --out")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = RunLock(self.path.parent).acquire()
        try:
            if fresh:
                for name in (self.path.name, "metrics.json", STAMP_NAME):
                    (self.path.parent / name).unlink(missing_ok=True)
            self._summaries = PackedSummaries()  # fact id -> _pack(summary)
            torn = None
            if self.path.exists():
                for item in _scan(self.path):
                    if isinstance(item, _Torn):
                        torn = item
                    else:
                        self._summaries[item[1]["id"]] = _pack({**record_summary(item[1]), "offset": item[0]})
            self._check_config(config, bool(self._summaries))
            if torn is not None:
                warn(
                    f"{self.path}: dropped a torn last line (a run was stopped while writing it); "
                    f"{len(self._summaries)} finished records are kept"
                )
            self._repair(torn)
            self._handle = self.path.open("ab")
            self._end = self.path.stat().st_size
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
            raise InputError(
                f"holds records but no {STAMP_NAME}, so nothing says what they were made from",
                path=self.path.parent,
                fix=fix,
            )
        if has_records:
            try:
                previous = json.loads(stamp.read_text(encoding="utf-8"))
            except (ValueError, UnicodeDecodeError):
                raise InputError("not valid JSON", path=stamp, fix=fix) from None
            # Where the files were read from may move with the folder; their contents are in "inputs".
            changed = differences(
                {k: v for k, v in previous.items() if k != "sources"},
                {k: v for k, v in json.loads(json.dumps(config)).items() if k != "sources"},
            )
            if changed:
                inputs = [name for name in changed if name.startswith("inputs.")]
                what = "inputs" if inputs else "settings"
                raise InputError(
                    f"this run directory holds records made with other {what} "
                    f"({', '.join(changed[:6])}{', ...' if len(changed) > 6 else ''} changed)",
                    path=self.path.parent,
                    fix=fix,
                )
        write_json_atomic(stamp, dict(config))

    def _repair(self, torn: _Torn | None) -> None:
        """Cut a torn trailing fragment off (or end a complete last line) so appends start on a fresh line."""
        if not self.path.exists():
            return
        with self.path.open("r+b") as handle:
            if torn is not None:
                handle.truncate(torn.offset)
            end = handle.seek(0, os.SEEK_END)
            unfinished = False
            if end:
                handle.seek(end - 1)
                unfinished = handle.read(1) != b"\n"
            if unfinished:
                handle.write(b"\n")
            elif torn is None:
                return
            handle.flush()
            os.fsync(handle.fileno())

    def __contains__(self, fact_id: str) -> bool:
        return fact_id in self._summaries

    def failed(self, fact_id: str) -> bool:
        """Whether the fact's record says it failed (a rerun retries it)."""
        return bool(_unpack(self._summaries[fact_id]).get("failed"))

    def unusable(self, fact_id: str) -> bool:
        """Whether the fact's record holds an answer no stage could use (not parsed, or cut at max_tokens)."""
        health = _unpack(self._summaries[fact_id]).get("health") or {}
        return any(len(counts) > 1 and counts[1] for counts in health.values())

    def write(self, record: Mapping[str, Any]) -> dict:
        """Append one record (a line, flushed at once); returns its summary (with the record's offset)."""
        return self.append(*encoded(record))

    def append(self, fact_id: str, line: bytes, summary: dict) -> dict:
        """Append a record :func:`encoded` already (in another process, say); returns its summary."""
        with self._write_lock:
            summary["offset"] = self._end
            self._handle.write(line)
            self._handle.flush()
            self._end += len(line)
            if time.monotonic() - self._synced >= self.sync_seconds:
                self._sync()
            self._summaries[fact_id] = _pack(summary)
        return summary

    def _sync(self) -> None:
        os.fsync(self._handle.fileno())
        self._synced = time.monotonic()

    def close(self) -> None:
        try:
            try:
                with self._write_lock:
                    self._handle.flush()
                    self._sync()
            finally:
                self._handle.close()
        finally:
            self._lock.release()

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def summaries(self, fact_ids: Iterable[str]) -> Summaries:
        """The summaries of those of ``fact_ids`` that have a record, in that order (unpacked as read)."""
        return Summaries(self._summaries, [self._summaries.slot(fid) for fid in fact_ids if fid in self._summaries])
