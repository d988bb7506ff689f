"""Chapter 04's tables and figure: Table 15's panels, Appendix E.2's window statistics, the abstain
convention re-scored, and Tables 26-28's arm without the verifier; every number from FHS records.

The verdict statistics pool the verifier calls of every seeded run
(``fhs.run.tables.verdict_stats``); re-scorings (``fhs.run.rescore``) are computed
per run and shown as the mean ± the std across runs (``fhs.book.across_runs``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from fhs.book.across_runs import across, across_differences, across_reported
from fhs.book.study import Run
from fhs.paper import PAPER_BENCHMARK, VERIFIER
from fhs.run.evaluate import metrics, paired_difference
from fhs.run.rescore import rescore, rescored_vbar
from fhs.run.tables.verdict_stats import VERDICTS

SCORINGS = ("paper", "code", "strict")
LEAD_STATS = ("gold_in_window", "dimensions_resolved")  # the window statistics the paper gives a figure for


def panel_frame(panels: Mapping[str, Mapping[str, Mapping[str, Any]]]) -> pd.DataFrame:
    """One row per dataset and group of a Table 15 panel (``panel_a`` or ``panel_b`` per dataset)."""
    return pd.concat(
        [
            pd.DataFrame([{"dataset": name, "group": group, **values} for group, values in panel.items()])
            for name, panel in panels.items()
        ]
    )


def window_frame(stats: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """Appendix E.2's window statistics per dataset, with the paper's FinTagging row below when a dataset of the
    page stands for that benchmark (another dataset has no paper value to sit beside)."""
    paper: list[dict[str, Any]] = [
        {
            "dataset": "paper (FinTagging)",
            "calls": VERIFIER["calls"],
            "gold_in_window": VERIFIER["gold_in_window"],
            "dimensions_resolved": VERIFIER["dimensions_resolved"],
        }
    ]
    return pd.DataFrame(
        [{"dataset": name, **s} for name, s in stats.items()]
        + (paper if any(PAPER_BENCHMARK.get(name) == "fintagging" for name in stats) else [])
    )


def folded_tables(runs: Mapping[str, Any]) -> list[str]:
    """The tables a CPU model's few facts fold, by name; the CodiEsp arms only where CodiEsp ran."""
    return ["Table 15", "the window", "the abstain convention", *(["the CodiEsp arms"] if "codiesp" in runs else [])]


def lead_frame(stats: Mapping[str, Mapping[str, float]]) -> pd.DataFrame:
    """The page's lead: per dataset, the window statistics Appendix E.2 reports, ours and the paper's on one row
    (the paper's only beside a dataset that stands for its FinTagging benchmark)."""
    from fhs.book.report import ours_vs_paper

    frames = []
    for name, values in stats.items():
        paper = VERIFIER if PAPER_BENCHMARK.get(name) == "fintagging" else {}
        frame = ours_vs_paper(
            {key: values.get(key) for key in LEAD_STATS}, {key: paper.get(key) for key in LEAD_STATS}, label="quantity"
        )
        frame.insert(0, "dataset", name)
        frame["verifier calls"] = values.get("calls")
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def abstain_rows(
    seeded: Mapping[str, Sequence[Run]], dims: Mapping[str, Sequence[str]], interval: Mapping, beta: float = 0.6
) -> list[dict[str, Any]]:
    """Each run re-scored under each abstain convention (zero model calls): R@1, MRR, Δ MRR against ``paper``."""
    rows, per_scoring = [], {}
    for name, group in seeded.items():
        for scoring in SCORINGS:
            per_run = [
                [rescore(r, beta=beta, vbar=rescored_vbar(r, dims[name], scoring)) for r in run.records]
                for run in group
            ]
            per_scoring[(name, scoring)] = per_run
            values = [metrics(records) for records in per_run]
            row = {
                "dataset": name,
                "scoring": scoring,
                "recall@1": across([v["recall@1"] for v in values]),
                "mrr": across([v["mrr"] for v in values]),
            }
            if scoring != "paper":
                row["Δ MRR vs paper"] = across_differences(
                    [
                        paired_difference(records, base, "mrr", **interval)
                        for records, base in zip(per_run, per_scoring[(name, "paper")])
                    ]
                )
            rows.append(row)
    return rows


def arms_frame(with_verifier: Sequence[Run], without: Sequence[Run]) -> list[dict[str, Any]]:
    """FHS and its β = 0 arm on the same sample: R@1, MRR and Acc. over the seeded runs."""
    rows = []
    for label, group in (("FHS", with_verifier), ("− verifier (β = 0)", without)):
        accuracy = [run.metrics.get("accuracy") for run in group]
        rows.append(
            {
                "arm": label,
                "recall@1": across([run.metrics["recall@1"] for run in group]),
                "mrr": across([run.metrics["mrr"] for run in group]),
                "accuracy": across_reported(accuracy),
            }
        )
    return rows


def verifier_metrics(stats, panels_a, panels_b, abstain, arms) -> dict[str, float]:
    """What chapter 04's closing check compares (values the page could not compute are left out)."""
    checked: dict[str, Any] = {}
    if arms:
        checked = {
            "codiesp/no_verifier/mrr": arms[1]["mrr"].value,
            "codiesp/no_verifier/accuracy": arms[1]["accuracy"].value if arms[1]["accuracy"] else None,
        }
    for name in stats:
        checked[f"{name}/verifier/calls"] = stats[name]["calls"]
        checked[f"{name}/verifier/gold_in_window"] = stats[name]["gold_in_window"]
        checked[f"{name}/verifier/dimensions_resolved"] = stats[name]["dimensions_resolved"]
        for group, values in panels_a[name].items():
            checked[f"{name}/panel_a/{group}/support"] = values["all"]
        for group, values in panels_b[name].items():
            checked[f"{name}/panel_b/{group.split()[0]}/support"] = values["all"]
        for row in abstain:
            if row["dataset"] == name:
                checked[f"{name}/abstain/{row['scoring']}/mrr"] = row["mrr"].value
    return {k: v for k, v in checked.items() if v is not None}


def shares_figure(shares: Mapping[str, Mapping[str, Mapping[str, float]]]):
    """Stacked bars: per dataset and dimension, the share of support, contradict and abstain verdicts."""
    import matplotlib.pyplot as plt
    import numpy as np

    from fhs.book.report import NEUTRAL_COLOR, OURS_COLOR, PAPER_COLOR

    fig, axes = plt.subplots(1, len(shares), figsize=(5 * len(shares), 3.2), layout="constrained", squeeze=False)
    for ax, (name, by_dim) in zip(axes[0], shares.items()):
        left = np.zeros(len(by_dim))
        for verdict, color in zip(VERDICTS, (OURS_COLOR, PAPER_COLOR, NEUTRAL_COLOR)):
            values = np.array([by_dim[d][verdict] for d in by_dim])
            ax.barh(list(by_dim), values, left=left, color=color, label=verdict)
            left += values
        ax.set_xlim(0, 1)
        ax.set_title(name)
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.suptitle("Share of verdicts per dimension")
    return fig
