"""Per-fact result records on disk: appended as they finish, resumed after a crash.

A run directory holds ``records.jsonl`` (one JSON object per finished fact,
flushed and fsynced as it is written) and ``metrics.json`` (written atomically
at the end). A killed run leaves every finished fact's record intact; at most
the line being written is cut off, and the next run drops that fragment and
continues with the facts it has not seen.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.core.files import atomic_write, write_text_atomic


def write_json_atomic(path: str | Path, payload: Any) -> None:
    """Write JSON via a temporary file and a rename, so readers never see half a file."""
    with atomic_write(path, fsync=True) as handle:
        json.dump(payload, handle, indent=2, ensure_ascii=False, sort_keys=False)
        handle.write("\n")


def read_records(path: str | Path) -> list[dict]:
    """All complete records of a ``records.jsonl`` (a cut-off last line is ignored)."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    with path.open(encoding="utf-8") as handle:
        lines = handle.read().split("\n")
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            if number == len(lines) or (number == len(lines) - 1 and not lines[-1]):
                break  # the fragment a killed run left behind
            raise InputError("not valid JSON", path=path, line=number,
                             fix="the records file is corrupt; delete it to recompute") from None
    return records


class RecordWriter:
    """Appends finished records to ``records.jsonl``, resuming where a previous run stopped."""

    def __init__(self, path: str | Path, config: Mapping[str, Any] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._check_config(config)
        existing = read_records(self.path)
        self._rewrite_clean(existing)
        self.done: dict[str, dict] = {record["id"]: record for record in existing}
        self._handle = self.path.open("a", encoding="utf-8")

    def _check_config(self, config: Mapping[str, Any] | None) -> None:
        """Refuse to mix records of different settings in one directory."""
        if config is None:
            return
        stamp = self.path.with_name("run-config.json")
        if stamp.exists() and self.path.exists():
            previous = json.loads(stamp.read_text(encoding="utf-8"))
            if previous != json.loads(json.dumps(config)):
                raise InputError(
                    "this run directory holds records made with other settings",
                    path=self.path.parent,
                    fix="use a new --out directory, or delete the old one to recompute",
                )
        write_json_atomic(stamp, dict(config))

    def _rewrite_clean(self, records: list[dict]) -> None:
        """Drop a cut-off trailing fragment so appends start on a fresh line."""
        if not self.path.exists():
            return
        text = self.path.read_text(encoding="utf-8")
        if text and not text.endswith("\n"):
            write_text_atomic(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))

    def __contains__(self, fact_id: str) -> bool:
        return fact_id in self.done

    def write(self, record: Mapping[str, Any]) -> None:
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())
        self.done[record["id"]] = dict(record)

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def records_in_order(self, fact_ids: Iterable[str]) -> list[dict]:
        return [self.done[fid] for fid in fact_ids if fid in self.done]
