"""An on-disk JSONL cache for taxonomies that are slow to build.

Building ICD-10-CM means parsing the package's tabular XML and walking the
code tree; reading the finished concepts back from one JSONL file is several
times faster. A cache file is named by the taxonomy and a key that changes
whenever its source (package version, input files) or the builder changes, so
a stale file is simply never read again. A file that cannot be read is treated
as missing and rebuilt: the cache is a convenience, never a source of errors.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from fhs.core.files import atomic_write, cache_dir
from fhs.data.taxonomy import Concept, Taxonomy

CACHE_FORMAT = 1

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def cache_path(name: str, key: str) -> Path:
    """Where taxonomy ``name`` built from source version ``key`` is cached."""
    stem = _UNSAFE.sub("_", f"{name}--{key}")
    return cache_dir("taxonomies", f"{stem}.jsonl")


def write_taxonomy_cache(path: Path, taxonomy: Taxonomy, key: str) -> None:
    """Write a header line, then one concept per line; atomically (temp file, then rename)."""
    header = {"format": CACHE_FORMAT, "name": taxonomy.name, "key": key, "count": len(taxonomy)}
    with atomic_write(path) as handle:
        handle.write(json.dumps(header) + "\n")
        for concept in taxonomy:
            record = {
                "id": concept.id,
                "label": concept.label,
                "definition": concept.definition,
                "datatype": concept.datatype,
                "metadata": dict(concept.metadata),
            }
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def read_taxonomy_cache(path: Path, key: str) -> Taxonomy | None:
    """The cached taxonomy, or None when the file is missing, stale or damaged."""
    try:
        with path.open(encoding="utf-8") as handle:
            header = json.loads(handle.readline())
            if header.get("format") != CACHE_FORMAT or header.get("key") != key:
                return None
            concepts = []
            for line in handle:
                record = json.loads(line)
                concepts.append(
                    Concept(
                        id=record["id"],
                        label=record["label"],
                        definition=record["definition"],
                        datatype=record["datatype"],
                        metadata=record["metadata"],
                    )
                )
        if len(concepts) != header.get("count"):
            return None  # a truncated file (e.g. a full disk during an older write)
        return Taxonomy.from_concepts(header["name"], concepts)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
