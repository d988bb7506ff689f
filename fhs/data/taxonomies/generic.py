"""A taxonomy from a plain concept file: how an adapter brings a new taxonomy.

One concept per JSONL line or CSV/TSV row. ``id`` and ``label`` are required;
``definition`` and ``datatype`` are optional; every other field is kept as
metadata (as a string, because metadata is what prompts and filters read); a
JSONL line may also nest its metadata as ``{"metadata": {...}}`` (what
``fhs taxonomy export`` writes, so a built-in inventory round-trips exactly),
and a CSV/TSV column ``metadata.NAME`` is metadata ``NAME`` even where NAME is
``datatype`` or ``label``.
A bad row stops the load with the file, the line and the field that is wrong,
so a user can fix the file instead of debugging a silently shorter taxonomy.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.core.files import utf8_error
from fhs.core.jsonl import iter_objects
from fhs.core.untrusted import csv_cell_limit
from fhs.data.taxonomies.ids import id_kind, normalizer
from fhs.data.taxonomy import Concept, Taxonomy

REQUIRED_FIELDS = ("id", "label")
OPTIONAL_FIELDS = ("definition", "datatype")
METADATA_FIELD = "metadata"
_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv", ".tsv": "tsv"}


def load_generic(path: str | Path, name: str | None = None) -> Taxonomy:
    """Read ``path`` (.jsonl/.ndjson, .csv or .tsv); the taxonomy is named ``name`` or the file stem."""
    path = Path(path)
    kind = _FORMATS.get(path.suffix.lower())
    if kind is None:
        raise InputError(
            f"unknown taxonomy file type {path.suffix!r}",
            path=path,
            fix=f"use one of {', '.join(sorted(_FORMATS))} with fields id, label[, definition, datatype, ...]",
        )
    if not path.is_file():
        raise InputError("taxonomy file not found", path=path)
    rows = _jsonl_rows(path) if kind == "jsonl" else _table_rows(path, "\t" if kind == "tsv" else ",")
    built = [(line, concept_from_record(record, path=path, line=line)) for line, record in rows]
    normalize = normalizer(id_kind(concept.id for _, concept in built))
    concepts: list[Concept] = []
    first_line: dict[str, int] = {}
    for line, concept in built:
        concept = replace(concept, id=normalize(concept.id))
        if concept.id in first_line:
            raise InputError(
                f"duplicate id {concept.id!r} (first seen on line {first_line[concept.id]})",
                path=path,
                line=line,
                field="id",
                fix="every concept id must be unique",
            )
        first_line[concept.id] = line
        concepts.append(concept)
    if not concepts:
        raise InputError("no concepts in file", path=path, fix="add one row per concept with id and label")
    return Taxonomy.from_concepts(name or path.stem, concepts)


def concept_from_record(record: Mapping[str, Any], *, path: Path, line: int) -> Concept:
    """One concept from one row; required fields checked, the rest kept as string metadata."""
    values = {}
    for field_name in REQUIRED_FIELDS:
        value = _text(record.get(field_name), path=path, line=line, field_name=field_name)
        if not value:
            raise InputError(
                "missing or empty required field",
                path=path,
                line=line,
                field=field_name,
                fix="every concept needs a non-empty id and label",
            )
        values[field_name] = value
    for field_name in OPTIONAL_FIELDS:
        values[field_name] = _text(record.get(field_name), path=path, line=line, field_name=field_name)
    metadata = {
        str(key).removeprefix(f"{METADATA_FIELD}."): _metadata_text(value)
        for key, value in record.items()
        if key not in REQUIRED_FIELDS
        and key not in OPTIONAL_FIELDS
        and not (key == METADATA_FIELD and isinstance(value, dict))
    }
    nested = record.get(METADATA_FIELD)
    if isinstance(nested, dict):  # JSONL: {"metadata": {...}} may hold any names, even "datatype"
        metadata.update({str(key): _metadata_text(value) for key, value in nested.items()})
    return Concept(metadata=metadata, **values)


def _text(value: Any, *, path: Path, line: int, field_name: str) -> str:
    """A field as stripped text; numbers are accepted (ids like 42), structures are not."""
    if value is None:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InputError(
            f"expected text, got {type(value).__name__}",
            path=path,
            line=line,
            field=field_name,
        )
    return str(value).strip()


def _metadata_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    return iter_objects(path)


# Long definitions are legitimate; the csv module's default cap (128 KiB per field) is not a rule of
# the format. Beyond this cap a field is almost surely a quote that was never closed.
FIELD_LIMIT = 16 * 1024 * 1024


def _table_rows(path: Path, delimiter: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    try:
        with csv_cell_limit(FIELD_LIMIT), path.open(encoding="utf-8-sig", newline="") as handle:
            yield from _checked_rows(path, handle, delimiter)
    except UnicodeDecodeError:
        raise utf8_error(path) from None


def _checked_rows(path: Path, handle: Any, delimiter: str) -> Iterator[tuple[int, Mapping[str, Any]]]:
    reader = csv.DictReader(handle, delimiter=delimiter, strict=True)
    started = 1
    try:
        header = reader.fieldnames or []
        missing = [name for name in REQUIRED_FIELDS if name not in header]
        if missing:
            raise InputError(
                f"header lacks column(s) {', '.join(missing)}",
                path=path,
                line=1,
                field=missing[0],
                fix="the first row must name the columns, including id and label",
            )
        duplicated = sorted({name for name in header if header.count(name) > 1})
        if duplicated:
            raise InputError(f"header repeats column(s) {', '.join(duplicated)}", path=path, line=1)
        while True:
            started = reader.line_num + 1
            row = next(reader, None)
            if row is None:
                return
            line = reader.line_num  # the row's last physical line (rows may span lines in quotes)
            if None in row:
                raise InputError(
                    f"row has {len(header) + len(row[None])} fields, header has {len(header)}",
                    path=path,
                    line=line,
                    fix="quote fields that contain the delimiter",
                )
            if not any((value or "").strip() for value in row.values()):
                continue
            yield line, {key: ("" if value is None else value) for key, value in row.items()}
    except csv.Error as error:
        problem = str(error)
        if "field larger than field limit" in problem:
            problem = f"a field is longer than {FIELD_LIMIT // (1024 * 1024)} MiB (probably an unclosed quote)"
        elif "unexpected end of data" in problem:
            problem = "a quote opened here is never closed"
        raise InputError(
            problem, path=path, line=started, fix="close the quote, or quote a field that holds the delimiter"
        ) from None


def write_generic(taxonomy: Taxonomy, path: str | Path) -> Path:
    """Write a taxonomy as a concept file that ``load_generic`` reads back concept for concept.

    JSONL nests each concept's metadata under ``metadata`` (exact round trip);
    CSV/TSV take the union of the metadata fields as columns (``metadata.NAME``
    where NAME repeats a concept field), so a concept without one reads back
    with "" there.
    """
    from fhs.core.files import atomic_write

    path = Path(path)
    kind = _FORMATS.get(path.suffix.lower())
    if kind is None:
        raise InputError(
            f"unknown taxonomy file type {path.suffix!r}",
            path=path,
            fix=f"name the output with one of {', '.join(sorted(_FORMATS))}",
        )
    own = {c.id: {"id": c.id, "label": c.label, "definition": c.definition, "datatype": c.datatype} for c in taxonomy}
    if kind == "jsonl":  # metadata nested, so its names may repeat the concept's own fields
        rows = [{**own[c.id], **({METADATA_FIELD: dict(c.metadata)} if c.metadata else {})} for c in taxonomy]
    else:  # a metadata name that repeats a concept field gets a "metadata." column prefix
        reserved = set(REQUIRED_FIELDS) | set(OPTIONAL_FIELDS) | {METADATA_FIELD}
        rows = [
            {
                **own[c.id],
                **{
                    (f"{METADATA_FIELD}.{k}" if k in reserved or k.startswith(f"{METADATA_FIELD}.") else k): str(v)
                    for k, v in c.metadata.items()
                },
            }
            for c in taxonomy
        ]
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_write(path) as handle:
        if kind == "jsonl":
            for row in rows:
                handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            columns = list(dict.fromkeys(key for row in rows for key in row))
            writer = csv.DictWriter(
                handle, fieldnames=columns, delimiter="\t" if kind == "tsv" else ",", lineterminator="\n"
            )
            writer.writeheader()
            writer.writerows(rows)
    return path
