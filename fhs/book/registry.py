"""The book's chapters as data, in one place: what the TOC, ``fhs plan``, the adapter's book and the runners read.

A chapter is a notebook (``notebooks/<stem>.py``), its tables module (``fhs/book/chapters/``), its
regression file (``fhs/book/regressions/<stem>.yaml``) and one :class:`ChapterEntry` here. The entry's
``defaults`` are the literals of the notebook's ``parameters`` cell (papermill needs them in the
notebook; a test holds the two equal), so ``fhs plan`` knows a chapter's runs without the checkout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fhs.book import planned
from fhs.book.planned import PCS, RunsOf
from fhs.core.errors import choose

REGRESSIONS = Path(__file__).resolve().parent / "regressions"  # package data: each chapter's recorded values

# The first two names of every parameters cell (fhs/book/page.py reads them).
_PAGE = {"profile": "cpu", "runs_dir": "runs"}


@dataclass(frozen=True)
class ChapterEntry:
    """One chapter of the book: what it is called, what it runs and what it needs."""

    stem: str  # e.g. "01_readiness_gap": notebooks/<stem>.py, book/<stem>.ipynb, regressions/<stem>.yaml
    title: str  # the notebook's first heading
    defaults: Mapping[str, Any]  # the notebook's parameters cell, literal for literal
    runs: RunsOf | None = None  # the runs fhs plan sizes (fhs/book/planned.py); None: a plan leaves it out
    extra: str | None = None  # the optional install it needs (fhs.core.extras), left out of a plan without it
    # what an adapter's book needs for it (fhs.book.adapter_book): of a spec (domain, dev) or of the build (model,
    # dense); None: never in an adapter's book
    needs: tuple[str, ...] | None = None
    adapter_default: bool = False  # an adapter's book considers it unless CHAPTERS names others
    fixed_datasets: tuple[str, ...] = ()  # datasets it runs on that no parameter names (chapter 8's own)
    # per-profile overrides of its parameters, on top of the profile's (fhs/book/profiles.yaml)
    profile_parameters: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))
        object.__setattr__(self, "profile_parameters", MappingProxyType(dict(self.profile_parameters)))

    @property
    def datasets(self) -> tuple[str, ...]:
        """The datasets its defaults run on."""
        named = [self.defaults.get(key) for key in ("dataset", "dev_dataset")]
        return (*self.defaults.get("datasets", ()), *(name for name in named if name), *self.fixed_datasets)

    @property
    def regression(self) -> Path:
        """Its regression file (package data)."""
        return REGRESSIONS / f"{self.stem}.yaml"


@dataclass(frozen=True)
class Registry:
    """The chapters in book order; a configuration object, so a test can add a chapter without touching the book."""

    chapters: tuple[ChapterEntry, ...] = field(default_factory=tuple)

    @property
    def stems(self) -> tuple[str, ...]:
        return tuple(chapter.stem for chapter in self.chapters)

    def get(self, stem: str, what: str = "chapter") -> ChapterEntry:
        """The chapter named ``stem``; an unknown one is an error naming the valid ones."""
        return choose({chapter.stem: chapter for chapter in self.chapters}, stem, what)

    def planned(self) -> tuple[ChapterEntry, ...]:
        """The chapters whose runs ``fhs plan`` sizes, in book order."""
        return tuple(chapter for chapter in self.chapters if chapter.runs is not None)

    def adaptable(self) -> tuple[ChapterEntry, ...]:
        """The chapters an adapter's book can hold, in book order."""
        return tuple(chapter for chapter in self.chapters if chapter.needs is not None)

    def with_chapter(self, chapter: ChapterEntry) -> Registry:
        """This registry with ``chapter`` added (or replacing its namesake), in stem order."""
        kept = [c for c in self.chapters if c.stem != chapter.stem]
        return replace(self, chapters=tuple(sorted((*kept, chapter), key=lambda c: c.stem)))


_SERVER: dict[str, Any] = {"server": {}}
_GPU = ("paper", "gpu-sample", "paper-full")


def _on_gpu(datasets: list[str]) -> dict[str, dict[str, Any]]:
    """On a GPU box the financial chapters read both financial test sets (FinCL and the iXBRL sample: the
    paper's ~2,509 facts together); every GPU profile gets the same datasets."""
    return {profile: {"datasets": datasets} for profile in _GPU}


_SAMPLE: dict[str, Any] = {"sample": {}}

REGISTRY = Registry(
    (
        ChapterEntry(
            "01_readiness_gap",
            "The retrieval-readiness gap",
            {**_PAGE, "datasets": ["fincl", "ixbrl", "codiesp"], "retrieval_limit": None, **_SAMPLE},
            runs=planned.readiness_gap,
            needs=(),
            adapter_default=True,
        ),
        ChapterEntry(
            "02_main_results",
            "Main results: FHS against every baseline",
            {
                **_PAGE,
                "datasets": ["fincl", "codiesp"],
                "methods": None,
                **_SERVER,
                **_SAMPLE,
                "relocation_documents": 6,
                "codiesp_config": "paper",
            },
            runs=planned.main_results,
            needs=("domain", "model"),
            adapter_default=True,
            # the LLM relocator asks once per mention: one document on two cores
            profile_parameters={"cpu": {"relocation_documents": 1}, **_on_gpu(["fincl", "ixbrl", "codiesp"])},
        ),
        ChapterEntry(
            "03_ablations",
            "Ablations: where FHS's gain comes from",
            {**_PAGE, "dataset": "fincl", "dev_dataset": "ixbrl-dev", "pilot_selector": False, **_SERVER, **_SAMPLE},
            runs=planned.ablations,
            needs=("domain", "dev", "model"),
            adapter_default=True,
            # Table 11's pilot reads recall before the selector; paper-full runs it with the selector, on every
            # development fact, so its cost can be planned
            profile_parameters={"paper-full": {"pilot_selector": True}},
        ),
        ChapterEntry(
            "04_verifier_diagnostics",
            "Verifier diagnostics: what the verdicts can and cannot judge",
            {**_PAGE, "datasets": ["fincl", "codiesp"], **_SERVER, **_SAMPLE},
            runs=planned.verifier_diagnostics,
            needs=("domain", "model"),
            adapter_default=True,
            profile_parameters=_on_gpu(["fincl", "ixbrl", "codiesp"]),
        ),
        ChapterEntry(
            "05_retriever_swap",
            "Retriever swap: does FHS keep its margin under dense and hybrid retrieval?",
            {
                **_PAGE,
                "datasets": ["fincl", "codiesp"],
                "retrievers": ["bm25", "dense", "hybrid"],
                "readiness_limit": None,
                **_SERVER,
                **_SAMPLE,
                "codiesp_config": "paper",
            },
            runs=planned.retriever_swap,
            extra="dense",
            needs=("domain", "model", "dense"),
            adapter_default=True,
            profile_parameters=_on_gpu(["fincl", "ixbrl", "codiesp"]),
        ),
        ChapterEntry(
            "06_fhs_seq",
            "FHS-Seq diagnostics",
            {**_PAGE, "datasets": ["fincl"], **_SERVER, **_SAMPLE},
            runs=planned.fhs_seq,
            needs=("domain", "model"),
            adapter_default=True,
            # FHS-Seq makes up to 19 calls a fact; the cpu profile runs it on chapter 02's sample, whose first round
            # (FHS) is replayed from the cache
            profile_parameters=_on_gpu(["fincl", "ixbrl"]),
        ),
        ChapterEntry(
            "07_case_studies",
            "Case studies: single facts, stage by stage",
            {**_PAGE, "datasets": ["fincl", "codiesp"], **_SERVER, **_SAMPLE, "baseline": "structured"},
            runs=planned.case_studies,
        ),
        ChapterEntry(
            "08_procedures_pcs",
            "Adapting to a new taxonomy: procedures (CodiEsp-P, ICD-10-PCS)",
            {
                **_PAGE,
                "facts_file": None,
                "taxonomy_file": None,
                "domain_file": "fhs/book/pcs/icd-10-pcs.yaml",
                "lexicon_file": "fhs/book/pcs/procedure_lexicon.txt",
                **_SERVER,
                **_SAMPLE,
            },
            runs=planned.procedures,
            extra="pcs",
            fixed_datasets=(PCS,),
            # one document: FHS makes five calls per fact, slow even for SmolLM2 on a shared CPU
            profile_parameters={"smoke": {"sample": {"llm_limit": 1}}},
        ),
        ChapterEntry(
            "09_stage_ceilings",
            "What FHS can do with a perfect model",
            {
                **_PAGE,
                "datasets": ["fincl", "ixbrl", "codiesp"],
                "hypothesis_noise": [0.25, 0.5, 0.75, 0.9, 1.0],
                "verdict_noise": [0.1, 0.25, 0.5, 1.0],
                **_SAMPLE,
            },
            needs=("domain",),
            adapter_default=True,
        ),
    )
)
