"""A user's dataset as a small YAML file, read into the same ``DatasetSpec`` the built-ins are.

::

    name: my-filing                  # the runs' folder and the results' prefix (default: the file's stem)
    facts: my-facts.jsonl            # located facts, one JSON object per line (fhs/data/facts.py)
    taxonomy: us-gaap-2024           # a built-in taxonomy by name, or a concept file (id, label[, ...])
    domain: my-domain.yaml           # optional: a bundled domain name or a domain file; a built-in
                                     #   taxonomy brings its own, a concept file has none (LLM methods need one)
    description: ten facts of one 10-K
    retrieval: {pool_multiplier: 10} # optional: RetrievalConfig fields that differ from the taxonomy's
    oracle: label-definition         # optional: the gold query's text, label-definition or id-label-definition
    dev: my-dev.yaml                 # optional: the development split, a dataset name or another spec file

Relative paths are relative to the YAML file. Every mistake is an ``InputError``
naming the file and the field.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError, shown
from fhs.core.free_text import DESCRIPTION_LIMIT, NAME_LIMIT, line_problem
from fhs.core.outputs import same_file
from fhs.core.yamlfile import read_yaml_file
from fhs.data.datasets import DATASETS, ORACLE_QUERIES, DatasetSpec, is_spec_file, taxonomy_dataset

FIELDS = ("name", "facts", "taxonomy", "domain", "description", "retrieval", "oracle", "dev")
REQUIRED = ("facts", "taxonomy")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # whole: fullmatch, as $ lets a final newline by


def read_spec_file(path: str | Path) -> DatasetSpec:
    """The dataset a spec file describes (read once per process and file version)."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise InputError(
            "no such dataset spec file",
            path=path,
            field="dataset",
            fix=f"pass a spec YAML file or one of {', '.join(DATASETS)}",
        )
    stat = path.stat()
    return _read(str(path.resolve()), stat.st_mtime_ns, stat.st_size)


@cache
def _read(path_text: str, _mtime: int, _size: int) -> DatasetSpec:
    path = Path(path_text)
    raw = read_yaml_file(path)
    if not isinstance(raw, dict):
        raise InputError(
            "expected a mapping of fields (name, facts, taxonomy, ...)",
            path=path,
            fix=f"fields are {', '.join(FIELDS)}",
        )
    for key in raw:
        if key not in FIELDS:
            raise InputError("unknown field", path=path, field=str(key), fix=f"fields are {', '.join(FIELDS)}")
    for key in REQUIRED:
        if not raw.get(key):
            raise InputError(
                "missing required field",
                path=path,
                field=key,
                fix="a spec names its facts file and its taxonomy (a built-in name or a concept file)",
            )
    for key in ("name", "facts", "taxonomy", "domain", "description", "oracle", "dev"):
        if key in raw and not isinstance(raw[key], str):
            raise InputError(f"expected a string, got {type(raw[key]).__name__}", path=path, field=key)
    here = path.parent
    name = raw.get("name") or path.stem
    if not _NAME.fullmatch(name) or len(name) > NAME_LIMIT:
        raise InputError(
            f"{shown(name)} is not a usable name",
            path=path,
            field="name",
            fix=f"at most {NAME_LIMIT} letters, digits, '.', '_' and '-' (it names the runs' folder)",
        )
    about = (raw.get("description") or "").strip()  # a folded YAML block (>) ends in a newline of its own
    problem = line_problem(about, DESCRIPTION_LIMIT)
    if problem:
        raise InputError(
            f"the description {problem}",
            path=path,
            field="description",
            fix="one line of plain text; the book shows it as written, never as markup",
        )
    if name in DATASETS:
        raise InputError(
            f"{name!r} is a built-in dataset",
            path=path,
            field="name",
            fix="choose another name, so the two datasets' runs and results stay apart",
        )
    facts = _existing(here, raw["facts"], path, "facts", "no such facts file")
    taxonomy_name, taxonomy_file = _taxonomy(here, raw["taxonomy"], path)
    own = taxonomy_dataset(taxonomy_name) if taxonomy_file is None else None
    domain = _domain(here, raw["domain"], path) if raw.get("domain") else (own.domain if own else "")
    return DatasetSpec(
        name=name,
        taxonomy=taxonomy_name,
        description=about or f"{name}: facts from {facts.name}",
        oracle_with_id=_oracle(raw.get("oracle"), own, path),
        domain=domain,
        retrieval=_retrieval(raw.get("retrieval"), own, path),
        dev=_dev(here, raw.get("dev"), path, facts),
        facts_file=facts,
        taxonomy_file=taxonomy_file,
        source=path,
    )


def _existing(here: Path, value: str, path: Path, field: str, problem: str) -> Path:
    target = (here / Path(value).expanduser()).resolve()
    if not target.is_file():
        raise InputError(
            f"{problem} {shown(value)} (looked for {target})",
            path=path,
            field=field,
            fix="paths are relative to the spec file",
        )
    return target


def _taxonomy(here: Path, value: str, path: Path) -> tuple[str, Path | None]:
    """A built-in taxonomy's name, or a concept file's path (its taxonomy is named after the file)."""
    from fhs.data.taxonomies import TAXONOMIES

    if value in TAXONOMIES:
        return value, None
    if Path(value).suffix.lower() not in (".jsonl", ".ndjson", ".csv", ".tsv") and not (here / value).is_file():
        raise InputError(
            f"unknown taxonomy {shown(value)}",
            path=path,
            field="taxonomy",
            fix=f"a built-in name ({', '.join(TAXONOMIES)}) or a concept file (.jsonl, .csv, .tsv)",
        )
    concepts = _existing(here, value, path, "taxonomy", "no such concept file")
    return concepts.stem, concepts


def _domain(here: Path, value: str, path: Path) -> str:
    from fhs.data.domain import available_domains

    if value in available_domains():
        return value
    if Path(value).suffix.lower() not in (".yaml", ".yml"):
        raise InputError(
            f"unknown domain {shown(value)}",
            path=path,
            field="domain",
            fix=f"one of {', '.join(available_domains())}, or a domain YAML file",
        )
    return str(_existing(here, value, path, "domain", "no such domain file"))


def _oracle(value: str | None, own: DatasetSpec | None, path: Path) -> bool:
    if value is None:
        return own.oracle_with_id if own else False
    if value not in ORACLE_QUERIES:
        raise InputError(
            f"unknown oracle query form {shown(value)}",
            path=path,
            field="oracle",
            fix=f"one of {', '.join(ORACLE_QUERIES)}",
        )
    return ORACLE_QUERIES[value]


def _retrieval(value: Any, own: DatasetSpec | None, path: Path) -> tuple[tuple[str, Any], ...]:
    """The taxonomy's settings with the spec's on top; field names are checked where the config is built."""
    if value is None:
        return own.retrieval if own else ()
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise InputError(
            "expected a mapping of retrieval settings",
            path=path,
            field="retrieval",
            fix="e.g. retrieval: {pool_multiplier: 10, w_cov: 1.0}",
        )
    return tuple(sorted({**dict(own.retrieval if own else ()), **value}.items()))


def _dev(here: Path, value: str | None, path: Path, facts: Path) -> str | None:
    """The development split; one that is this spec, or reads this spec's facts, would tune on the test facts."""
    if value is None or value in DATASETS:
        return value
    if not is_spec_file(value):
        raise InputError(
            f"unknown development split {shown(value)}",
            path=path,
            field="dev",
            fix=f"a built-in dataset ({', '.join(DATASETS)}) or another spec file (.yaml)",
        )
    dev = _existing(here, value, path, "dev", "no such spec file")
    named = _facts_named_by(dev)
    if dev == path or (named is not None and same_file(named, facts)):
        raise InputError(
            f"the development split {shown(value)} reads this spec's own facts ({facts.name}): "
            "settings tuned on it would be tuned on the test facts",
            path=path,
            field="dev",
            fix="point dev: at a spec of other facts, or leave it out",
        )
    return str(dev)


def _facts_named_by(spec: Path) -> Path | None:
    """The facts file another spec names, read without reading that spec whole (its own ``dev:`` may name
    this one); a spec that does not name one is left for its own reading to report."""
    raw = read_yaml_file(spec)
    value = raw.get("facts") if isinstance(raw, dict) else None
    return (spec.parent / Path(value).expanduser()).resolve() if isinstance(value, str) and value else None
