"""Chapter 01's tables and figures: the test data, raw fact against gold query (Table 1, Appendix E.1),
the located query beside the paper's serialisation (an addition, book/deviations.md), recall at every
depth, and the label-coverage term of Eq. 6 on and off (Table 13).

Nothing here calls a model: the runs are LLM-free (``Study.run``), so every
number is deterministic for a profile's sample.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd

from fhs.book.report import Estimate
from fhs.book.study import Run, Study
from fhs.core.free_text import markdown_literal
from fhs.data.datasets.stats import dataset_stats
from fhs.data.evidence import location
from fhs.data.facts import Fact
from fhs.paper import PAPER, RELOCATION, relocation_rate
from fhs.run.evaluate import by_group, paired_difference

METRICS = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr")
LOCATED = "direct-located"  # the header-aware variant of direct (fhs/method/direct.py)
LOCATED_METRICS = ("recall@1", "recall@10", "mrr")
# Table 1's raw row and Appendix E.1's probe, for the datasets that stand in for the paper's benchmarks
PAPER_ROWS = {
    ("fincl", "direct"): PAPER["fintagging"]["direct"],
    ("fincl", "oracle"): PAPER["fintagging"]["oracle"],
    ("codiesp", "direct"): PAPER["codiesp"]["direct"],
    ("codiesp", "oracle"): PAPER["codiesp"]["oracle"],
}


def data_rows(study: Study, datasets: Sequence[str]) -> list[dict[str, Any]]:
    """Facts, contexts, modalities, gold concepts and taxonomy size of each dataset's sample."""
    rows = []
    for name in datasets:
        experiment = study.experiment(name)
        stats = dataset_stats(study.facts(name))
        rows.append(
            {
                "dataset": study.dataset_name(name),
                "facts": stats["n_facts"],
                "contexts": stats["n_contexts"],
                "table facts": stats["facts_by_modality"].get("table", 0),
                "text facts": stats["facts_by_modality"].get("text", 0),
                "facts per table": f"{stats['facts_per_table_context']['mean'] or 0:.2f}",
                "gold concepts": stats["n_gold_concepts"],
                "taxonomy": f"{experiment.taxonomy.name} ({len(experiment.taxonomy):,})",
            }
        )
    return rows


def relocation_lines(stats: Mapping[str, int]) -> list[str]:
    """What the CodiEsp loader kept: diagnosis rows, codes in the inventory, exact relocations (and the paper's)."""
    rate = stats["exact"] / stats["facts"]
    return [
        f"diagnosis rows in testX.tsv: {stats['diagnosis_rows']:,}",
        f"codes in the inventory: {stats['facts']:,} ({stats['facts'] / stats['diagnosis_rows']:.1%} of rows)",
        f"relocated exactly: {stats['exact']:,} ({rate:.1%}); the paper relocated "
        f"{RELOCATION['exact']:,} of {RELOCATION['mentions']:,} ({relocation_rate():.1%}) with an LLM",
    ]


def metric_table(
    runs: Mapping[tuple[str, str], Run], paper_rows: Mapping[tuple[str, str], Mapping], interval: Mapping
) -> pd.DataFrame:
    """One row per (dataset, query) with 95% context-clustered intervals, the paper's row below where it has one."""
    frame = []
    for (dataset, method), run in runs.items():
        # the run's name: a spec file's ``name``, not the path it was passed as
        row: dict[str, Any] = {"dataset": run.dataset, "query": method, "facts": len(run.summaries)}
        for m in METRICS:
            ci = run.interval(m, **interval)
            row[m] = Estimate(ci.estimate, ci.low, ci.high)
        frame.append(row)
        paper = paper_rows.get((dataset, method))
        if paper:
            frame.append(
                {
                    "dataset": run.dataset,
                    "query": f"{method} (paper)",
                    "facts": paper.get("facts"),
                    **{m: paper.get(m) for m in METRICS},
                }
            )
    return pd.DataFrame(frame)


def with_headers(study: Study, datasets: Sequence[str]) -> list[str]:
    """The datasets some of whose facts carry a row or column header: those the located query is shown for."""
    return [name for name in datasets if any(f.row_header or f.column_header for f in study.facts(name))]


def located_rows(direct: Mapping[str, Run], located: Mapping[str, Run], interval: Mapping) -> list[dict[str, Any]]:
    """Per dataset: the paper's serialisation, the located query, and their paired difference."""
    rows = []
    for name, run in located.items():
        base = direct[name]
        for label, each in (("direct (the paper's serialisation)", base), (LOCATED, run)):
            row: dict[str, Any] = {"dataset": each.dataset, "query": label, "facts": len(each.summaries)}
            for m in LOCATED_METRICS:
                ci = each.interval(m, **interval)
                row[m] = Estimate(ci.estimate, ci.low, ci.high)
            rows.append(row)
        differences = {m: paired_difference(run.summaries, base.summaries, m, **interval) for m in LOCATED_METRICS}
        rows.append(
            {
                "dataset": run.dataset,
                "query": f"Δ {LOCATED} − direct (paired)",
                "facts": len(run.summaries),
                **{m: Estimate(d.estimate, d.low, d.high) for m, d in differences.items()},
            }
        )
    return rows


def located_lines(facts: Mapping[str, Sequence[Fact]]) -> list[str]:
    """How many facts of each dataset had a location to query; the others issued the direct query."""
    lines = []
    for name, group in facts.items():
        table = [f for f in group if f.modality == "table"]
        text = [f for f in group if f.modality == "text"]
        parts = [
            f"{sum(bool(location(f)) for f in kind):,} of {len(kind):,} {label}"
            for kind, label in (
                (table, "table cells had a row or column header"),
                (text, "text mentions had a sentence"),
            )
            if kind
        ]
        lines.append(f"{name}: " + ", ".join(parts) + "; a fact with neither issued the direct query.")
    return lines


def coverage_rows(
    no_cov: Mapping[tuple[str, str], Run], with_cov: Mapping[tuple[str, str], Run], interval: Mapping
) -> list[dict[str, Any]]:
    """Table 13, Panel A: Recall@10 and MRR with w_cov 0 and 1, their paired difference."""
    rows = []
    for key, run0 in no_cov.items():
        run1 = with_cov[key]
        row: dict[str, Any] = {"dataset": run0.dataset, "query": key[1]}
        for m in ("recall@10", "mrr"):
            row[f"{m}, w_cov 0"] = run0.metrics[m]
            row[f"{m}, w_cov 1"] = run1.metrics[m]
            d = paired_difference(run1.summaries, run0.summaries, m, **interval)
            row[f"Δ {m}"] = Estimate(d.estimate, d.low, d.high)
        rows.append(row)
    return rows


def label_length_bin(taxonomy) -> Callable[[Mapping], str]:
    """A record's bin by the number of distinct tokens in its gold concept's label (1 ... 4, 5+, n/a)."""

    def bin_of(record):
        gold = next((taxonomy[g] for g in record["gold"] if g in taxonomy), None)
        if gold is None:
            return "n/a"
        n = len(set(gold.label_text.split()))
        return f"{n}" if n < 5 else "5+"

    return bin_of


def label_length_rows(with_cov: Run, without: Run, taxonomy) -> list[dict[str, Any]]:
    """Table 13, Panel B: raw-query Recall@10 with and without the coverage term, by gold label length."""
    key = label_length_bin(taxonomy)
    on, off = by_group(with_cov.summaries, key), by_group(without.summaries, key)
    return [
        {
            "dataset": with_cov.dataset,
            "label words": length,
            "facts": on[length]["n_facts"],
            "Recall@10, w_cov 0": off[length]["recall@10"],
            "Recall@10, w_cov 1": on[length]["recall@10"],
            "gain": on[length]["recall@10"] - off[length]["recall@10"],
        }
        for length in sorted(on, key=lambda b: (len(b), b))
    ]


def readiness_metrics(
    direct, oracle, no_cov, datasets, relocation_rate_=None, exact_oracle=None, located=None
) -> dict[str, float]:
    """Chapter 01's check: both queries' metrics, the coverage term off, facts, CodiEsp's relocation and probe,
    and the located query where the chapter ran it."""
    results: dict[str, float] = {}
    for name, run in (located or {}).items():
        for m in LOCATED_METRICS:
            results[f"{name}/{LOCATED}/{m}"] = run.metrics[m]
    for name in datasets:
        for method, group in (("direct", direct), ("oracle", oracle)):
            for m in METRICS:
                results[f"{name}/{method}/{m}"] = group[name].metrics[m]
        for method in ("direct", "oracle"):
            for m in ("recall@10", "mrr"):
                results[f"{name}/{method}-wcov0/{m}"] = no_cov[(name, method)].metrics[m]
        results[f"{name}/facts"] = len(direct[name].summaries)
    if exact_oracle is not None:
        results["codiesp/relocation_rate"] = relocation_rate_
        for m in ("recall@1", "mrr"):
            results[f"codiesp/oracle-exact/{m}"] = exact_oracle.metrics[m]
    return results


def depth_figure(direct: Mapping[str, Run], oracle: Mapping[str, Run], datasets: Sequence[str]):
    """Recall at every depth 1-200, raw fact against gold query, per dataset."""
    import matplotlib.pyplot as plt
    import numpy as np

    from fhs.book.report import ORACLE_COLOR, OURS_COLOR
    from fhs.run.evaluate import recall_curve

    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.4), sharey=True, layout="constrained")
    axes = np.atleast_1d(axes)
    depth = np.arange(1, 201)
    for ax, name in zip(axes, datasets):
        for run, label, color in ((direct[name], "raw fact", OURS_COLOR), (oracle[name], "gold query", ORACLE_COLOR)):
            ax.plot(depth, recall_curve([r["rank"] for r in run.summaries]), label=label, color=color)
        ax.set_xscale("log")
        ax.set_title(direct[name].dataset)  # a spec file's name, not its path
        ax.set_xlabel("depth k")
        for k in (10, 200):
            ax.axvline(k, color="0.8", lw=0.8, zorder=0)
    axes[0].set_ylabel("Recall@k")
    axes[0].legend(loc="lower right")
    fig.suptitle("Reachable but badly placed: recall at every depth, raw fact vs gold query")
    return fig


def label_length_figure(panel_b: pd.DataFrame, datasets: Sequence[str]):
    """Raw-query Recall@10 by gold label length, with and without the coverage term."""
    import matplotlib.pyplot as plt
    import numpy as np

    from fhs.book.report import OURS_COLOR

    names = list(dict.fromkeys(panel_b["dataset"]))  # the runs' names, in the order of ``datasets``
    fig, axes = plt.subplots(1, len(names), figsize=(4.2 * len(names), 3.2), sharey=True, layout="constrained")
    axes = np.atleast_1d(axes)
    for ax, name in zip(axes, names):
        part = panel_b[panel_b["dataset"] == name]
        x = np.arange(len(part))
        ax.bar(x - 0.2, part["Recall@10, w_cov 0"], width=0.4, label="$w_{cov}=0$", color="0.7")
        ax.bar(x + 0.2, part["Recall@10, w_cov 1"], width=0.4, label="$w_{cov}=1$", color=OURS_COLOR)
        ax.set_xticks(x, part["label words"])
        ax.set_title(name)
        ax.set_xlabel("words in the gold label")
    axes[0].set_ylabel("Recall@10 (raw query)")
    axes[0].legend()
    fig.suptitle("Raw-query Recall@10 by gold label length, with and without the coverage term")
    return fig


def label_length_lines(panel_b: pd.DataFrame) -> list[str]:
    """Per dataset, where the coverage term's Recall@10 gain is largest, read from the rows on the page (the
    paper's reading, that it rescues short labels, holds on some taxonomies and not on others)."""
    lines = []
    for name in dict.fromkeys(panel_b["dataset"]):
        part = panel_b[(panel_b["dataset"] == name) & (panel_b["label words"] != "n/a")]
        if part.empty:
            continue
        best = part.loc[part["gain"].idxmax()]
        short = part[part["label words"].isin(["1", "2"])]
        short_gain = (short["gain"] * short["facts"]).sum() / short["facts"].sum() if len(short) else None
        if best["gain"] <= 0:
            lines.append(f"{name}: the coverage term raises raw-query Recall@10 at no label length.")
            continue
        words = "five or more words" if best["label words"] == "5+" else f"{best['label words']} word(s)"
        tail = (
            f"; on labels of one or two words it is {short_gain:+.3f}"
            if short_gain is not None
            else "; no gold label here has one or two words"
        )
        lines.append(
            f"{name}: the coverage term's largest Recall@10 gain is on labels of {words} "
            f"({best['gain']:+.3f}, {int(best['facts'])} facts){tail}."
        )
    return lines


def own_dataset_lines(study: Study, datasets: Sequence[str]) -> list[str]:
    """What each dataset of one's own is, in its spec's words (the prose above describes the paper's)."""
    from fhs.data.datasets import is_spec_file

    return [
        f"`{study.dataset_name(name)}`: "
        f"{markdown_literal(study.experiment(name).spec.description) or 'no description in its spec'}."
        for name in datasets
        if is_spec_file(name)
    ]
