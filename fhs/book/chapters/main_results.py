"""Chapter 02's tables (Tables 4, 5 and 19, the paired contrasts, the per-modality split) and its check values.

``results`` maps ``(dataset, method)`` to the method's seeded runs and
``oracle`` maps a dataset to its gold-query probe run, as the chapter runs them
through ``fhs.book.study``. Every number is a mean over the seeded runs
(``fhs.book.study.over_runs``) or a paired, context-clustered difference
(``fhs.run.evaluate.paired_difference``); the paper's figure comes from
``fhs.paper``, "—" where it gives none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from fhs.book.costs import purpose_costs
from fhs.book.planned import main_rows
from fhs.book.report import Estimate, fmt_estimate, fmt_number
from fhs.book.study import Run, over_runs
from fhs.paper import CALLS_PER_FACT, MODALITY_CONTRASTS, PAPER_BENCHMARK, modality_value, paper_value
from fhs.run.evaluate import ACCURACY_BASES, accuracy_basis, paired_difference
from fhs.run.health import record_health
from fhs.run.tables.verdict_stats import VERDICTS, support_by_group, verdict_shares

METRICS = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr", "accuracy")
CONTRAST_METRICS = ("recall@1", "recall@10", "recall@50", "mrr", "accuracy")
Results = Mapping[tuple[str, str], Sequence[Run]]


def main_methods(registered: Mapping[str, Any], chosen: str | Sequence[str] | None = None) -> list[str]:
    """The paper's row order (``fhs.book.planned.MAIN_ROWS``, which ``fhs plan`` sizes), registered rows only;
    ``chosen`` (the ``methods`` parameter) keeps a subset, checked as ``fhs plan`` checks it."""
    return main_rows(chosen, registered)


def rows_line(methods: Sequence[str], registered: Mapping[str, Any]) -> str:
    """What the page says it ran: every row, or which of them (so the prose never claims rows it left out)."""
    every = main_rows(None, registered)
    if list(methods) == every:
        return f"This build runs all {len(every)} rows."
    return (
        f"This build runs {len(methods)} of the {len(every)} rows (the chapter's `methods` parameter): "
        f"{', '.join(methods)}. The tables below show these rows only."
    )


def rows_left_out(datasets: Sequence[str], methods: Sequence[str], registered: Mapping[str, Any]) -> list[str]:
    """The ``dataset/method`` groups of the rows a subset leaves out: the closing check skips their recorded values
    rather than failing them."""
    return [f"{name}/{m}" for name in datasets for m in main_rows(None, registered) if m not in methods]


def dash(value: Any) -> Any:
    """A cell the paper does not give reads "—" (an empty cell would look like a missing result)."""
    return "—" if value is None else value


def shown_name(results: Results, name: str) -> str:
    """The name a table gives a dataset: its runs' (a spec file's ``name``), never the path it was passed as."""
    group = next((runs for (dataset, _), runs in results.items() if dataset == name and runs), None)
    return group[0].dataset if group else name


def paper_evaluated(name: str) -> bool:
    """Whether the paper reports on this dataset (a "(paper)" row belongs under it)."""
    return name in PAPER_BENCHMARK


def mean_metric(runs: Sequence[Run], metric: str, interval: Mapping) -> float | None:
    """The mean over seeded runs, computed exactly as the table's point estimate."""
    return over_runs(list(runs), metric, **interval).estimate


def main_table(
    results: Results, oracle: Mapping[str, Run], datasets: Sequence[str], methods: Sequence[str], interval: Mapping
) -> pd.DataFrame:
    """Tables 4 and 5, read across: per method and metric, the paper's figure, our mean (± std over runs,
    95% interval) and the gap on one row, then the gold-query probe (one run) the same way."""
    rows = []
    for name in datasets:
        shown = shown_name(results, name)
        for method in methods:
            runs = list(results[(name, method)])
            ours: dict[str, Estimate | None] = {}
            for m in METRICS:
                e = over_runs(runs, m, **interval)
                ours[m] = None if e.estimate is None else Estimate(e.estimate, e.low, e.high, e.std)
            rows += beside_paper(shown, method, len(runs[0].summaries), ours, _paper(name, method, METRICS))
        probe: dict[str, Estimate | None] = {}
        for m in METRICS[:-1]:
            ci = oracle[name].interval(m, **interval)
            value = oracle[name].metrics.get(m)
            probe[m] = None if value is None else Estimate(value, ci.low, ci.high)
        rows += beside_paper(
            shown, "oracle (ceiling)", len(oracle[name].summaries), probe, _paper(name, "oracle", METRICS[:-1])
        )
    return pd.DataFrame(rows)


def _paper(dataset: str, method: str, metrics: Sequence[str]) -> dict[str, float | None]:
    """The paper's figures for a row, or none on a dataset the paper did not use."""
    return {m: paper_value(dataset, method, m) for m in metrics} if paper_evaluated(dataset) else {}


def beside_paper(
    dataset: str, label: str, facts: Any, ours: Mapping[str, Estimate | None], paper: Mapping[str, float | None]
) -> list[dict[str, Any]]:
    """One row per metric: the paper's figure, ours with its interval, and the gap, read across."""
    rows = []
    for metric, estimate in ours.items():
        reference = paper.get(metric)
        rows.append(
            {
                "dataset": dataset,
                "row": label,
                "facts": facts,
                "metric": metric,
                "paper": dash(reference),
                "ours [95% interval]": "—" if estimate is None else fmt_estimate(estimate),
                "gap": ""
                if estimate is None or reference is None
                else fmt_number(estimate.value - reference, signed=True),
            }
        )
    return rows


def main_caption(results: Results, n_seeds: int) -> str:
    """Tables 4 and 5's caption: what a value is, and which definition of Acc. the runs' records get."""
    bases = sorted({accuracy_basis(run.summaries) for group in results.values() for run in group})
    return (
        "Tables 4 and 5: ours (mean"
        + (" ± std across runs" if n_seeds > 1 else "")
        + ", 95% interval) and the paper's (— where the paper gives no figure). "
        + "; ".join(ACCURACY_BASES[b] for b in bases)
    )


def contrasts_table(
    results: Results, datasets: Sequence[str], baselines: Sequence[str], interval: Mapping
) -> pd.DataFrame:
    """FHS minus each baseline on the first seeded run, paired per fact, bootstrapped by context."""
    rows = []
    for name in datasets:
        fhs_run = results[(name, "fhs")][0]
        for baseline in baselines:
            base_run = results[(name, baseline)][0]
            row: dict[str, Any] = {"dataset": shown_name(results, name), "contrast": f"fhs - {baseline}"}
            for m in CONTRAST_METRICS:
                d = paired_difference(fhs_run.summaries, base_run.summaries, m, **interval)
                row[m] = Estimate(d.estimate, d.low, d.high)
            rows.append(row)
    return pd.DataFrame(rows)


def modality_table(results: Results, datasets: Sequence[str], methods: Sequence[str]) -> pd.DataFrame:
    """Per-modality metrics of each method's first run, with the paper's accuracy where it gives one."""
    rows = []
    for name in datasets:
        for method in methods:
            for modality, block in results[(name, method)][0].metrics["by_modality"].items():
                row = {
                    "dataset": shown_name(results, name),
                    "method": method,
                    "modality": modality,
                    "facts": block["n_facts"],
                    "recall@1": block["recall@1"],
                    "recall@50": block["recall@50"],
                    "mrr": block["mrr"],
                    "accuracy": block.get("accuracy"),
                }
                if any(paper_evaluated(n) for n in datasets):
                    row["accuracy (paper)"] = dash(modality_value(name, method, modality, "accuracy"))
                rows.append(row)
    return pd.DataFrame(rows)


def modality_contrasts(
    results: Results, datasets: Sequence[str], methods: Sequence[str], interval: Mapping
) -> list[dict[str, Any]]:
    """Feedback refinement minus FHS per modality (first runs, paired); empty when either is not a row."""
    if "feedback-refine" not in methods:
        return []
    rows = []
    for name in datasets:
        paper_rows = MODALITY_CONTRASTS.get((PAPER_BENCHMARK.get(name, name), "feedback-refine", "fhs"), {})
        refine, fhs = results[(name, "feedback-refine")][0].summaries, results[(name, "fhs")][0].summaries
        for modality in sorted({r["modality"] for r in fhs}):
            a = [r for r in refine if r["modality"] == modality]
            b = [r for r in fhs if r["modality"] == modality]
            row: dict[str, Any] = {"dataset": shown_name(results, name), "modality": modality, "facts": len(b)}
            for m in ("recall@1", "recall@50", "mrr", "accuracy"):
                d = paired_difference(a, b, m, **interval)
                row[m] = Estimate(d.estimate, d.low, d.high)
                p = paper_rows.get(modality, {}).get(m)
                if any(paper_evaluated(n) for n in datasets):
                    row[f"{m} (paper)"] = Estimate(*p) if p else "—"
            rows.append(row)
    return rows


def cost_table(results: Results, datasets: Sequence[str], methods: Sequence[str]) -> pd.DataFrame:
    """Table 19: per fact of each method's first run, its own calls and the selector's, as recorded
    (the paper's calls per fact beside them when the page holds a dataset the paper evaluated)."""
    paper_columns = any(map(paper_evaluated, datasets))
    rows = []
    for name in datasets:
        for method in methods:
            records = results[(name, method)][0].records
            n = max(len(records), 1)
            own, selector = purpose_costs(records, "selector")
            rows.append(
                {
                    "dataset": shown_name(results, name),
                    "method": method,
                    "calls / fact": own["calls"] / n,
                    **({"calls (paper)": dash(CALLS_PER_FACT.get(method))} if paper_columns else {}),
                    "cached share": (own["calls"] - own["fresh"]) / max(own["calls"], 1),
                    "tokens in / fact": own["tokens_in"] / n,
                    "tokens out / fact": own["tokens_out"] / n,
                    "model s / fact": own["recorded_seconds"] / n,
                    "selector calls / fact": selector["calls"] / n,
                    "selector tokens in / fact": selector["tokens_in"] / n,
                    "selector s / fact": selector["recorded_seconds"] / n,
                    "wall s / fact": sum(r.get("wall_seconds", 0.0) for r in records) / n,
                    "parse failures / fact": sum(r.get("parse_failures", 0) for r in records) / n,
                    # answers the profile's max_tokens cut off (the smoke profile's caps are small)
                    "answers cut / fact": sum(counts[2] for r in records for counts in record_health(r).values()) / n,
                }
            )
    return pd.DataFrame(rows)


def verdict_share_row(dataset: str, records: Sequence[Mapping], dimensions: Sequence[str]) -> dict[str, Any]:
    """The share of support / contradict / abstain over every dimension verdict of a run's judged pairs.

    Each judged pair carries one verdict per dimension, so the pooled share is the
    mean of ``fhs.run.tables.verdict_stats.verdict_shares``'s per-dimension shares."""
    pairs = sum(group["pairs"] for group in support_by_group(records, dimensions, lambda *_: "all").values())
    by_dimension = verdict_shares(records, dimensions)
    shares = {v: sum(by_dimension[d][v] for d in dimensions) / max(len(dimensions), 1) for v in VERDICTS}
    return {"dataset": dataset, "verdicts": max(pairs * len(dimensions), 1), **shares}


def main_results_metrics(
    results: Results,
    oracle: Mapping[str, Run],
    sizes: Mapping[str, int],
    methods: Sequence[str],
    cost: pd.DataFrame,
    relocation: Mapping[str, float],
    interval: Mapping,
) -> dict[str, float]:
    """What the chapter's closing check compares: facts, every method's metrics and calls, the oracle, relocation."""
    checked: dict[str, float] = {}
    for name, size in sizes.items():
        checked[f"{name}/facts"] = size
        for method in methods:
            for m in METRICS:
                value = mean_metric(results[(name, method)], m, interval)
                if value is not None:
                    checked[f"{name}/{method}/{m}"] = value
            mine = cost[(cost.dataset == shown_name(results, name)) & (cost.method == method)].iloc[0]
            checked[f"{name}/{method}/calls_per_fact"] = float(mine["calls / fact"] + mine["selector calls / fact"])
        for m in METRICS[:-1]:
            checked[f"{name}/oracle/{m}"] = oracle[name].metrics[m]
    for relocator, rate in relocation.items():
        checked[f"codiesp/relocation/{relocator}"] = rate
    return checked


# ---- figures ------------------------------------------------------------------------------


def head_metrics_figure(results: Results, datasets: Sequence[str], methods: Sequence[str], interval: Mapping):
    """Recall@1, MRR and Acc. per method as bars (ours), the paper's value as a black tick."""
    import matplotlib.pyplot as plt
    import numpy as np

    from fhs.book.report import NEUTRAL_COLOR, ORACLE_COLOR, OURS_COLOR

    fig, axes = plt.subplots(1, len(datasets), figsize=(6.4 * len(datasets), 3.6), sharey=True, layout="constrained")
    axes = np.atleast_1d(axes)
    marked = any(
        paper_value(name, m, metric) is not None
        for name in datasets
        for m in methods
        for metric in ("recall@1", "mrr", "accuracy")
    )
    for ax, name in zip(axes, datasets):
        x = np.arange(len(methods))
        for offset, metric, color in (
            (-0.2, "recall@1", OURS_COLOR),
            (0.0, "mrr", NEUTRAL_COLOR),
            (0.2, "accuracy", ORACLE_COLOR),
        ):
            ours = [mean_metric(results[(name, m)], metric, interval) or 0.0 for m in methods]
            ax.bar(x + offset, ours, width=0.2, color=color, label=metric)
            paper = [paper_value(name, m, metric) for m in methods]
            ax.scatter(
                x + offset,
                [p if p is not None else np.nan for p in paper],
                marker="_",
                s=300,
                color="black",
                zorder=3,
                label="paper" if metric == "recall@1" and marked else None,
            )
        ax.set_xticks(x, methods, rotation=45, ha="right")
        ax.set_title(shown_name(results, name))
    axes[0].set_ylabel("score")
    axes[0].legend(fontsize=8)
    fig.suptitle("Head-of-list metrics per method (bars: ours" + ("; black ticks: the paper)" if marked else ")"))
    return fig


def tied_groups(points: Mapping[str, tuple[float, float]], decimals: int = 2) -> list[tuple[float, float, list[str]]]:
    """Points that would print on top of each other (equal to ``decimals``) as one ``(x, y, names)`` each.

    On a small sample every method can sit at Recall@50 = 1.0 with the same head metric;
    one label per group, naming its methods, stays readable where one label per method
    overprints."""
    groups: dict[tuple[float, float], tuple[float, float, list[str]]] = {}
    for name, (x, y) in points.items():
        groups.setdefault((round(x, decimals), round(y, decimals)), (x, y, []))[2].append(name)
    return list(groups.values())


def group_label(names: Sequence[str], suffix: str = "", per_line: int = 3) -> str:
    """A group's label: its names, ``per_line`` to a line."""
    lines = [", ".join(names[i : i + per_line]) for i in range(0, len(names), per_line)]
    return ",\n".join(lines) + suffix


def _annotate_groups(ax, points: Mapping[str, tuple[float, float]], suffix: str, below: bool) -> None:
    for x, y, names in tied_groups(points):
        left = x > 0.5  # a label right of a point near Recall@50 = 1 would leave the axes
        ax.annotate(
            group_label(names, suffix),
            (x, y),
            fontsize=7,
            textcoords="offset points",
            xytext=(-3 if left else 3, -9 if below else 3),
            ha="right" if left else "left",
            va="top" if below else "bottom",
        )


def head_depth_figure(results: Results, datasets: Sequence[str], methods: Sequence[str], interval: Mapping):
    """Recall@50 (reach) against Recall@1 and MRR (position), one point per method, the paper's as crosses;
    methods that tie share one label."""
    import matplotlib.pyplot as plt

    from fhs.book.report import NEUTRAL_COLOR, OURS_COLOR

    fig, axes = plt.subplots(2, len(datasets), figsize=(5.4 * len(datasets), 6.4), layout="constrained", squeeze=False)
    for col, name in enumerate(datasets):
        for row, head in enumerate(("recall@1", "mrr")):
            ax = axes[row, col]
            ours: dict[str, tuple[float, float]] = {}
            paper: dict[str, tuple[float, float]] = {}
            for method in methods:
                runs = results[(name, method)]
                x, y = mean_metric(runs, "recall@50", interval), mean_metric(runs, head, interval)
                if x is not None and y is not None:
                    ours[method] = (x, y)
                    ax.scatter([x], [y], color=OURS_COLOR if method == "fhs" else NEUTRAL_COLOR, s=40, zorder=3)
                px, py = paper_value(name, method, "recall@50"), paper_value(name, method, head)
                if px is not None and py is not None:
                    paper[method] = (px, py)
                    ax.scatter([px], [py], marker="x", color="black", s=30, zorder=3)
            _annotate_groups(ax, ours, "", below=False)
            _annotate_groups(ax, paper, " (paper)", below=True)
            ax.set_xlabel("Recall@50 (reach)")
            ax.set_ylabel(f"{head} (position)")
            ax.set_title(shown_name(results, name))
    marked = any(paper_value(name, m, "recall@50") is not None for name in datasets for m in methods)
    fig.suptitle(
        "Head against depth per method (dots: ours" + ("; crosses: the paper where it gives both)" if marked else ")")
    )
    return fig
