"""A run directory's stamp: the settings AND the content of every input its records came from.

Settings alone are not enough: a facts or taxonomy file edited under the same
name would otherwise let a rerun reuse records computed from the old content
and report their metrics as new ones. So ``run-config.json`` also holds
SHA-256 digests of the facts, the taxonomy, the domain file, the prompt
templates and the model (the GGUF file, or the server's model name and base
URLs), and a rerun whose digests differ is refused with the input named.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy


def _digest(chunks: Iterable[bytes]) -> str:
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
    return digest.hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"


def facts_digest(facts: Iterable[Fact]) -> str:
    """Every loaded fact as canonical JSON (gold included): a changed fact changes the digest."""
    return _digest(_canonical(fact.to_dict()) for fact in facts)


def taxonomy_digest(taxonomy: Taxonomy) -> str:
    """The ordered concept list (id, label, definition, datatype, metadata) as canonical JSON."""
    return _digest(_canonical([c.id, c.label, c.definition, c.datatype, dict(c.metadata)]) for c in taxonomy)


def file_digest(path: str | Path) -> str:
    with Path(path).open("rb") as handle:
        return _digest(iter(lambda: handle.read(1 << 20), b""))


def files_digest(paths: Iterable[Path]) -> str:
    """Names and contents of several files (e.g. every prompt template), in name order."""
    return _digest(
        chunk
        for path in sorted(paths, key=lambda p: p.name)
        for chunk in (path.name.encode("utf-8") + b"\0", Path(path).read_bytes(), b"\0")
    )


def differences(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted names of the settings or inputs that differ between two stamps."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        names: list[str] = []
        for key in list(old) + [k for k in new if k not in old]:
            if old.get(key) != new.get(key):
                names += differences(old.get(key), new.get(key), f"{prefix}{key}.")
        return names
    return [prefix.rstrip(".")] if old != new else []
