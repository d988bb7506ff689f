"""Located facts: one target (a table cell or a text mention) inside its source context.

A ``Fact`` carries only what a reader of the source sees (value, datatype,
headers or sentence, the visible context) plus its gold concept ids, which
methods must never read. Facts round-trip through JSONL so that a user can
bring their own file of located facts.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.core.files import atomic_write
from fhs.core.jsonl import iter_objects

MODALITIES = ("table", "text")
# How a gold id is compared with a taxonomy id (``metadata["gold_match"]`` of a fact):
# "exact" - the ids are equal; "prefix" - the gold id names a node of a hierarchical code
# (ICD-10-PCS ``0DT``, ICD-10-CM ``K35``) and any taxonomy id that starts with it counts.
GOLD_MATCHES = ("exact", "prefix")


def gold_match_of(fact: Fact) -> str:
    """The fact's gold-match rule (``GOLD_MATCHES``); ``exact`` unless its metadata says otherwise."""
    return str((fact.metadata or {}).get("gold_match") or "exact")


def matches_gold(concept_id: str, gold: Iterable[str], match: str = "exact") -> bool:
    """Whether ``concept_id`` is one of ``gold`` under the rule ``match`` (see ``GOLD_MATCHES``)."""
    if not isinstance(concept_id, str):  # e.g. a selector that picked nothing
        return False
    if match == "prefix":  # an empty id would be a prefix of every concept
        return any(g and concept_id.startswith(g) for g in gold)
    if match == "exact":
        return concept_id in set(gold)
    raise ValueError(f"gold_match must be one of {GOLD_MATCHES}, got {match!r}")


@dataclass(frozen=True)
class Fact:
    """One located fact.

    ``value`` is the cell value (table) or the mention's surface text (text).
    ``context`` is the visible text of the whole source context, markup removed.
    ``row_header``/``column_header`` locate a table cell; ``sentence`` is the
    sentence that holds a text mention. ``gold`` lists every acceptable concept id.
    """

    id: str
    context_id: str
    modality: str
    value: str
    datatype: str
    context: str
    gold: tuple[str, ...]
    row_header: str = ""
    column_header: str = ""
    sentence: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.modality not in MODALITIES:
            raise ValueError(f"fact {self.id}: modality must be one of {MODALITIES}, got {self.modality!r}")
        object.__setattr__(self, "gold", tuple(self.gold))

    def to_dict(self) -> dict[str, Any]:
        # Field by field: ``dataclasses.asdict`` deep-copies the metadata only for it to be replaced,
        # and took a quarter of a chapter's set-up on iXBRL's 53,523 facts (fingerprints, stamps).
        record = {name: getattr(self, name) for name in _FIELDS}
        record["gold"] = list(self.gold)
        record["metadata"] = dict(self.metadata)
        return record


_FIELDS = tuple(f.name for f in fields(Fact))
_REQUIRED = ("id", "context_id", "modality", "value", "datatype", "context", "gold")
_OPTIONAL = ("row_header", "column_header", "sentence", "metadata")
# what a field is called elsewhere, where spelling alone suggests another field ('mention' looks like 'sentence')
_MEANT = {
    "mention": "value",
    "mention_text": "value",
    "span": "value",
    "code": "gold",
    "codes": "gold",
    "concept": "gold",
    "concepts": "gold",
}


def fact_from_dict(record: Mapping[str, Any], *, path: str | Path | None = None, line: int | None = None) -> Fact:
    """Build a ``Fact`` from a JSON object, naming the file, line and field on bad input."""
    unknown = [name for name in record if name not in _REQUIRED + _OPTIONAL]
    if unknown:
        name = str(unknown[0])
        close = (
            [_MEANT[name.casefold()]]
            if name.casefold() in _MEANT
            else difflib.get_close_matches(name, _REQUIRED + _OPTIONAL, n=1, cutoff=0.5)
        )
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise InputError(
            "unknown field",
            path=path,
            line=line,
            field=name,
            fix=f"{hint}fields are {', '.join(_REQUIRED + _OPTIONAL)}; put anything else under metadata",
        )
    for name in _REQUIRED:
        if name not in record:
            raise InputError(
                "missing required field",
                path=path,
                line=line,
                field=name,
                fix=f"each fact needs {', '.join(_REQUIRED)}",
            )
    if record["modality"] not in MODALITIES:
        raise InputError(
            f"expected one of {MODALITIES}, got {record['modality']!r}", path=path, line=line, field="modality"
        )
    gold = record["gold"]
    if isinstance(gold, str):
        gold = [gold]
    if not isinstance(gold, list) or not all(isinstance(g, str) and g.strip() for g in gold):
        raise InputError(
            "expected a list of concept ids, none of them empty or blank",
            path=path,
            line=line,
            field="gold",
            fix="a blank id would match every concept under gold_match 'prefix'",
        )
    for name in ("id", "context_id", "value", "datatype", "context", "row_header", "column_header", "sentence"):
        if name in record and not isinstance(record[name], (str, int, float)):
            raise InputError(f"expected a string, got {type(record[name]).__name__}", path=path, line=line, field=name)
    if not str(record["value"]).strip() and not str(record["context"]).strip():
        raise InputError(
            "value and context are both empty, so there is nothing to locate",
            path=path,
            line=line,
            field="value",
            fix="give the cell value or mention text, and the visible context",
        )
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InputError("expected an object", path=path, line=line, field="metadata")
    if metadata.get("gold_match", "exact") not in GOLD_MATCHES:
        raise InputError(
            f"expected one of {GOLD_MATCHES}, got {metadata['gold_match']!r}",
            path=path,
            line=line,
            field="metadata.gold_match",
            fix="prefix: any taxonomy id that starts with a gold id counts; exact: ids must be equal",
        )
    return Fact(
        id=str(record["id"]),
        context_id=str(record["context_id"]),
        modality=record["modality"],
        value=str(record["value"]),
        datatype=str(record["datatype"]),
        context=str(record["context"]),
        gold=tuple(gold),
        row_header=str(record.get("row_header", "")),
        column_header=str(record.get("column_header", "")),
        sentence=str(record.get("sentence", "")),
        metadata=metadata,
    )


def read_facts(path: str | Path) -> list[Fact]:
    """Read a JSONL file of facts; the error names the line and field that is wrong."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such facts file", path=path, fix="pass a JSONL file with one fact per line")
    facts: list[Fact] = []
    seen: set[str] = set()
    for number, record in iter_objects(path):
        fact = fact_from_dict(record, path=path, line=number)
        if fact.id in seen:
            raise InputError(f"duplicate fact id {fact.id!r}", path=path, line=number, field="id")
        seen.add(fact.id)
        facts.append(fact)
    if not facts:
        raise InputError("no facts in file", path=path, fix="write one JSON fact per line (see fhs/data/facts.py)")
    return facts


def write_facts(facts: Iterable[Fact], path: str | Path) -> None:
    with atomic_write(path) as handle:
        for fact in facts:
            handle.write(json.dumps(fact.to_dict(), ensure_ascii=False) + "\n")


def iter_contexts(facts: Iterable[Fact]) -> Iterator[tuple[str, list[Fact]]]:
    """Group facts by context id, in first-seen order."""
    groups: dict[str, list[Fact]] = {}
    for fact in facts:
        groups.setdefault(fact.context_id, []).append(fact)
    yield from groups.items()
