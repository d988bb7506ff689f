"""What a dataset offers a table: a development split, a modality, a domain for LLM methods.

A chapter asks before it builds a table that needs one of these, so a user's
dataset without, say, a development split gets a sentence on the page saying
the table is left out, not a failed chapter.
"""

from __future__ import annotations

from collections.abc import Iterable

from fhs.core.errors import InputError
from fhs.data.datasets import DatasetSpec
from fhs.data.facts import MODALITIES, Fact
from fhs.run.inputs import Experiment

NEEDS = ("dev", "domain", *MODALITIES)


def modalities(source: Experiment | Iterable[Fact]) -> tuple[str, ...]:
    """The modalities (``table``, ``text``) a dataset's facts have, in ``MODALITIES`` order."""
    facts = source.facts if isinstance(source, Experiment) else source
    present = {fact.modality for fact in facts}
    return tuple(m for m in MODALITIES if m in present)


def dataset_has(source: Experiment | DatasetSpec, need: str) -> bool:
    """Whether a dataset has ``need``: ``dev`` (a development split), ``domain`` (dimensions for LLM
    methods) or a modality (facts of it). A spec alone answers ``dev`` and ``domain``."""
    if need not in NEEDS:
        raise InputError(f"unknown need {need!r}", field="need", fix=f"one of {', '.join(NEEDS)}")
    spec = source.spec if isinstance(source, Experiment) else source
    if need == "dev":
        return spec.dev is not None
    if need == "domain":
        return bool(source.domain if isinstance(source, Experiment) and source.domain else spec.domain)
    if not isinstance(source, Experiment):
        raise InputError(
            f"whether a dataset has {need} facts needs its facts",
            field="need",
            fix="pass the dataset's Experiment (Study.experiment), not its spec",
        )
    return need in modalities(source)


def lacking(source: Experiment, needs: Iterable[str]) -> list[str]:
    """The needs a dataset lacks, in the order asked (empty when it has them all)."""
    return [need for need in needs if not dataset_has(source, need)]
