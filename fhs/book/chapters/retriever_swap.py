"""Chapter 05's tables and figures (Table 17, Appendix E.4): the dense index, the readiness gap per retriever,
direct / one-pass / FHS under each retriever, FHS's margin and each method's swap delta.

``readiness`` maps ``(dataset, retriever, method)`` to an LLM-free run and
``seeded`` maps the same keys to a method's seeded runs; margins and swap
deltas are paired per fact within each seeded run (``fhs.book.across_runs``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fhs.book.across_runs import across_differences
from fhs.book.report import Estimate
from fhs.book.study import Run, Study, over_runs
from fhs.paper import PAPER, PAPER_BENCHMARK, SWAP_DELTA_MRR, SWAP_FHS_MARGIN
from fhs.run.evaluate import paired_difference

METRICS = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr")
LLM_ROWS = ("direct", "structured", "fhs")
QUERY = {"direct": "raw fact", "oracle": "gold-query probe"}


def dense_index_rows(study: Study, datasets: Sequence[str]) -> list[dict[str, Any]]:
    """Each dataset's taxonomy embedded (or read back from ``$FHS_CACHE/dense/``): size, cache, time, matrix."""
    from fhs.retrieval.dense import DenseRetriever
    from fhs.retrieval.encoders import MODELS
    from fhs.run.inputs import cached_retriever, retrieval_config

    rows = []
    for name in datasets:
        experiment = study.experiment(name)
        spec = MODELS[study.profile.dense_model_for(experiment.taxonomy.name)]
        dense = cached_retriever(
            experiment.taxonomy, retrieval_config(experiment.spec.taxonomy, "dense"), "dense", spec.name
        )
        assert isinstance(dense, DenseRetriever)  # the kind asked for
        # a cold build's bar would print a line every half minute above the chapter's first table; the
        # table below gives the build's time, and the runner's console shows the cell running
        dense.progress = False
        dense.warm_up()
        info = dense.build_info
        rows.append(
            {
                "taxonomy": experiment.taxonomy.name,
                "concepts": len(experiment.taxonomy),
                "encoder": spec.name,
                "cache": info.get("cache"),
                "seconds": round(info.get("seconds", 0.0), 1),
                "concepts/s (build)": round(info["concepts_per_second"], 1)
                if info.get("concepts_per_second")
                else None,
                "processes (build)": info.get("processes"),  # forked one-thread encoders
                "matrix MB": round(dense.matrix.nbytes / 2**20, 1),
            }
        )
    return rows


def dense_caption(study: Study, datasets: Sequence[str]) -> str:
    from fhs.retrieval.encoders import MODELS

    taxonomies = dict.fromkeys(study.experiment(name).taxonomy.name for name in datasets)
    specs = [MODELS[study.profile.dense_model_for(taxonomy)] for taxonomy in taxonomies]
    windows = "; ".join(
        f"{taxonomy}'s concept texts cut at {spec.document_max_length or spec.max_length} word pieces"
        for taxonomy, spec in zip(taxonomies, specs)
    )
    spec = specs[0]
    return f"Concept embeddings ({spec.source}; {windows}; weights sha256 {spec.weights.sha256[:12]}…)"


def readiness_runs(
    study: Study, datasets: Sequence[str], retrievers: Sequence[str], limit: int | None = None
) -> dict[tuple[str, str, str], Run]:
    """Direct and the gold-query probe per dataset and retriever, on the full test set (or its first ``limit``).

    A dataset's runs execute together, fact by fact, so the hybrid runs find each query's dense
    vector already made, in whichever process the fact ran (``fhs.run.runner``)."""
    runs: dict[tuple[str, str, str], Run] = {}
    for name in datasets:
        facts = study.experiment(name).facts
        facts = facts if limit is None else facts[: int(limit)]
        keys = [(name, retriever, method) for retriever in retrievers for method in QUERY]
        specs = [study.spec(name, method, retriever=retriever) for _, retriever, method in keys]
        runs.update(zip(keys, study.run_all(specs, {name: facts})))
    return runs


def gap_rows(readiness: Mapping[tuple[str, str, str], Run]) -> list[dict[str, Any]]:
    """The readiness gap per retriever, the paper's BM25 rows after our BM25 ones."""
    rows = []
    for (name, retriever, method), run in readiness.items():
        rows.append(
            {
                "dataset": name,
                "retriever": retriever,
                "query": QUERY[method],
                "facts": len(run.summaries),
                **{m: run.metrics[m] for m in METRICS},
            }
        )
        if retriever == "bm25" and method == "oracle" and name in PAPER_BENCHMARK:  # a benchmark the paper ran
            benchmark = PAPER_BENCHMARK[name]
            for paper_method in QUERY:
                paper = PAPER.get(benchmark, {}).get(paper_method, {})
                rows.append(
                    {
                        "dataset": name,
                        "retriever": f"paper ({benchmark}), bm25",
                        "query": QUERY[paper_method],
                        "facts": paper.get("facts"),
                        **{m: paper.get(m) for m in METRICS},
                    }
                )
    return rows


def mean_of(group: Sequence[Run], metric: str, interval: Mapping) -> Estimate | None:
    """The mean over seeded runs ± the std across them, with the bootstrap interval of that mean."""
    if any(run.metrics.get(metric) is None for run in group):
        return None
    e = over_runs(list(group), metric, **interval)
    return Estimate(e.estimate, e.low, e.high, e.std)


def method_rows(seeded: Mapping[tuple[str, str, str], Sequence[Run]], interval: Mapping) -> list[dict[str, Any]]:
    return [
        {
            "dataset": name,
            "retriever": retriever,
            "method": method,
            **{m: mean_of(group, m, interval) for m in ("recall@1", "recall@10", "recall@200", "mrr", "accuracy")},
        }
        for (name, retriever, method), group in seeded.items()
    ]


def margins(
    seeded: Mapping[tuple[str, str, str], Sequence[Run]],
    datasets: Sequence[str],
    retrievers: Sequence[str],
    interval: Mapping,
) -> tuple[dict, list[dict[str, Any]]]:
    """FHS minus one-pass structured per retriever (MRR, Acc.), paired per fact; the paper's margin beside it."""
    found, rows = {}, []
    for name in datasets:
        for retriever in retrievers:
            fhs, one_pass = seeded[(name, retriever, "fhs")], seeded[(name, retriever, "structured")]
            row: dict[str, Any] = {"dataset": name, "retriever": retriever}
            for metric in ("mrr", "accuracy"):
                ds = [paired_difference(a.summaries, b.summaries, metric, **interval) for a, b in zip(fhs, one_pass)]
                found[(name, retriever, metric)] = row[f"Δ {metric}"] = across_differences(ds)
                if name in PAPER_BENCHMARK:  # Table 17's margin, beside the paper's datasets only
                    row[f"paper Δ {metric}"] = SWAP_FHS_MARGIN[retriever][metric]
            rows.append(row)
    return found, rows


def swap_deltas(
    seeded: Mapping[tuple[str, str, str], Sequence[Run]],
    datasets: Sequence[str],
    retrievers: Sequence[str],
    interval: Mapping,
) -> tuple[dict, list[dict[str, Any]]]:
    """Each method under dense / hybrid minus itself under BM25 (MRR, paired), the paper's delta beside it."""
    found, rows = {}, []
    for name in datasets:
        for method in LLM_ROWS:
            base = seeded[(name, "bm25", method)]
            for retriever in [r for r in retrievers if r != "bm25"]:
                d = across_differences(
                    [
                        paired_difference(a.summaries, b.summaries, "mrr", **interval)
                        for a, b in zip(seeded[(name, retriever, method)], base)
                    ]
                )
                found[(name, method, retriever)] = d
                paper = SWAP_DELTA_MRR.get(method, {}).get(retriever)
                rows.append(
                    {
                        "dataset": name,
                        "method": method,
                        "swap": f"{retriever} − bm25",
                        "Δ mrr": d,
                        **({"paper Δ mrr": Estimate(*paper) if paper else None} if name in PAPER_BENCHMARK else {}),
                    }
                )
    return found, rows


def retriever_swap_metrics(readiness, margins_found, swaps_found) -> dict[str, float]:
    """Chapter 05's check: the readiness runs' metrics, the margins and the swap deltas."""
    checked = {}
    for (name, retriever, method), run in readiness.items():
        for metric in ("recall@1", "recall@10", "recall@200", "mrr"):
            checked[f"{name}/{retriever}/{method}/{metric}"] = run.metrics[metric]
    for (name, retriever, metric), d in margins_found.items():
        checked[f"{name}/{retriever}/fhs_margin/{metric}"] = d.value
    for (name, method, retriever), d in swaps_found.items():
        checked[f"{name}/{method}/{retriever}_minus_bm25/mrr"] = d.value
    return {k: v for k, v in checked.items() if v is not None}


def readiness_figure(readiness, datasets: Sequence[str], retrievers: Sequence[str]):
    """Recall@1 of the raw fact and of the gold-query probe per retriever."""
    import matplotlib.pyplot as plt
    import numpy as np

    from fhs.book.report import ORACLE_COLOR, OURS_COLOR

    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.2), squeeze=False)
    for ax, name in zip(axes[0], datasets):
        x = np.arange(len(retrievers))
        ax.bar(
            x - 0.2,
            [readiness[(name, r, "direct")].metrics["recall@1"] for r in retrievers],
            0.4,
            color=OURS_COLOR,
            label="raw fact",
        )
        ax.bar(
            x + 0.2,
            [readiness[(name, r, "oracle")].metrics["recall@1"] for r in retrievers],
            0.4,
            color=ORACLE_COLOR,
            label="gold-query probe",
        )
        ax.set_xticks(x, retrievers)
        ax.set_ylim(0, 1.05)
        ax.set_title(name)
        ax.set_ylabel("Recall@1")
    axes[0][0].legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    return fig


def margin_figure(margins_found, datasets: Sequence[str], retrievers: Sequence[str]):
    """FHS − one-pass MRR per retriever with its interval (or ± std), the paper's margin as squares beside the
    paper's datasets."""
    import matplotlib.pyplot as plt
    import numpy as np

    from fhs.book.report import NEUTRAL_COLOR, OURS_COLOR, PAPER_COLOR

    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.2), squeeze=False)
    for ax, name in zip(axes[0], datasets):
        x = np.arange(len(retrievers))
        marks = [margins_found[(name, r, "mrr")] for r in retrievers]
        est = np.array([m.value for m in marks])
        spread = np.array(
            [[m.value - m.low, m.high - m.value] if m.low is not None else [m.std or 0.0, m.std or 0.0] for m in marks]
        ).T.clip(min=0.0)  # an interval equal to its mean but for the last bit
        ax.errorbar(x - 0.1, est, yerr=spread, fmt="o", color=OURS_COLOR, capsize=3, label="ours")
        if name in PAPER_BENCHMARK:  # no paper mark beside a dataset the paper never ran
            ax.plot(x + 0.1, [SWAP_FHS_MARGIN[r]["mrr"] for r in retrievers], "s", color=PAPER_COLOR, label="paper")
        ax.axhline(0, color=NEUTRAL_COLOR, lw=0.8)
        ax.set_xticks(x, retrievers)
        ax.set_title(name)
        ax.set_ylabel("FHS − one-pass, MRR")
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    return fig
