"""Chapter 03's ablation rows, each run through the study (``fhs.book.study``) and returned as records or rows.

One function per table row the chapter adds; each says which table it
produces. They run the normal run path (``Study.run_llm``), so the response
cache and the verdict ledger replay whatever an earlier row already asked.
Development-data rows (Tables 11 and 12) share one FHS run on the
development split with the selector off: both read the list before it.
The ``*_over_seeds`` functions run a row once per seeded model choice and
average it (:func:`over_seeds`), as the paper reports the mean of three runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean, stdev
from typing import Any

from fhs.book.study import Run, Study
from fhs.method.config import FHSConfig
from fhs.paper import BETA_GRID
from fhs.run.ablations import (ROW_METRICS, WINDOW_SIZES, BetaChoice, beta_sweep, choose_beta, choose_beta_on_dev,
                               final_rows, window_sensitivity)
from fhs.run.inputs import ModelChoice
from fhs.run.sampling_pilot import sampling_pilot

DEV_TAG = "dev"  # the development FHS run's folder tag, shared by Tables 11 and 12


def free_text_verifier(study: Study, dataset: str, choice: ModelChoice, base: FHSConfig) -> Run:
    """Table 6, "− factorization + verifier": ``parallel-verified`` on the test sample, selector off.

    The paper reports R@1 and MRR for this row (no Acc.), so the selector is off;
    the J samples replay the ``parallel`` row's calls from the response cache.
    """
    return study.run_llm(dataset, "parallel-verified", choice, config=base.replace(selector=False))


def development_fhs(study: Study, dev_dataset: str, choice: ModelChoice, base: FHSConfig,
                    selector: bool = False) -> Run:
    """FHS on the development split's sample with the selector off (the factorized arm and the β sweep's input).

    ``selector=True`` also runs the selector (the ``paper-full`` profile's pilot); the lists before it are the same.
    """
    return study.run_llm(dev_dataset, "fhs", choice, config=base.replace(selector=selector), tag=DEV_TAG)


def beta_on_development(study: Study, dev_dataset: str, test_run: Run, choice: ModelChoice, base: FHSConfig,
                        grid: Sequence[float] = BETA_GRID) -> tuple[BetaChoice, list[dict[str, Any]]]:
    """Table 12: β swept on ``dev_dataset`` (``ixbrl-dev``; FinCL has no development split) and chosen by the
    authors' rule; then the test rows, re-scored from ``test_run`` (FHS's records) at that β and at 0.6."""
    chosen = choose_beta_on_dev(development_fhs(study, dev_dataset, choice, base).records, grid, base.beta)
    return chosen, final_rows(test_run.records, chosen, base.beta)


def sampling_pilot_table(study: Study, dev_dataset: str, choice: ModelChoice, base: FHSConfig,
                         depth: int | None = None, selector: bool = False) -> dict[str, Any]:
    """Table 11: FHS's factorized sampler against ``parallel-diverse`` on the development sample, selector off."""
    factorized = development_fhs(study, dev_dataset, choice, base, selector).records
    diverse = study.run_llm(dev_dataset, "parallel-diverse", choice, config=base.replace(selector=selector)).records
    return sampling_pilot(factorized, diverse, depth or base.k, base)


def window_sizes(study: Study, dataset: str, choice: ModelChoice, base: FHSConfig,
                 sizes: Sequence[int] = WINDOW_SIZES) -> list[dict[str, Any]]:
    """Appendix E.2: FHS at each K_v on the test sample, selector off, verdicts replayed from the ledger."""
    def run_variant(config: FHSConfig, tag: str) -> list[dict]:
        return study.run_llm(dataset, "fhs", choice, config=config, tag=tag).records

    return window_sensitivity(run_variant, base.replace(selector=False), sizes)


# ---- the paper's mean of three runs -------------------------------------------------------

def over_seeds(rows_per_seed: Sequence[Sequence[Mapping[str, Any]]], key: str) -> list[dict[str, Any]]:
    """One seeded run's rows per item of ``rows_per_seed``, aligned by ``key``, as one list of rows.

    A field equal in every run keeps its value; a numeric field that differs is
    the mean, and each retrieval metric of several runs gets ``<metric> (std)``.
    """
    if not rows_per_seed:
        return []
    merged = []
    for first in rows_per_seed[0]:
        same = [next(r for r in rows if r[key] == first[key]) for rows in rows_per_seed]
        row: dict[str, Any] = {}
        for name, value in first.items():
            values = [r.get(name) for r in same]
            numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
            row[name] = fmean(values) if numeric and len(set(values)) > 1 else value
            if numeric and len(values) > 1 and name in ROW_METRICS + ("per_hypothesis_recall@200", "overlap"):
                row[f"{name} (std)"] = stdev(values)
        merged.append(row)
    return merged


def beta_over_seeds(study: Study, dev_dataset: str, test_runs: Sequence[Run], choices: Sequence[ModelChoice],
                    base: FHSConfig, grid: Sequence[float] = BETA_GRID,
                    selector: bool = False) -> tuple[BetaChoice, list[dict[str, Any]]]:
    """Table 12 over the seeded runs: β chosen once, by the authors' rule on the development sweep averaged
    over the runs; then the test rows (one FHS run per seed in ``test_runs``) at that β and at 0.6, averaged."""
    sweeps = [beta_sweep(development_fhs(study, dev_dataset, c, base, selector).records, grid) for c in choices]
    chosen = choose_beta(over_seeds(sweeps, "beta"), base.beta)
    return chosen, over_seeds([final_rows(run.records, chosen, base.beta) for run in test_runs], "beta")


def pilot_over_seeds(study: Study, dev_dataset: str, choices: Sequence[ModelChoice], base: FHSConfig,
                     selector: bool = False) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Table 11 over the seeded runs: one row per arm (averaged) and the differences the paper reads."""
    tables = [sampling_pilot_table(study, dev_dataset, c, base, selector=selector) for c in choices]
    arms = over_seeds([[{"arm": name, **values} for name, values in t["arms"].items()] for t in tables], "arm")
    differences = over_seeds([[{"arm": "difference", "facts": t["facts"], **t["difference"]}] for t in tables],
                             "arm")
    return arms, differences[0]


def windows_over_seeds(study: Study, dataset: str, choices: Sequence[ModelChoice], base: FHSConfig,
                       sizes: Sequence[int] = WINDOW_SIZES) -> list[dict[str, Any]]:
    """Appendix E.2 over the seeded runs: one row per K_v, averaged (new calls summed over the runs)."""
    per_seed = [window_sizes(study, dataset, c, base, sizes) for c in choices]
    rows = over_seeds(per_seed, "k_v")
    for row in rows:
        for name in ("new_verifier_calls", "new_hypothesis_calls"):
            row[name] = sum(next(r for r in seed if r["k_v"] == row["k_v"])[name] for seed in per_seed)
    return rows
