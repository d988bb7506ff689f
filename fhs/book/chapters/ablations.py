"""Chapter 03, the ablations: its rows run through the study, and its tables, figure and check.

**Rows.** One function per table row the chapter adds; each says which table it
produces. They run the normal run path (``Study.run_llm``), so the response
cache and the verdict ledger replay whatever an earlier row already asked.
Development-data rows (Tables 11 and 12) share one FHS run on the
development split with the selector off: both read the list before it.
The ``*_over_seeds`` functions run a row once per seeded model choice and
average it (:func:`over_seeds`), as the paper reports the mean of three runs.

**Tables.** Table 6 and Table 16 over the seeded runs, the new-calls tally,
Table 12's figure and the check. ``arms`` maps a row key (``fhs``, a key of
``fhs.book.planned.ABLATION_VARIANTS``, ``free_text``, ``free_text_verifier``)
to its seeded runs, in the order they ran. A value is the mean over the runs ±
the std across them; a difference from FHS is paired per fact within each run
(``fhs.book.across_runs``). Acc. is ``fhs.run.evaluate.accuracy`` where the
selector judged every fact, and empty for a row run without it (its list's rank
1 is Recall@1). The record computations the rows rely on (β chosen on
development records, the window sweep, the sampling pilot) are the run layer's
(``fhs.run.tables``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from statistics import fmean, stdev
from typing import Any

import numpy as np
import pandas as pd

from fhs.book.across_runs import across_differences, across_reported
from fhs.book.planned import ABLATION_VARIANTS
from fhs.book.report import Estimate
from fhs.book.study import Run, Study
from fhs.method.config import FHSConfig
from fhs.paper import ABLATION, BETA_GRID
from fhs.run.evaluate import SELECTOR, accuracy, accuracy_basis, metrics, paired_difference
from fhs.run.inputs import ModelChoice
from fhs.run.rescore import best_of
from fhs.run.summary import new_calls
from fhs.run.tables.ablations import (
    DEV_TAG,
    ROW_METRICS,
    WINDOW_SIZES,
    BetaChoice,
    beta_sweep,
    choose_beta,
    choose_beta_on_dev,
    final_rows,
    window_sensitivity,
)
from fhs.run.tables.sampling_pilot import sampling_pilot


def free_text_verifier(study: Study, dataset: str, choice: ModelChoice, base: FHSConfig) -> Run:
    """Table 6, "− factorization + verifier": ``parallel-verified`` on the test sample, selector off.

    The paper reports R@1 and MRR for this row (no Acc.), so the selector is off;
    the J samples replay the ``parallel`` row's calls from the response cache.
    """
    return study.run_llm(dataset, "parallel-verified", choice, config=base.replace(selector=False))


def development_fhs(
    study: Study, dev_dataset: str, choice: ModelChoice, base: FHSConfig, selector: bool = False
) -> Run:
    """FHS on the development split's sample with the selector off (the factorized arm and the β sweep's input).

    ``selector=True`` also runs the selector (the ``paper-full`` profile's pilot); the lists before it are the same.
    """
    return study.run_llm(dev_dataset, "fhs", choice, config=base.replace(selector=selector), tag=DEV_TAG)


def beta_on_development(
    study: Study,
    dev_dataset: str,
    test_run: Run,
    choice: ModelChoice,
    base: FHSConfig,
    grid: Sequence[float] = BETA_GRID,
) -> tuple[BetaChoice, list[dict[str, Any]]]:
    """Table 12: β swept on ``dev_dataset`` (``ixbrl-dev``; FinCL has no development split) and chosen by the
    authors' rule; then the test rows, re-scored from ``test_run`` (FHS's records) at that β and at 0.6."""
    chosen = choose_beta_on_dev(development_fhs(study, dev_dataset, choice, base).records, grid, base.beta)
    return chosen, final_rows(test_run.records, chosen, base.beta)


def sampling_pilot_table(
    study: Study,
    dev_dataset: str,
    choice: ModelChoice,
    base: FHSConfig,
    depth: int | None = None,
    selector: bool = False,
) -> dict[str, Any]:
    """Table 11: FHS's factorized sampler against ``parallel-diverse`` on the development sample, selector off."""
    factorized = development_fhs(study, dev_dataset, choice, base, selector).records
    diverse = study.run_llm(dev_dataset, "parallel-diverse", choice, config=base.replace(selector=selector)).records
    return sampling_pilot(factorized, diverse, depth or base.k, base)


def window_sizes(
    study: Study, dataset: str, choice: ModelChoice, base: FHSConfig, sizes: Sequence[int] = WINDOW_SIZES
) -> list[dict[str, Any]]:
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
            numbers = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
            numeric = len(numbers) == len(values)
            row[name] = fmean(numbers) if numeric and len(set(numbers)) > 1 else value
            if numeric and len(numbers) > 1 and name in ROW_METRICS + ("per_hypothesis_recall@200", "overlap"):
                row[f"{name} (std)"] = stdev(numbers)
        merged.append(row)
    return merged


def beta_over_seeds(
    study: Study,
    dev_dataset: str,
    test_runs: Sequence[Run],
    choices: Sequence[ModelChoice],
    base: FHSConfig,
    grid: Sequence[float] = BETA_GRID,
    selector: bool = False,
) -> tuple[BetaChoice, list[dict[str, Any]]]:
    """Table 12 over the seeded runs: β chosen once, by the authors' rule on the development sweep averaged
    over the runs; then the test rows (one FHS run per seed in ``test_runs``) at that β and at 0.6, averaged."""
    sweeps = [beta_sweep(development_fhs(study, dev_dataset, c, base, selector).records, grid) for c in choices]
    chosen = choose_beta(over_seeds(sweeps, "beta"), base.beta)
    return chosen, over_seeds([final_rows(run.records, chosen, base.beta) for run in test_runs], "beta")


def pilot_over_seeds(
    study: Study, dev_dataset: str, choices: Sequence[ModelChoice], base: FHSConfig, selector: bool = False
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Table 11 over the seeded runs: one row per arm (averaged) and the differences the paper reads."""
    tables = [sampling_pilot_table(study, dev_dataset, c, base, selector=selector) for c in choices]
    arms = over_seeds([[{"arm": name, **values} for name, values in t["arms"].items()] for t in tables], "arm")
    differences = over_seeds([[{"arm": "difference", "facts": t["facts"], **t["difference"]}] for t in tables], "arm")
    return arms, differences[0]


def windows_over_seeds(
    study: Study, dataset: str, choices: Sequence[ModelChoice], base: FHSConfig, sizes: Sequence[int] = WINDOW_SIZES
) -> list[dict[str, Any]]:
    """Appendix E.2 over the seeded runs: one row per K_v, averaged (new calls summed over the runs)."""
    per_seed = [window_sizes(study, dataset, c, base, sizes) for c in choices]
    rows = over_seeds(per_seed, "k_v")
    for row in rows:
        for name in ("new_verifier_calls", "new_hypothesis_calls"):
            row[name] = sum(next(r for r in seed if r["k_v"] == row["k_v"])[name] for seed in per_seed)
    return rows


# ---- tables, figure and check ------------------------------------------------------------

METRICS = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr", "accuracy")
SINGLE = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr")
LABELS = {
    "fhs": "FHS (β = 0.6, J = 2, sum-RRF, both renderings)",
    "free_text": "− factorization (free-text J = 2, no verifier)",
    "free_text_verifier": "− factorization + verifier (free-text J = 2, Eq. 3)",
    "oracle_best_single": "oracle-best single hypothesis (bound)",
    **{key: label for key, (label, _, _) in ABLATION_VARIANTS.items()},
}
Arms = Mapping[str, Sequence[Run]]


def variant_arms(study: Study, dataset: str, choices: Sequence, base: FHSConfig) -> dict[str, list[Run]]:
    """FHS (chapter 02's run) and every ablation variant, one run per seeded choice, in the manifest's order."""
    arms = {"fhs": [study.run_llm(dataset, "fhs", c) for c in choices]}
    for key, (_, changes, w_cov) in ABLATION_VARIANTS.items():
        arms[key] = [
            study.run_llm(dataset, "fhs", c, config=base.replace(**changes), tag=key, w_cov=w_cov) for c in choices
        ]
    return arms


def free_text_arms(study: Study, dataset: str, choices: Sequence, base: FHSConfig) -> dict[str, list[Run]]:
    """The free-text ensemble (``parallel``) and the same ensemble with the verifier."""
    return {
        "free_text": [study.run_llm(dataset, "parallel", c) for c in choices],
        "free_text_verifier": [free_text_verifier(study, dataset, c, base) for c in choices],
    }


def new_calls_frame(arms: Arms) -> pd.DataFrame:
    """Per row, the calls each stage made that no cache or ledger served, summed over the seeded runs."""
    return pd.DataFrame(
        [
            {
                "row": LABELS[k] if k in ABLATION_VARIANTS else "FHS",
                **new_calls(r for run in group for r in run.records),
            }
            for k, group in arms.items()
        ]
    ).fillna(0)


def selector_accuracy(records: Sequence[Mapping]) -> float | None:
    """Acc. where the selector judged every fact (``fhs.run.evaluate.accuracy``); None for a run without it."""
    return accuracy(records) if records and accuracy_basis(records) == SELECTOR else None


def mean_value(groups: Sequence[Sequence[Mapping]], metric: str) -> Estimate | None:
    """A metric over seeded runs (given as record lists): the mean, ± the std when there are several."""
    values = [
        selector_accuracy(records) if metric == "accuracy" else metrics(records).get(metric) for records in groups
    ]
    return across_reported(values)


def mean_difference(
    groups: Sequence[Sequence[Mapping]], fhs_runs: Sequence[Run], metric: str, interval: Mapping
) -> Estimate:
    """Paired difference from FHS per seeded run: one run's interval, or the mean ± std of several."""
    return across_differences(
        [paired_difference(records, fhs.records, metric, **interval) for records, fhs in zip(groups, fhs_runs)]
    )


def table6_row(
    key: str,
    groups: Sequence[Sequence[Mapping]],
    fhs_runs: Sequence[Run],
    interval: Mapping,
    reported: str | None = None,
) -> dict[str, Any]:
    """One Table 6 row: facts, refused, each metric with its Δ against FHS, the paper's R@1 and MRR."""
    out: dict[str, Any] = {"row": LABELS[key], "facts": len(groups[0]), "refused": metrics(groups[0])["n_refused"]}
    for m in METRICS:
        value = mean_value(groups, m)
        out[m] = value
        if value is not None and key != "fhs" and m != "accuracy":
            out[f"Δ {m}"] = mean_difference(groups, fhs_runs, m, interval)
    paper = ABLATION.get(reported or key, {})
    out["paper R@1"], out["paper MRR"] = paper.get("recall@1"), paper.get("mrr")
    return out


def records_of(arms: Arms, key: str) -> list[list[dict]]:
    return [run.records for run in arms[key]]


def oracle_groups(arms: Arms) -> list[list[dict]]:
    """Per seeded run, the better of the two single-hypothesis rows per fact (the oracle-best-single bound)."""
    return [best_of(h0.records, h1.records) for h0, h1 in zip(arms["hypothesis0"], arms["hypothesis1"])]


def single_row(arms: Arms) -> dict[str, Any]:
    """ "− ensemble (J = 1)": the mean of the two single-hypothesis rows, as the paper reports it."""
    fhs_runs = arms["fhs"]
    per_seed_single = [
        {m: np.mean([metrics(arms[k][i].records)[m] for k in ("hypothesis0", "hypothesis1")]) for m in SINGLE}
        for i in range(len(fhs_runs))
    ]
    per_seed_fhs = [metrics(run.records) for run in fhs_runs]
    single = {m: float(np.mean([v[m] for v in per_seed_single])) for m in SINGLE}
    return {
        "row": "− ensemble (J = 1, mean of the two)",
        "facts": len(fhs_runs[0].records),
        **single,
        **{f"Δ {m}": float(np.mean([s[m] - f[m] for s, f in zip(per_seed_single, per_seed_fhs)])) for m in SINGLE},
        "paper R@1": ABLATION["single_hypothesis"]["recall@1"],
        "paper MRR": ABLATION["single_hypothesis"]["mrr"],
    }


def table6(arms: Arms, interval: Mapping, paper_values: bool = True) -> list[dict[str, Any]]:
    """Table 6's rows in the paper's order; the free-text rows when their arms ran. The paper's columns
    (FinTagging's values) only beside a dataset that stands for that benchmark (``paper_values``)."""
    fhs_runs = arms["fhs"]
    keys = (
        ["fhs"]
        + [k for k in ("free_text", "free_text_verifier") if k in arms]
        + ["no_verifier", "hypothesis0", "hypothesis1"]
    )
    rows = [table6_row(k, records_of(arms, k), fhs_runs, interval) for k in keys]
    rows.append(single_row(arms))
    rows += [
        table6_row(k, records_of(arms, k), fhs_runs, interval)
        for k in ("mean_rrf", "raw_scores", "no_label_form", "no_definition_form", "no_label_coverage")
    ]
    rows.append(table6_row("oracle_best_single", oracle_groups(arms), fhs_runs, interval))
    if not paper_values:
        rows = [{k: v for k, v in r.items() if not k.startswith("paper ")} for r in rows]
    return rows


def table6_caption(name: str, runs: int, paper_values: bool) -> str:
    """Table 6's caption; it names the paper's benchmark only when the paper's values stand in the table."""
    return f"Table 6 on {name}: ours (mean over {runs} seeded run(s)) and Δ against FHS" + (
        ", the paper's FinTagging R@1 and MRR beside them" if paper_values else ""
    )


def table16(arms: Arms) -> list[dict[str, Any]]:
    """Four cells from FHS and its β = 0 arm: Recall@1 before the selector, Acc. after it."""
    return [
        {
            "verifier": verifier,
            "selector off (R@1)": mean_value(records_of(arms, key), "recall@1"),
            "selector on (Acc.)": mean_value(records_of(arms, key), "accuracy"),
        }
        for verifier, key in (("on", "fhs"), ("off", "no_verifier"))
    ]


def point_value(value: Any) -> Any:
    """An estimate's point value (what the check records); anything else as it is."""
    return value.value if isinstance(value, Estimate) else value


def ablation_metrics(
    dataset: str,
    dev_dataset: str,
    arms: Arms,
    cells: Sequence[Mapping],
    chosen,
    table12_test: Sequence[Mapping],
    table11: Sequence[Mapping],
    windows: Sequence[Mapping],
) -> dict[str, Any]:
    """Chapter 03's check: every arm's head metrics and new calls, the bound, Tables 16, 12 and 11, E.2's window."""
    checked: dict[str, Any] = {f"{dataset}/facts": len(arms["fhs"][0].records)}
    for key, group in arms.items():
        for m in ("recall@1", "recall@10", "mrr"):
            checked[f"{dataset}/{key}/{m}"] = point_value(mean_value([run.records for run in group], m))
        calls = new_calls(r for run in group for r in run.records)
        checked[f"{dataset}/{key}/new_calls"] = sum(calls.get(p, 0) for p in ("hypothesis", "verifier"))
    checked[f"{dataset}/oracle_best_single/recall@1"] = point_value(mean_value(oracle_groups(arms), "recall@1"))
    for cell in cells:
        checked[f"{dataset}/table16/verifier_{cell['verifier']}/accuracy"] = point_value(cell["selector on (Acc.)"])
    checked[f"{dev_dataset}/table12/chosen_beta"] = chosen.beta
    at_paper = next((r for r in table12_test if r.get("chosen_on") == "paper"), table12_test[0])
    checked[f"{dataset}/table12/chosen/mrr"] = table12_test[0]["mrr"]  # the chosen beta's row comes first
    checked[f"{dataset}/table12/paper_beta/mrr"] = at_paper["mrr"]  # the same row when 0.6 was chosen
    for r in table11:
        for name in ("per_hypothesis_recall@200", "overlap", "pool_recall@200", "consolidation_loss"):
            if r[name] is not None:  # the overlap needs two hypotheses on some fact
                checked[f"{dev_dataset}/table11/{r['arm']}/{name}"] = r[name]
    for r in windows:
        checked[f"{dataset}/window/kv{r['k_v']}/mrr"] = r["mrr"]
    return checked


def beta_figure(chosen, dev_dataset: str, paper_beta: float = 0.6):
    """Table 12's development sweep: Recall@10 (of table facts where that is the basis) and MRR against β."""
    import matplotlib.pyplot as plt

    from fhs.book.report import NEUTRAL_COLOR, OURS_COLOR, PAPER_COLOR

    sweep = pd.DataFrame(chosen.sweep)
    recall_col = "table_recall@10" if chosen.basis == "table facts" else "recall@10"
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained", sharex=True)
    for ax, metric in zip(axes, (recall_col, "mrr")):
        ax.plot(sweep.beta, sweep[metric], "-", marker="o", color=OURS_COLOR)
        ax.axvline(paper_beta, color=PAPER_COLOR, linestyle="--", linewidth=1)
        ax.axvline(chosen.beta, color=NEUTRAL_COLOR, linewidth=1)
        ax.set_xlabel("β")
        ax.set_title(f"{metric} on {dev_dataset}")
    fig.suptitle(f"Table 12: Eq. 3 against β on development data (chosen: β = {chosen.beta:g})")
    return fig
