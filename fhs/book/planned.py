"""Which runs each chapter makes under a profile, as data: what ``fhs plan`` sizes.

Each function below follows one notebook's loops and returns the :class:`fhs.plan.dry_run.PlannedRun`
list they make, in the order the chapter runs them, so that a call replayed from an earlier chapter
is counted where it is first made. ``p`` is the chapter's parameters (:mod:`fhs.book.registry`'s
defaults with the profile's values on top) with the ``sample`` and ``server`` keys also given alone.
The tables a chapter shares with its runs (chapter 2's rows, chapter 3's variants) are defined here
and imported by the chapter's tables module, so the two cannot drift.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fhs.core.errors import InputError, choose
from fhs.method.config import DEFAULT_CONFIG, FHSConfig
from fhs.method.registry import METHODS
from fhs.paper import ABLATION_BETA
from fhs.plan.dry_run import RELOCATOR, PlannedRun
from fhs.run.profiles import RunProfile
from fhs.run.tables.ablations import DEV_TAG, WINDOW_SIZES

# a chapter's runs: (its stem, the profile, its parameters) -> the runs in the order it makes them
RunsOf = Callable[[str, RunProfile, Mapping[str, Any]], list[PlannedRun]]

# Chapter 2: the paper's row order (Tables 4 and 5); a method not registered is left out.
MAIN_ROWS = (
    "direct",
    "free-text",
    "structured",
    "parallel",
    "parallel-diverse",
    "decomposed",
    "self-refine",
    "feedback-refine",
    "fhs-seq",
    "fhs",
)


def main_rows(chosen: str | Sequence[str] | None = None, registered: Mapping[str, Any] = METHODS) -> list[str]:
    """Chapter 2's rows in the paper's order: every registered row of ``MAIN_ROWS``, or those its ``methods``
    parameter names (a subset a user can afford). FHS is required: every contrast of the chapter is against it."""
    known = {m: m for m in MAIN_ROWS if m in registered}
    if chosen is None:
        return list(known)
    names = [chosen] if isinstance(chosen, str) else list(chosen)
    picked = {choose(known, str(name), "methods") for name in names}
    if "fhs" not in picked:
        raise InputError(
            "leaves out fhs, which every table of the chapter compares with", field="methods", fix="add fhs to the list"
        )
    return [m for m in known if m in picked]


# Chapter 3: Table 6's variants of FHS. key: (label, FHSConfig changes, w_cov). The selector is
# not a re-scoring knob, so every variant but "- verifier" (which Table 16 reads) runs without it.
ABLATION_VARIANTS: dict[str, tuple[str, dict[str, Any], float | None]] = {
    "no_verifier": ("− verifier (β = 0)", dict(beta=0.0), None),
    "hypothesis0": ("− ensemble: hypothesis 0 alone", dict(only_hypothesis=0, selector=False), None),
    "hypothesis1": ("− ensemble: hypothesis 1 alone", dict(only_hypothesis=1, selector=False), None),
    "mean_rrf": ("mean-RRF instead of sum", dict(fusion="mean", selector=False), None),
    "raw_scores": ("raw scores instead of range normalisation", dict(normalize=False, selector=False), None),
    "no_label_form": (
        f"− label form (β = {ABLATION_BETA['no_label_form']})",
        dict(renderings=("definition",), beta=ABLATION_BETA["no_label_form"], selector=False),
        None,
    ),
    "no_definition_form": (
        f"− definition form (β = {ABLATION_BETA['no_definition_form']})",
        dict(renderings=("label",), beta=ABLATION_BETA["no_definition_form"], selector=False),
        None,
    ),
    "no_label_coverage": ("− label coverage (w_cov = 0)", dict(selector=False), 0.0),
}

PCS = "codiesp-P"  # chapter 8's dataset: the adapter's own facts and concept file


def seeds(profile: RunProfile, runs: int | None) -> tuple[int, ...]:
    """The seeded runs of a chapter: the profile's seeds, or the first ``runs`` of them."""
    return tuple(profile.seeds) if runs is None else tuple(profile.seeds)[: max(1, int(runs))]


def _named(dataset: str, p: Mapping[str, Any]) -> str:
    return p.get("codiesp_config", DEFAULT_CONFIG) if dataset == "codiesp" else DEFAULT_CONFIG


def readiness_gap(c: str, profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 1: direct and the gold-query probe, with and without label coverage, and the located query; no
    model. The chapter runs ``direct-located`` only where the facts have headers, which a plan does not load."""
    runs = []
    for name in p["datasets"]:
        for method in ("direct", "oracle"):
            runs.append(PlannedRun(c, name, method, selector=False, facts="retrieval"))
            runs.append(PlannedRun(c, name, method, selector=False, facts="retrieval", w_cov=0.0))
        runs.append(PlannedRun(c, name, "direct-located", selector=False, facts="retrieval"))
    if "codiesp" in p["datasets"]:
        runs.append(PlannedRun(c, "codiesp", "oracle", selector=False, facts="all", tag="all"))
    return runs


def main_results(c: str, profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 2: every row of Tables 4 and 5 (or its ``methods`` subset) over the seeded runs, the oracle, the LLM
    relocator."""
    runs = []
    for name in p["datasets"]:
        for method in main_rows(p.get("methods")):
            runs += [
                PlannedRun(c, name, method, configuration=_named(name, p), seed=s)
                for s in seeds(profile, p.get("runs"))
            ]
        runs.append(PlannedRun(c, name, "oracle", selector=False))
    if "codiesp" in p["datasets"]:
        runs.append(PlannedRun(c, "codiesp", RELOCATOR, seed=p["seed"], documents=int(p["relocation_documents"])))
    return runs


def ablations(c: str, profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 3: FHS and its Table 6 variants (replaying FHS), parallel with and without the verifier, the
    development runs of Tables 11 and 12 without the selector, and Appendix E.2's window sizes."""
    name = p["dataset"]
    runs = []
    for s in seeds(profile, p.get("runs")):
        runs.append(PlannedRun(c, name, "fhs", seed=s))
        for key, (_, changes, w_cov) in ABLATION_VARIANTS.items():
            rest = {k: v for k, v in changes.items() if k != "selector"}
            runs.append(
                PlannedRun(
                    c, name, "fhs", changes=rest, selector=changes.get("selector", True), w_cov=w_cov, seed=s, tag=key
                )
            )
        runs.append(PlannedRun(c, name, "parallel", seed=s))
        runs.append(PlannedRun(c, name, "parallel-verified", seed=s, selector=False))  # Table 6's + verifier row
        pilot_selector = bool(p.get("pilot_selector"))  # Tables 11 and 12 read the lists before the selector
        runs.append(PlannedRun(c, p["dev_dataset"], "fhs", seed=s, selector=pilot_selector, tag=DEV_TAG))
        runs.append(PlannedRun(c, p["dev_dataset"], "parallel-diverse", seed=s, selector=pilot_selector))
        for k_v in sorted(WINDOW_SIZES, key=lambda k: k != FHSConfig().k_v):  # Appendix E.2, the deployed K_v first
            runs.append(PlannedRun(c, name, "fhs", changes={"k_v": k_v}, selector=False, seed=s, tag=f"kv{k_v}"))
    return runs


def verifier_diagnostics(c: str, profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 4: FHS's runs (replayed) and, on CodiEsp, the − verifier arm with the selector."""
    runs = []
    for s in seeds(profile, p.get("runs")):
        runs += [PlannedRun(c, name, "fhs", seed=s) for name in p["datasets"]]
        if "codiesp" in p["datasets"]:
            runs.append(PlannedRun(c, "codiesp", "fhs", changes={"beta": 0.0}, seed=s, tag="no_verifier"))
    return runs


def retriever_swap(c: str, profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 5: the readiness gap per retriever (no model), then direct, structured and FHS per retriever."""
    runs = [
        PlannedRun(c, name, method, retriever=r, selector=False, facts="all")
        for name in p["datasets"]
        for r in p["retrievers"]
        for method in ("direct", "oracle")
    ]
    for name in p["datasets"]:
        for r in p["retrievers"]:
            for method in ("direct", "structured", "fhs"):
                runs += [
                    PlannedRun(c, name, method, retriever=r, configuration=_named(name, p), seed=s)
                    for s in seeds(profile, p.get("runs"))
                ]
    return runs


def fhs_seq(c: str, profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 6: FHS-Seq and FHS over the seeded runs (round 1 replays FHS's calls)."""
    return [
        PlannedRun(c, name, method, seed=s)
        for name in p["datasets"]
        for s in seeds(profile, p.get("runs"))
        for method in ("fhs-seq", "fhs")
    ]


def case_studies(c: str, profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 7: every registered method once (seed 0) on chapter 2's sample."""
    return [PlannedRun(c, name, method) for name in p["datasets"] for method in METHODS]


def procedures(c: str, profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 8: direct and the oracle on every located procedure, structured and FHS on the LLM sample."""
    return [
        PlannedRun(c, PCS, "direct", selector=False, facts="all"),
        PlannedRun(c, PCS, "oracle", selector=False, facts="all"),
        PlannedRun(c, PCS, "structured"),
        PlannedRun(c, PCS, "fhs"),
    ]
