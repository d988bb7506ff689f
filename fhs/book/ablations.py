"""Chapter 03's ablation rows, each run through the study (``fhs.book.study``) and returned as records or rows.

One function per table row the chapter adds; each says which table it
produces. They run the normal run path (``Study.run_llm``), so the response
cache and the verdict ledger replay whatever an earlier row already asked.
Development-data rows (Tables 11 and 12) share one FHS run on the
development split with the selector off: both read the list before it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fhs.book.study import Run, Study
from fhs.method.config import FHSConfig
from fhs.paper import BETA_GRID
from fhs.run.ablations import WINDOW_SIZES, BetaChoice, choose_beta_on_dev, final_rows, window_sensitivity
from fhs.run.inputs import ModelChoice
from fhs.run.sampling_pilot import sampling_pilot

DEV_TAG = "dev"  # the development FHS run's folder tag, shared by Tables 11 and 12


def free_text_verifier(study: Study, dataset: str, choice: ModelChoice, base: FHSConfig) -> Run:
    """Table 6, "− factorization + verifier": ``parallel-verified`` on the test sample, selector off.

    The paper reports R@1 and MRR for this row (no Acc.), so the selector is off;
    the J samples replay the ``parallel`` row's calls from the response cache.
    """
    return study.run_llm(dataset, "parallel-verified", choice, config=base.replace(selector=False))


def development_fhs(study: Study, dev_dataset: str, choice: ModelChoice, base: FHSConfig) -> Run:
    """FHS on the development split's sample with the selector off (the factorized arm and the β sweep's input)."""
    return study.run_llm(dev_dataset, "fhs", choice, config=base.replace(selector=False), tag=DEV_TAG)


def beta_on_development(study: Study, dev_dataset: str, test_run: Run, choice: ModelChoice, base: FHSConfig,
                        grid: Sequence[float] = BETA_GRID) -> tuple[BetaChoice, list[dict[str, Any]]]:
    """Table 12: β swept on ``dev_dataset`` (``ixbrl-dev``; FinCL has no development split) and chosen by the
    authors' rule; then the test rows, re-scored from ``test_run`` (FHS's records) at that β and at 0.6."""
    chosen = choose_beta_on_dev(development_fhs(study, dev_dataset, choice, base).records, grid, base.beta)
    return chosen, final_rows(test_run.records, chosen, base.beta)


def sampling_pilot_table(study: Study, dev_dataset: str, choice: ModelChoice, base: FHSConfig,
                         depth: int | None = None) -> dict[str, Any]:
    """Table 11: FHS's factorized sampler against ``parallel-diverse`` on the development sample, selector off."""
    factorized = development_fhs(study, dev_dataset, choice, base).records
    diverse = study.run_llm(dev_dataset, "parallel-diverse", choice, config=base.replace(selector=False)).records
    return sampling_pilot(factorized, diverse, depth or base.k, base)


def window_sizes(study: Study, dataset: str, choice: ModelChoice, base: FHSConfig,
                 sizes: Sequence[int] = WINDOW_SIZES) -> list[dict[str, Any]]:
    """Appendix E.2: FHS at each K_v on the test sample, selector off, verdicts replayed from the ledger."""
    def run_variant(config: FHSConfig, tag: str) -> list[dict]:
        return study.run_llm(dataset, "fhs", choice, config=config, tag=tag).records

    return window_sensitivity(run_variant, base.replace(selector=False), sizes)
