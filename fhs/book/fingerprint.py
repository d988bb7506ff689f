"""Fingerprints of a chapter's inputs, so a regression check can say *why* a number moved.

A chapter's expected values hold only for the inputs they were recorded with: the
facts it used (ids and content), the taxonomy, and the model file. Each is reduced to
a short SHA-256 here; ``fhs.book.check`` records them next to the expected values and,
when a later run's fingerprints differ, names the changed inputs instead of reporting
a bare FAIL. Input names follow the metric names: ``<dataset>/facts``,
``<dataset>/taxonomy``, and ``model`` for the model every LLM number shares.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy

DIGEST_CHARS = 16  # 64 bits: enough to tell two inputs apart, short enough to read in a YAML file


def _digest(chunks: Iterable[bytes]) -> str:
    hasher = hashlib.sha256()
    for chunk in chunks:
        hasher.update(chunk)
    return hasher.hexdigest()[:DIGEST_CHARS]


def _line(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8") + b"\n"


def facts_fingerprint(facts: Sequence[Fact]) -> str:
    """Every field of every fact, sorted by id: a changed sample, value or gold label changes it."""
    return _digest(_line(fact.to_dict()) for fact in sorted(facts, key=lambda f: f.id))


_TAXONOMIES: dict[int, tuple[Taxonomy, str]] = {}  # a Taxonomy is immutable: hash it once per object


def taxonomy_fingerprint(taxonomy: Taxonomy) -> str:
    """Every concept's id, label, definition, datatype and metadata, in the taxonomy's order."""
    if id(taxonomy) not in _TAXONOMIES:  # holding the object keeps its id() unique
        digest = _digest(_line([c.id, c.label, c.definition, c.datatype, dict(c.metadata)]) for c in taxonomy)
        _TAXONOMIES[id(taxonomy)] = (taxonomy, digest)
    return _TAXONOMIES[id(taxonomy)][1]


def file_fingerprint(path: str | Path) -> str:
    """The file's bytes (a model file is hashed once per process, size and mtime permitting)."""
    path = Path(path)
    info = path.stat()
    return _cached_file(str(path.resolve()), info.st_size, info.st_mtime_ns)


@lru_cache(maxsize=8)
def _cached_file(path: str, size: int, mtime_ns: int) -> str:
    def chunks():
        with open(path, "rb") as handle:
            while block := handle.read(1 << 22):
                yield block

    return _digest(chunks())


def model_fingerprint(backend: str, model: str, path: str | Path | None = None) -> str:
    """A local model's file bytes; a served model has no file here, so its name stands in."""
    if path is not None:
        return file_fingerprint(path)
    return "name:" + _digest([_line([backend, model])])


@dataclass(frozen=True)
class InputChange:
    """One input whose fingerprint differs from (or is missing beside) the recorded one."""

    name: str
    recorded: str | None
    actual: str | None

    def __str__(self) -> str:
        if self.actual is None:
            return f"{self.name} (recorded {self.recorded}, not given by this run)"
        return f"{self.name} (recorded {self.recorded}, now {self.actual})"

    def explains(self, metric: str) -> bool:
        """Whether this input feeds ``metric``: the same dataset, or an input every metric shares."""
        scope = self.name.split("/", 1)[0] if "/" in self.name else None
        return scope is None or metric.split("/", 1)[0] == scope


def changed_inputs(recorded: Mapping[str, str], actual: Mapping[str, str]) -> list[InputChange]:
    """Recorded inputs whose fingerprint differs now; inputs not recorded are not compared."""
    return [InputChange(name, want, actual.get(name)) for name, want in recorded.items() if actual.get(name) != want]
