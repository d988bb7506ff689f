"""Chapter 09's tables and figure: what FHS reaches when a perfect model answers its stages.

Every FHS run here uses the oracle model (``fhs.llm.oracle``): no model call,
no GPU. One run without noise gives the three stage ceilings from one record per fact:
the fused pool (perfect hypotheses only: Eq. 3 with beta 0 is the pool's order), the
final order (+ a perfect verifier) and the selector's pick (+ a perfect selector, the
"Acc." column). Runs at each noise level, selector off, give the curves. Direct retrieval
and the gold-query probe run on the same facts (LLM-free). The oracle runs at the
``paper`` profile's budgets and sample sizes whatever the book's profile: it costs
minutes, not GPU days.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fhs.book.report import Estimate
from fhs.book.study import Run, Study
from fhs.data.facts import Fact
from fhs.data.sampling import sample_by_context
from fhs.llm.backends import ORACLE
from fhs.paper import PAPER, PAPER_BENCHMARK
from fhs.run.evaluate import gold_rank, metric_interval, record_value
from fhs.run.inputs import ModelChoice
from fhs.run.profiles import get_profile

ORACLE_PROFILE = "paper"
HYPOTHESIS_NOISE = (0.25, 0.5, 0.75, 0.9, 1.0)
VERDICT_NOISE = (0.1, 0.25, 0.5, 1.0)
METRICS = ("recall@1", "recall@10", "recall@200", "mrr")
STAGES = {
    "pool_rank": "perfect hypotheses only (fused pool)",
    "rank": "+ perfect verifier (Eq. 3)",
    "correct": "+ perfect selector (Acc.)",
}


def oracle_facts(study: Study, dataset: str) -> list[Fact]:
    """The facts the ``paper`` profile sends to a model: FinCL and CodiEsp whole, the iXBRL sample, a spec's all."""
    every = study.experiment(dataset).facts
    return sample_by_context(
        every, get_profile(ORACLE_PROFILE).llm_sample_size(study.dataset_name(dataset), len(every))
    )


def noise(hypotheses: float = 0.0, verdicts: float = 0.0) -> str:
    return f"hypotheses={hypotheses:g},verdicts={verdicts:g}"


def oracle_runs(
    study: Study,
    datasets: Sequence[str],
    facts: Mapping[str, Sequence[Fact]],
    hypothesis_noise: Sequence[float] = HYPOTHESIS_NOISE,
    verdict_noise: Sequence[float] = VERDICT_NOISE,
    seed: int = 0,
) -> dict[tuple[str, str, float], Run]:
    """``(dataset, "hypotheses" | "verdicts", level) -> Run``; level 0 of both is the one noiseless run,
    whose selector is on (the noisy runs leave it off: only the ceiling table reads it)."""
    keys, specs = [], []
    for name in datasets:
        for kind, levels in (("hypotheses", hypothesis_noise), ("verdicts", verdict_noise)):
            for level in levels:
                if level == 0:
                    continue
                choice = ModelChoice.resolve(
                    ORACLE_PROFILE, backend=ORACLE, seed=seed, oracle_noise=noise(**{kind: level})
                )
                keys.append((name, kind, float(level)))
                specs.append(replace(study.spec(name, "fhs", choice), selector=False))
        keys.append((name, "none", 0.0))
        specs.append(study.spec(name, "fhs", ModelChoice.resolve(ORACLE_PROFILE, backend=ORACLE, seed=seed)))
    runs = dict(zip(keys, study.run_all(specs, {name: facts[name] for name in datasets}, workers=1)))
    for name in datasets:
        runs[(name, "hypotheses", 0.0)] = runs[(name, "verdicts", 0.0)] = runs.pop((name, "none", 0.0))
    return runs


def stage_rows(run: Run) -> list[dict[str, Any]]:
    """Per fact: its context, the gold's rank in the fused pool and in the final order, the selector's verdict,
    the seconds the method took on it."""
    rows = []
    for summary, record in zip(run.summaries, run.iter_records(("pool", "wall_seconds"))):
        rank = gold_rank((record.get("pool") or {}).get("ids", []), summary["gold"], summary.get("gold_match", "exact"))
        row = {
            "context_id": summary["context_id"],
            "rank": summary.get("rank"),
            "pool_rank": rank,
            "seconds": record.get("wall_seconds", 0.0),
        }  # the fact's time when its record was written
        if "correct" in summary:
            row["correct"] = summary["correct"]
        rows.append(row)
    return rows


def value(rows: Sequence[Mapping], metric: str, rank_key: str = "rank") -> float:
    return float(np.mean([record_value(r, metric, rank_key) for r in rows])) if rows else float("nan")


def estimate(rows: Sequence[Mapping], metric: str, interval: Mapping, rank_key: str = "rank") -> Estimate:
    ci = metric_interval(rows, metric, rank_key=rank_key, **interval)
    return Estimate(ci.estimate, ci.low, ci.high)


def ceiling_caption(labels: Iterable[str]) -> str:
    """The ceiling table's caption; it names the paper's FHS row only where one of the datasets has it."""
    paper = any(label in PAPER_BENCHMARK for label in labels)
    return "Stage ceilings of FHS beside direct retrieval" + (
        ", the gold-query probe and the paper's FHS" if paper else " and the gold-query probe"
    )


def ceiling_table(
    study: Study,
    datasets: Sequence[str],
    baselines: Mapping[tuple[str, str], Run],
    stages: Mapping[str, Sequence[Mapping]],
    interval: Mapping,
) -> pd.DataFrame:
    """Per dataset: direct retrieval, the gold-query probe, the three stage ceilings, the paper's FHS row."""
    frame = []
    for name in datasets:
        label = study.dataset_name(name)
        for method, title in (("direct", "direct retrieval"), ("oracle", "gold-query probe")):
            run = baselines[(name, method)]
            frame.append(
                {
                    "dataset": label,
                    "row": title,
                    "facts": len(run.summaries),
                    **{m: estimate(run.summaries, m, interval) for m in METRICS},
                }
            )
        rows = stages[name]
        for key, title in STAGES.items():
            row: dict[str, Any] = {"dataset": label, "row": title, "facts": len(rows)}
            if key == "correct":
                row["accuracy"] = estimate(rows, "accuracy", interval)
            else:
                row.update({m: estimate(rows, m, interval, rank_key=key) for m in METRICS})
            frame.append(row)
        benchmark = PAPER_BENCHMARK.get(label)
        if benchmark:
            paper = PAPER[benchmark]["fhs"]
            frame.append(
                {
                    "dataset": label,
                    "row": f"FHS, Qwen3-32B (paper, {benchmark})",
                    "facts": paper.get("facts"),
                    **{m: paper.get(m) for m in (*METRICS, "accuracy")},
                }
            )
    return pd.DataFrame(frame)


def curves(rows_by_run: Mapping[tuple[str, str, float], Sequence[Mapping]], dataset: str, kind: str) -> pd.DataFrame:
    """One row per noise level of ``kind``: R@1 and MRR after Eq. 3 and of the fused pool alone
    (``rows_by_run``: :func:`stage_rows` of each of :func:`oracle_runs`)."""
    levels = sorted(level for (name, k, level) in rows_by_run if name == dataset and k == kind)
    out = []
    for level in levels:
        rows = rows_by_run[(dataset, kind, level)]
        out.append(
            {
                "noise": level,
                **{f"{m}": value(rows, m) for m in ("recall@1", "mrr")},
                **{f"{m}, pool": value(rows, m, "pool_rank") for m in ("recall@1", "mrr")},
            }
        )
    return pd.DataFrame(out)


def crossing(levels: Sequence[float], values: Sequence[float], baseline: float) -> float | None:
    """The first noise level at which ``values`` fall to ``baseline`` (linear between measured levels);
    None if they stay above it, 0 if they start at or below it."""
    if values[0] <= baseline:
        return 0.0
    for (x0, y0), (x1, y1) in zip(zip(levels, values), zip(levels[1:], values[1:])):
        if y1 <= baseline:
            return x0 + (x1 - x0) * (y0 - baseline) / (y0 - y1)
    return None


def crossing_rows(
    curve_frames: Mapping[tuple[str, str], pd.DataFrame], direct: Mapping[str, Mapping[str, float]]
) -> pd.DataFrame:
    """Per dataset, noise kind and metric: the level at which FHS (and the fused pool alone) fall to direct;
    under verdict noise, also the level at which the verifier stops helping (FHS falls to its own fused pool,
    which verdicts do not change)."""
    rows = []
    for (name, kind), frame in curve_frames.items():
        levels = list(frame["noise"])
        for metric in ("recall@1", "mrr"):
            base, pool = direct[name][metric], list(frame[f"{metric}, pool"])
            rows.append(
                {
                    "dataset": name,
                    "noise on": kind,
                    "metric": metric,
                    "direct": base,
                    "FHS falls to direct at": crossing(levels, list(frame[metric]), base),
                    "fused pool alone falls at": crossing(levels, pool, base) if kind == "hypotheses" else None,
                    "verifier stops helping at": crossing(levels, list(frame[metric]), pool[0])
                    if kind == "verdicts"
                    else None,
                }
            )
    return pd.DataFrame(rows)


def ceiling_lines(
    labels: Mapping[str, str], stages: Mapping[str, Sequence[Mapping]], baselines: Mapping[tuple[str, str], Run]
) -> list[str]:
    """One sentence per dataset: the pool's, the verifier's and the selector's ceiling against the probe."""
    lines = []
    for name, label in labels.items():
        rows = stages[name]
        lines.append(
            f"- {label}: perfect hypotheses put the gold first for {value(rows, 'recall@1', 'pool_rank'):.1%} "
            f"of facts against the probe's {baselines[(name, 'oracle')].metrics['recall@1']:.1%}; a perfect "
            f"verifier lifts that to {value(rows, 'recall@1'):.1%} and a perfect selector reaches "
            f"{value(rows, 'accuracy'):.1%} (the gold is in the top 200 for {value(rows, 'recall@200'):.1%})."
        )
    return lines


def crossing_lines(crossings: pd.DataFrame) -> list[str]:
    """One sentence per dataset: where Recall@1 falls to direct retrieval's under hypothesis noise, and where
    the verifier stops helping under verdict noise."""

    def level(x: float | None, name: str) -> str:
        return "no level measured" if x is None or pd.isna(x) else f"{name} = {x:.2f}"

    recall = crossings[crossings["metric"] == "recall@1"]
    lines = []
    for dataset in dict.fromkeys(recall["dataset"]):
        mine = recall[recall["dataset"] == dataset].set_index("noise on")
        h, v = mine.loc["hypotheses"], mine.loc["verdicts"]
        lines.append(
            f"- {dataset}: with perfect verdicts, FHS's Recall@1 falls to direct retrieval's "
            f"({h['direct']:.3f}) at {level(h['FHS falls to direct at'], 'P')}, the fused pool alone at "
            f"{level(h['fused pool alone falls at'], 'P')}; with perfect hypotheses, the verifier stops "
            f"helping (FHS falls below its own fused pool) at {level(v['verifier stops helping at'], 'Q')}."
        )
    return lines


def noise_figure(
    curve_frames: Mapping[tuple[str, str], pd.DataFrame],
    direct: Mapping[str, Mapping[str, float]],
    datasets: Sequence[str],
) -> plt.Figure:
    """Recall@1 and MRR against hypothesis noise (top) and verdict noise (bottom), direct retrieval as dashed
    lines, the fused pool alone dotted (a line under verdict noise, which does not change it)."""
    fig, axes = plt.subplots(2, len(datasets), figsize=(3.4 * len(datasets), 5.6), squeeze=False, sharey=True)
    for col, name in enumerate(datasets):
        for row, kind in enumerate(("hypotheses", "verdicts")):
            ax, frame = axes[row][col], curve_frames[(name, kind)]
            for metric, colour in (("recall@1", "C0"), ("mrr", "C1")):
                ax.plot(frame["noise"], frame[metric], "o-", color=colour, label=f"FHS {metric}")
                if kind == "hypotheses":
                    ax.plot(
                        frame["noise"],
                        frame[f"{metric}, pool"],
                        "o:",
                        color=colour,
                        alpha=0.6,
                        label=f"fused pool {metric}",
                    )
                else:  # verdicts leave the pool as it is: below this line the verifier costs more than it adds
                    ax.axhline(frame[f"{metric}, pool"].iloc[0], color=colour, ls=":", lw=1, alpha=0.6)
                ax.axhline(direct[name][metric], color=colour, ls="--", lw=1, label=f"direct {metric}")
            ax.set_title(name if row == 0 else "")
            ax.set_xlabel(f"{kind} noise ({'P' if kind == 'hypotheses' else 'Q'})")
            ax.set_ylim(0, 1)
        axes[0][0].set_ylabel("hypotheses noisy\n(verdicts perfect)")
        axes[1][0].set_ylabel("verdicts noisy\n(hypotheses perfect)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


def stage_ceiling_metrics(
    labels: Mapping[str, str],
    stages: Mapping[str, Sequence[Mapping]],
    baselines: Mapping[tuple[str, str], Run],
    curve_frames: Mapping[tuple[str, str], pd.DataFrame],
) -> dict[str, float]:
    """Chapter 09's check under each dataset's name (``labels``: parameter -> name): facts, the ceilings,
    direct and the probe on the same facts, the curves at the default noise levels (others are shown only)."""
    results: dict[str, float] = {}
    defaults = {"hypotheses": HYPOTHESIS_NOISE, "verdicts": VERDICT_NOISE}
    for name, label in labels.items():
        rows = stages[name]
        results[f"{label}/facts"] = len(rows)
        for method in ("direct", "oracle"):
            for m in ("recall@1", "mrr"):
                results[f"{label}/{method}/{m}"] = baselines[(name, method)].metrics[m]
        for m in METRICS:
            results[f"{label}/pool/{m}"] = value(rows, m, "pool_rank")
            results[f"{label}/verified/{m}"] = value(rows, m)
        results[f"{label}/selected/accuracy"] = value(rows, "accuracy")
        for kind in ("hypotheses", "verdicts"):
            frame = curve_frames[(label, kind)]
            for level, r1, mrr in zip(frame["noise"], frame["recall@1"], frame["mrr"]):
                if level in defaults[kind]:
                    results[f"{label}/{kind}-{level:g}/recall@1"] = r1
                    results[f"{label}/{kind}-{level:g}/mrr"] = mrr
    return results
