"""On-disk cache of relocations: one JSONL file per (dataset split, relocator).

Records are keyed by the task's fingerprint (a hash of everything the
relocator reads), so a changed alignment or candidate text recomputes only the
mentions it touches, and a changed relocator (version, lexicon, model, prompt)
gets a file of its own through its ``name``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fhs.core.files import atomic_write, cache_dir
from fhs.data.relocate.contract import Relocation, RelocationTask, Relocator


def relocation_cache_path(dataset: str, relocator: Relocator) -> Path:
    """``<cache>/relocation/<dataset>--<relocator name>.jsonl``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{dataset}--{relocator.name}")
    return cache_dir("relocation", f"{stem}.jsonl")


def read_relocation_cache(path: Path) -> dict[str, dict[str, Any]]:
    """Cached records by task fingerprint; unreadable or invalid lines count as missing."""
    cached: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return cached
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
                Relocation(**record["relocation"])  # validates the record
                cached[record["key"]] = record
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
    return cached


def write_relocation_cache(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Write the records atomically (a temporary file renamed over the old one)."""
    with atomic_write(path) as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def relocate_cached(
    tasks: Sequence[RelocationTask], relocator: Relocator, path: Path | None, *, chunk: int = 256
) -> list[Relocation]:
    """Relocate ``tasks``, reusing and extending the cache at ``path`` (none when ``None``).

    A cached answer is reused only for a task with the same fingerprint (same
    mention, context and candidate). New results are written after every
    ``chunk`` tasks, so an interrupted LLM run resumes where it stopped.
    """
    if path is None:
        return relocator.relocate(tasks)
    records = read_relocation_cache(path)
    missing = list({task.fingerprint(): task for task in tasks if task.fingerprint() not in records}.items())
    for begin in range(0, len(missing), chunk):
        part = missing[begin : begin + chunk]
        results = relocator.relocate([task for _, task in part])
        if len(results) != len(part):
            raise RuntimeError(f"{relocator.name}: {len(results)} relocations for {len(part)} tasks")
        for (key, task), relocation in zip(part, results):
            records[key] = {
                "key": key,
                "document_id": task.document_id,
                "mention": task.mention,
                "relocation": relocation.to_dict(),
            }
        write_relocation_cache(path, records.values())
    return [Relocation(**records[task.fingerprint()]["relocation"]) for task in tasks]
