"""Concepts and taxonomies: what a fact is retrieved against.

A ``Concept`` keeps what retrieval and the verifier read (id, label,
definition, datatype) and the structural metadata later chapters need
(period type, balance, chapter/block/category). The loaders for each source
live in ``fhs.data.taxonomies``; every loader returns a ``Taxonomy``.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType


@dataclass(frozen=True)
class Concept:
    """One taxonomy entry.

    ``id`` is the identifier a gold label uses (a US-GAAP element name without
    the ``us-gaap:`` prefix, or a dotted ICD-10-CM code). ``label`` is the
    canonical label, ``definition`` the documentation text (may be empty).
    """

    id: str
    label: str
    definition: str = ""
    datatype: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)

    @property
    def index_text(self) -> str:
        """The text BM25 indexes: ``<id>. <label>. <definition>``."""
        parts = [self.id, self.label]
        if self.definition:
            parts.append(self.definition)
        return ". ".join(parts)

    @property
    def label_text(self) -> str:
        """The label that Eq. 6 measures coverage against (the id if there is no label)."""
        return self.label or self.id


@dataclass(frozen=True)
class Taxonomy:
    """An ordered, immutable set of concepts with lookup by id and by datatype."""

    name: str
    concepts: tuple[Concept, ...]
    _by_id: Mapping[str, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        index: dict[str, int] = {}
        for position, concept in enumerate(self.concepts):
            if concept.id in index:
                raise ValueError(f"{self.name}: duplicate concept id {concept.id!r}")
            index[concept.id] = position
        object.__setattr__(self, "_by_id", MappingProxyType(index))

    def __len__(self) -> int:
        return len(self.concepts)

    def __iter__(self) -> Iterator[Concept]:
        return iter(self.concepts)

    def __contains__(self, concept_id: object) -> bool:
        return concept_id in self._by_id

    def __getitem__(self, concept_id: str) -> Concept:
        return self.concepts[self._by_id[concept_id]]

    def get(self, concept_id: str) -> Concept | None:
        position = self._by_id.get(concept_id)
        return None if position is None else self.concepts[position]

    def position(self, concept_id: str) -> int:
        """Index of a concept in ``concepts`` (the document number in the BM25 index)."""
        return self._by_id[concept_id]

    @cached_property
    def _sorted_ids(self) -> tuple[str, ...]:
        return tuple(sorted(self._by_id))

    def under(self, prefix: str) -> tuple[Concept, ...]:
        """Every concept whose id starts with ``prefix``, in id order.

        A hierarchical code system spells a node of its tree as a prefix of the
        codes below it (an ICD-10-PCS ``0DT`` stands for every "Resection" of the
        gastrointestinal system); this is that node's set of codes. An empty
        prefix is every concept; an unknown prefix is none.
        """
        ids = self._sorted_ids
        start = bisect.bisect_left(ids, prefix)
        found = []
        for concept_id in ids[start:]:
            if not concept_id.startswith(prefix):
                break
            found.append(self[concept_id])
        return tuple(found)

    def datatypes(self) -> list[str]:
        """Distinct datatypes in first-seen order."""
        return list(dict.fromkeys(concept.datatype for concept in self.concepts))

    @classmethod
    def from_concepts(cls, name: str, concepts: Iterable[Concept]) -> Taxonomy:
        return cls(name=name, concepts=tuple(concepts))
