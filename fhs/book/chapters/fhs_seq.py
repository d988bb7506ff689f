"""Chapter 06's tables and figure for FHS-Seq (Table 20, Appendix F.1): round 1 against the full episode,
rounds and stopping reasons, revisions, the oracle best single hypothesis, the selector, the cost.

``by_seed`` holds, per seeded run, FHS-Seq's records with their round ranks
(``fhs.run.tables.seq_diagnostics.with_round_ranks``); shares pool the runs (every run
holds the same facts), Table 20 and the oracle are computed per run and shown as
the mean ± the std across them (``fhs.book.across_runs``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fhs.book.across_runs import across, across_differences, across_reported
from fhs.book.costs import calls_per_fact
from fhs.book.report import Estimate
from fhs.book.study import Run
from fhs.method.config import FHSConfig
from fhs.paper import PAPER_BENCHMARK, paper_value
from fhs.run.evaluate import paired_difference, rank_metrics, runs_estimate
from fhs.run.summary import call_totals
from fhs.run.tables.seq_diagnostics import oracle_best_single, rounds_distribution, stop_distribution, summary

LABELS = {
    "delta_recall@50": "Δ Recall@50 (full − round 1)",
    "replaced_top50": "top-50 pool replaced by later rounds",
    "gold_never_in_pool": "gold never in the pool",
    "all_rounds": "facts using all 4 rounds",
    "one_round": "facts stopping after round 1",
    "mean_rounds": "mean rounds used",
}
METRICS = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr")
LISTS = {
    "FHS (round 1)": ("rank_round1", "fhs", "round1"),
    "oracle best single hypothesis": ("rank_oracle", "oracle_best_single", "oracle_best_single"),
    "FHS-Seq (full episode)": ("rank_full", None, "full"),
}


def round1_is_fhs(by_seed: Sequence[Sequence[Mapping]], fhs_runs: Sequence[Run]) -> float:
    """Share of facts (over every seeded run) whose round-1 list is FHS's final list."""
    same = []
    for seq_records, fhs_run in zip(by_seed, fhs_runs):
        fhs_lists = {r["id"]: r["ranking"] for r in fhs_run.records}
        same += [r["rounds"][0]["ranking"] == fhs_lists[r["id"]] for r in seq_records]
    return float(np.mean(same))


def table20(name: str, by_seed: Sequence[Sequence[Mapping]], interval: Mapping) -> tuple[pd.DataFrame, str, dict]:
    """Table 20 on one dataset: ours (labelled quantities) beside the paper's, its caption note, and check values."""
    from fhs.book.report import ours_vs_paper

    r1 = runs_estimate(by_seed, "recall@50", rank_key="rank_round1", **interval)
    full = runs_estimate(by_seed, "recall@50", rank_key="rank_full", **interval)
    delta = across_differences(
        [
            paired_difference(rs, rs, "recall@50", rank_key_a="rank_full", rank_key_b="rank_round1", **interval)
            for rs in by_seed
        ]
    )
    per_run = [summary(rs) for rs in by_seed]
    s = {k: float(np.mean([v[k] for v in per_run])) for k in per_run[0]}
    spread = {k: across([v[k] for v in per_run]) for k in per_run[0]} if len(per_run) > 1 else s
    ours = {
        "Recall@50, round 1": Estimate(r1.estimate, r1.low, r1.high, r1.std),
        "Recall@50, full episode": Estimate(full.estimate, full.low, full.high, full.std),
        "delta_recall@50": delta,
        **spread,
    }
    paper = {LABELS.get(k, k): paper_value(name, "fhs-seq", k) for k in ours}
    ours = {LABELS.get(k, k): v for k, v in ours.items()}
    low, high = (paper_value(name, "fhs-seq", f"delta_recall@50_{end}") for end in ("low", "high"))
    note = f"; the paper's Δ interval is [{low:+.3f}, {high:+.3f}]" if low is not None else ""
    checked = {
        f"{name}/facts": len(by_seed[0]),
        f"{name}/fhs-seq/recall@50_round1": r1.estimate,
        f"{name}/fhs-seq/recall@50_full": full.estimate,
        f"{name}/fhs-seq/delta_recall@50": delta.value,
        **{f"{name}/fhs-seq/{k}": v for k, v in s.items()},
    }
    return ours_vs_paper(ours, paper, label="quantity"), note, checked


def stop_rows(records: Mapping[str, Sequence[Mapping]]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Stopping reasons per dataset (pooled over the runs), and the stop and rounds shares the check records."""
    rows, checked = [], {}
    for name, recs in records.items():
        stops, rounds = stop_distribution(recs), rounds_distribution(recs)
        rows += [{"dataset": name, "stopping reason": s, "share": v} for s, v in stops.items()]
        checked.update({f"{name}/fhs-seq/stop/{s}": v for s, v in stops.items()})
        checked.update({f"{name}/fhs-seq/rounds/{k}": v for k, v in rounds.items()})
    return rows, checked


def revisions_frame(records: Mapping[str, Sequence[Mapping]]) -> pd.DataFrame:
    """Every revision call (and a last unusable attempt) by target dimension, with how many were restored."""
    rows = []
    for name, recs in records.items():
        for record in recs:
            for rnd in record["rounds"][1:]:
                rows.append(
                    {
                        "dataset": name,
                        "target": rnd["revision"]["target"],
                        "restored": bool(rnd["revision"]["restored"]),
                    }
                )
            attempt = record["rounds"][-1].get("revision_attempt")
            if attempt:
                rows.append({"dataset": name, "target": attempt["target"], "restored": bool(attempt["restored"])})
    revisions = pd.DataFrame(rows, columns=["dataset", "target", "restored"])
    return (
        revisions.groupby(["dataset", "target"])
        .agg(revisions=("restored", "size"), restored=("restored", "sum"))
        .reset_index()
    )


def oracle_rows(
    name: str, by_seed: Sequence[Sequence[Mapping]], config: FHSConfig, interval: Mapping
) -> tuple[list[dict[str, Any]], dict[str, float], Estimate]:
    """Round 1, the oracle best single hypothesis and the full episode (with the paper's rows), their check
    values, and the oracle's Recall@1 gain over round 1."""
    oracles = [oracle_best_single(rs, config) for rs in by_seed]
    rows, checked = [], {}
    for label, (key, paper_row, slug) in LISTS.items():
        per_run = [rank_metrics([r[key] for r in o]) for o in oracles]
        measured = {m: float(np.mean([v[m] for v in per_run])) for m in METRICS}
        rows.append({"dataset": name, "list": label, **{m: across([v[m] for v in per_run]) for m in METRICS}})
        if paper_row and name in PAPER_BENCHMARK:  # the paper's rows beside its own datasets only
            rows.append(
                {"dataset": name, "list": f"{label} (paper)", **{m: paper_value(name, paper_row, m) for m in METRICS}}
            )
        checked.update({f"{name}/{slug}/{m}": measured[m] for m in METRICS})
    gain = across_differences(
        [
            paired_difference(o, o, "recall@1", rank_key_a="rank_oracle", rank_key_b="rank_round1", **interval)
            for o in oracles
        ]
    )
    return rows, checked, gain


def selector_row(name: str, seq_runs: Sequence[Run], fhs_runs: Sequence[Run], interval: Mapping) -> dict[str, Any]:
    """FHS-Seq minus FHS per fact (R@1, MRR, Acc.) and both accuracies, over the seeded runs."""
    row: dict[str, Any] = {"dataset": name}
    for m in ("recall@1", "mrr", "accuracy"):
        row[f"Δ {m}"] = across_differences(
            [paired_difference(seq.records, fhs.records, m, **interval) for seq, fhs in zip(seq_runs, fhs_runs)]
        )
    for label, group in (("fhs", fhs_runs), ("fhs-seq", seq_runs)):
        accuracy = [run.metrics.get("accuracy") for run in group]
        row[f"{label} accuracy"] = across_reported(accuracy)
    return row


def cost_row(name: str, seq_runs: Sequence[Run]) -> dict[str, Any]:
    """Calls per fact before the selector (min, max, served by the cache), tokens and seconds, over every run."""
    recs = [r for run in seq_runs for r in run.records]  # every seeded run: per-fact means over runs
    n = max(len(recs), 1)
    counts = calls_per_fact(recs)
    cached = sum(c["cached"] for r in recs for c in r["llm_calls"] if c["purpose"] != "selector")
    totals = call_totals(recs)
    return {
        "dataset": name,
        "calls / fact": sum(counts) / n,
        "min": min(counts, default=0),
        "max": max(counts, default=0),
        "served by the cache": cached / n,
        "tokens in / fact": totals["tokens_in"] / n,
        "tokens out / fact": totals["tokens_out"] / n,
        "model seconds / fact": totals["recorded_seconds"] / n,
    }


def rounds_figure(records: Mapping[str, Sequence[Mapping]], stop_reasons: Sequence[str]):
    """Per dataset: the share of facts by rounds used and by stopping reason, the paper's shares as red ticks."""
    import matplotlib.pyplot as plt

    from fhs.book.report import NEUTRAL_COLOR, OURS_COLOR, PAPER_COLOR

    names = list(records)
    fig, axes = plt.subplots(len(names), 2, figsize=(10, 3.0 * len(names)), layout="constrained", squeeze=False)
    for (ax_rounds, ax_stop), name in zip(axes, names):
        rounds = rounds_distribution(records[name])
        ax_rounds.bar(list(rounds), list(rounds.values()), color=OURS_COLOR, label="ours")
        paper_rounds = {1: paper_value(name, "fhs-seq", "one_round"), 4: paper_value(name, "fhs-seq", "all_rounds")}
        if name in PAPER_BENCHMARK:  # no paper mark beside a dataset the paper never ran
            ax_rounds.scatter(
                list(paper_rounds),
                [v if v is not None else np.nan for v in paper_rounds.values()],
                marker="_",
                s=600,
                color=PAPER_COLOR,
                zorder=3,
                label="paper",
            )
        ax_rounds.set(xticks=[1, 2, 3, 4], xlabel="rounds used", ylabel="share of facts", title=f"{name}: rounds used")
        ax_rounds.legend(fontsize=8)
        stops = stop_distribution(records[name])
        y = np.arange(len(stop_reasons))
        ax_stop.barh(y, [stops[s] for s in stop_reasons], color=NEUTRAL_COLOR)
        paper_stop = {
            "no_unsupported_dimension": paper_value(name, "fhs-seq", "no_unsupported_dimension"),
            "max_rounds": paper_value(name, "fhs-seq", "all_rounds"),
        }
        if name in PAPER_BENCHMARK:
            ax_stop.scatter(
                [paper_stop.get(s) if paper_stop.get(s) is not None else np.nan for s in stop_reasons],
                y,
                marker="|",
                s=300,
                color=PAPER_COLOR,
                zorder=3,
            )
        ax_stop.set(yticks=y, yticklabels=stop_reasons, xlabel="share of facts", title=f"{name}: stopping reason")
    ticks = "; red ticks: the paper" if any(name in PAPER_BENCHMARK for name in names) else ""
    fig.suptitle(f"FHS-Seq: rounds used and stopping reasons (bars: ours{ticks})")
    return fig
