"""A dataset resolved once: its spec, taxonomy and facts, read in one call, so a caller above this layer hands
the spec down once and gets plain data back (``fhs.run.inputs.load_experiment``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError, warn
from fhs.data.datadir import data_dir
from fhs.data.datasets import DatasetSpec, load_facts, taxonomy_dataset
from fhs.data.facts import Fact
from fhs.data.taxonomies import TAXONOMIES
from fhs.data.taxonomy import Taxonomy


@dataclass(frozen=True)
class LoadedDataset:
    spec: DatasetSpec
    taxonomy: Taxonomy
    facts: list[Fact]


def load_dataset(spec: DatasetSpec, data: str | Path | None = None, *, progress: bool = True) -> LoadedDataset:
    """``spec``'s taxonomy and facts, read from ``data`` (a user's facts file needs no data directory)."""
    from fhs.data.taxonomies import load_taxonomy, load_taxonomy_file

    # a built-in taxonomy that reads a data directory resolves it itself
    root: Any = data_dir(data) if spec.facts_file is None else data  # a facts file's loader reads no folder
    if spec.taxonomy_file is not None:
        taxonomy = load_taxonomy_file(spec.taxonomy_file)
    else:
        taxonomy = load_taxonomy(spec.taxonomy, root)
    facts = load_facts(spec, root, taxonomy, progress=progress)
    if spec.expected_facts and len(facts) < spec.expected_facts:
        warn(
            f"dataset {spec.name} has {len(facts)} facts, the release has {spec.expected_facts}: "
            f"its file under {root} may be truncated or edited"
        )
    if not facts:
        raise InputError(
            f"dataset {spec.name} has no facts",
            path=spec.facts_file or root,
            field="dataset",
            fix="check its files (see book/data.md)",
        )
    return LoadedDataset(spec, taxonomy, facts)


def files_dataset(facts_path: str | Path, taxonomy_path: str | Path, domain: str | None = None) -> DatasetSpec:
    """The spec of an adapter's own facts (JSONL) against a concept file or a built-in taxonomy by name.

    A built-in taxonomy (the ``TAXONOMIES`` registry) brings the retrieval settings and
    domain of the first dataset over it; a concept file gets the defaults and no domain.
    """
    name = str(taxonomy_path)
    builtin = name in TAXONOMIES
    own = taxonomy_dataset(name) if builtin else None
    return DatasetSpec(
        Path(facts_path).stem,
        taxonomy=name if builtin else Path(taxonomy_path).stem,
        description=f"facts from {facts_path}",
        domain=domain or (own.domain if own is not None else "us-gaap" if builtin else ""),
        retrieval=own.retrieval if own is not None else (),
        facts_file=Path(facts_path),
        taxonomy_file=None if builtin else Path(taxonomy_path),
    )
