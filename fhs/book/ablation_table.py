"""Chapter 03's Table 6 and Table 16 over the seeded runs, the new-calls tally, Table 12's figure and the check.

``arms`` maps a row key (``fhs``, a key of ``fhs.book.manifest.ABLATION_VARIANTS``,
``free_text``, ``free_text_verifier``) to its seeded runs, in the order they ran.
A value is the mean over the runs ± the std across them; a difference from FHS
is paired per fact within each run (``fhs.book.seeded``). Acc. is
``fhs.run.evaluate.accuracy`` where the selector judged every fact, and empty
for a row run without it (its list's rank 1 is Recall@1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fhs.book.ablations import free_text_verifier
from fhs.book.costs import new_calls
from fhs.book.manifest import ABLATION_VARIANTS
from fhs.book.report import Estimate
from fhs.book.seeded import across, across_differences
from fhs.book.study import Run, Study
from fhs.method.config import FHSConfig
from fhs.paper import ABLATION
from fhs.run.evaluate import SELECTOR, accuracy, accuracy_basis, metrics, paired_difference
from fhs.run.rescore import best_of

METRICS = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr", "accuracy")
SINGLE = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr")
LABELS = {"fhs": "FHS (β = 0.6, J = 2, sum-RRF, both renderings)",
          "free_text": "− factorization (free-text J = 2, no verifier)",
          "free_text_verifier": "− factorization + verifier (free-text J = 2, Eq. 3)",
          "oracle_best_single": "oracle-best single hypothesis (bound)",
          **{key: label for key, (label, _, _) in ABLATION_VARIANTS.items()}}
Arms = Mapping[str, Sequence[Run]]


def variant_arms(study: Study, dataset: str, choices: Sequence, base: FHSConfig) -> dict[str, list[Run]]:
    """FHS (chapter 02's run) and every ablation variant, one run per seeded choice, in the manifest's order."""
    arms = {"fhs": [study.run_llm(dataset, "fhs", c) for c in choices]}
    for key, (_, changes, w_cov) in ABLATION_VARIANTS.items():
        arms[key] = [study.run_llm(dataset, "fhs", c, config=base.replace(**changes), tag=key, w_cov=w_cov)
                     for c in choices]
    return arms


def free_text_arms(study: Study, dataset: str, choices: Sequence, base: FHSConfig) -> dict[str, list[Run]]:
    """The free-text ensemble (``parallel``) and the same ensemble with the verifier."""
    return {"free_text": [study.run_llm(dataset, "parallel", c) for c in choices],
            "free_text_verifier": [free_text_verifier(study, dataset, c, base) for c in choices]}


def new_calls_frame(arms: Arms) -> pd.DataFrame:
    """Per row, the calls each stage made that no cache or ledger served, summed over the seeded runs."""
    return pd.DataFrame([{"row": LABELS[k] if k in ABLATION_VARIANTS else "FHS",
                          **new_calls(r for run in group for r in run.records)} for k, group in arms.items()]).fillna(0)


def selector_accuracy(records: Sequence[Mapping]) -> float | None:
    """Acc. where the selector judged every fact (``fhs.run.evaluate.accuracy``); None for a run without it."""
    return accuracy(records) if records and accuracy_basis(records) == SELECTOR else None


def mean_value(groups: Sequence[Sequence[Mapping]], metric: str) -> Estimate | None:
    """A metric over seeded runs (given as record lists): the mean, ± the std when there are several."""
    values = [selector_accuracy(records) if metric == "accuracy" else metrics(records).get(metric)
              for records in groups]
    return None if any(v is None for v in values) else across(values)


def mean_difference(groups: Sequence[Sequence[Mapping]], fhs_runs: Sequence[Run], metric: str,
                    interval: Mapping) -> Estimate:
    """Paired difference from FHS per seeded run: one run's interval, or the mean ± std of several."""
    return across_differences([paired_difference(records, fhs.records, metric, **interval)
                               for records, fhs in zip(groups, fhs_runs)])


def row(key: str, groups: Sequence[Sequence[Mapping]], fhs_runs: Sequence[Run], interval: Mapping,
        reported: str | None = None) -> dict[str, Any]:
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
    """"− ensemble (J = 1)": the mean of the two single-hypothesis rows, as the paper reports it."""
    fhs_runs = arms["fhs"]
    per_seed_single = [{m: np.mean([metrics(arms[k][i].records)[m] for k in ("hypothesis0", "hypothesis1")])
                        for m in SINGLE} for i in range(len(fhs_runs))]
    per_seed_fhs = [metrics(run.records) for run in fhs_runs]
    single = {m: float(np.mean([v[m] for v in per_seed_single])) for m in SINGLE}
    return {"row": "− ensemble (J = 1, mean of the two)", "facts": len(fhs_runs[0].records), **single,
            **{f"Δ {m}": float(np.mean([s[m] - f[m] for s, f in zip(per_seed_single, per_seed_fhs)])) for m in SINGLE},
            "paper R@1": ABLATION["single_hypothesis"]["recall@1"], "paper MRR": ABLATION["single_hypothesis"]["mrr"]}


def table6(arms: Arms, interval: Mapping) -> list[dict[str, Any]]:
    """Table 6's rows in the paper's order; the free-text rows when their arms ran."""
    fhs_runs = arms["fhs"]
    keys = ["fhs"] + [k for k in ("free_text", "free_text_verifier") if k in arms] + [
        "no_verifier", "hypothesis0", "hypothesis1"]
    rows = [row(k, records_of(arms, k), fhs_runs, interval) for k in keys]
    rows.append(single_row(arms))
    rows += [row(k, records_of(arms, k), fhs_runs, interval)
             for k in ("mean_rrf", "raw_scores", "no_label_form", "no_definition_form", "no_label_coverage")]
    rows.append(row("oracle_best_single", oracle_groups(arms), fhs_runs, interval))
    return rows


def table16(arms: Arms) -> list[dict[str, Any]]:
    """Four cells from FHS and its β = 0 arm: Recall@1 before the selector, Acc. after it."""
    return [{"verifier": verifier, "selector off (R@1)": mean_value(records_of(arms, key), "recall@1"),
             "selector on (Acc.)": mean_value(records_of(arms, key), "accuracy")}
            for verifier, key in (("on", "fhs"), ("off", "no_verifier"))]


def plain(value: Any) -> Any:
    return value.value if isinstance(value, Estimate) else value


def checked_values(dataset: str, dev_dataset: str, arms: Arms, cells: Sequence[Mapping], chosen,
                   table12_test: Sequence[Mapping], table11: Sequence[Mapping],
                   windows: Sequence[Mapping]) -> dict[str, Any]:
    """Chapter 03's check: every arm's head metrics and new calls, the bound, Tables 16, 12 and 11, E.2's window."""
    checked: dict[str, Any] = {f"{dataset}/facts": len(arms["fhs"][0].records)}
    for key, group in arms.items():
        for m in ("recall@1", "recall@10", "mrr"):
            checked[f"{dataset}/{key}/{m}"] = plain(mean_value([run.records for run in group], m))
        calls = new_calls(r for run in group for r in run.records)
        checked[f"{dataset}/{key}/new_calls"] = sum(calls.get(p, 0) for p in ("hypothesis", "verifier"))
    checked[f"{dataset}/oracle_best_single/recall@1"] = plain(mean_value(oracle_groups(arms), "recall@1"))
    for cell in cells:
        checked[f"{dataset}/table16/verifier_{cell['verifier']}/accuracy"] = plain(cell["selector on (Acc.)"])
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
