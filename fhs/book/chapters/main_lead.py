"""Chapter 02's lead: what the profile establishes, before the sampled rows.

Under a profile whose model runs in process on the CPU (``smoke``, ``cpu``) the LLM rows rest on a
handful of facts; the page then opens with the rows it measures on every test fact (direct retrieval,
the gold-query probe, chapter 9's perfect-model stages), each metric on one row beside the paper's
figure, and folds the sampled rows into one block (``fhs.book.fold``) under a line saying what ran.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import pandas as pd

from fhs.book.chapters.main_results import (
    Results,
    beside_paper,
    cost_table,
    dash,
    main_caption,
    main_table,
    paper_evaluated,
    shown_name,
    verdict_share_row,
)
from fhs.book.check import load_regression, results_path
from fhs.book.claims import newcombe, wilson
from fhs.book.fold import show_folded
from fhs.book.report import Estimate, show, show_notes
from fhs.book.study import Run
from fhs.llm.backends import backend_named
from fhs.paper import paper_value

HEAD_METRICS = ("recall@1", "mrr", "recall@50")  # the paper's claims: position at the head, reach at depth
SELECTOR_AND_WALL = ("wall s / fact", "parse failures / fact", "answers cut / fact")
CEILING_STAGES = {"pool": "perfect pool (ch. 9)", "verified": "+ perfect verifier"}  # chapter 9, no LLM


def protocol_run(backend: str) -> bool:
    """Whether the model ran in process on the CPU (the smoke and cpu profiles): its handful of facts
    tests the protocol end to end, and its rows cannot carry the paper's comparisons."""
    return backend_named(backend).cpu_engine


def ceiling_values(profile: str, runs_dir: str) -> dict[str, float]:
    """Chapter 9's values: the saved results of its last run under ``profile``, else its recorded ones."""
    saved = results_path("09_stage_ceilings", profile, runs_dir)
    if saved.is_file():
        return json.loads(saved.read_text(encoding="utf-8"))
    return {name: e.value for name, e in load_regression("09_stage_ceilings").expected_for(profile).items()}


def full_scale_table(
    full: Mapping[tuple[str, str], Run],
    ceilings: Mapping[str, float],
    datasets: Sequence[str],
    shown: Mapping[str, str],
    interval: Mapping,
) -> pd.DataFrame:
    """What this profile measures on every test fact, beside the paper: direct retrieval and the gold-query
    probe (this page's runs, bootstrap intervals), chapter 9's perfect-model stages (Wilson intervals from
    their recorded means) and, on the paper's datasets, the paper's FHS for scale."""
    rows = []
    for name in datasets:
        for method, label in (("direct", "direct"), ("oracle", "probe")):
            run = full[(name, method)]
            ours = {m: _estimate(run, m, interval) for m in HEAD_METRICS}
            rows += beside_paper(
                shown[name], label, len(run.summaries), ours, {m: paper_value(name, method, m) for m in HEAD_METRICS}
            )
        n = ceilings.get(f"{shown[name]}/facts")
        for stage, label in CEILING_STAGES.items():
            found = {m: ceilings.get(f"{shown[name]}/{stage}/{m}") for m in HEAD_METRICS}
            ours = {m: Estimate(v, *wilson(v, int(n))) for m, v in found.items() if v is not None and n}
            rows += beside_paper(shown[name], label, int(n or 0), ours, {})
        if paper_evaluated(name):
            rows += beside_paper(
                shown[name],
                "FHS (paper)",
                dash(paper_value(name, "fhs", "facts")),
                {m: None for m in HEAD_METRICS},
                {m: paper_value(name, "fhs", m) for m in HEAD_METRICS},
            )
    return pd.DataFrame(rows)


def _estimate(run: Run, metric: str, interval: Mapping) -> Estimate | None:
    value = run.metrics.get(metric)
    if value is None:
        return None
    ci = run.interval(metric, **interval)
    return Estimate(value, ci.low, ci.high)


def protocol_summary(results: Results, cost: pd.DataFrame, sizes: Mapping[str, int], shown: Mapping[str, str]) -> str:
    """The folded block's one line: every method ran end to end on how many facts, at what cost."""
    facts = ", ".join(f"{shown[name]} {n}" for name, n in sizes.items())
    calls = float(((cost["calls / fact"] + cost["selector calls / fact"]) * _facts(cost, sizes, shown)).sum())
    tokens = float(
        (
            (cost["tokens in / fact"] + cost["tokens out / fact"] + cost["selector tokens in / fact"])
            * _facts(cost, sizes, shown)
        ).sum()
    )
    seconds = float((cost["wall s / fact"] * _facts(cost, sizes, shown)).sum())
    methods = len({method for _, method in results})
    return (
        f"Every method ({methods}) ran end to end on {facts} facts: {calls:,.0f} model calls, "
        f"{tokens:,.0f} tokens, {seconds / 60:.1f} min when first run. Open for every row, the cost "
        "table and the verifier's verdicts."
    )


def _facts(cost: pd.DataFrame, sizes: Mapping[str, int], shown: Mapping[str, str]) -> pd.Series:
    per_name = {shown[name]: n for name, n in sizes.items()}
    return cost["dataset"].map(per_name).fillna(0)


def too_few_line(sizes: Mapping[str, int], shown: Mapping[str, str], what: str) -> str:
    """One sentence in place of a table the sampled facts cannot carry: how wide a paired 95% interval
    of two methods tied at one half would be on them (Newcombe's), which no margin of the paper's reaches."""
    n = min(sizes.values())
    low, high = newcombe(0.5, 0.5, max(n, 1))
    facts = ", ".join(f"{shown[name]} {size}" for name, size in sizes.items())
    return (
        f"{what} are left out on this profile: on {facts} facts a difference between two methods has a "
        f"95% interval about ±{(high - low) / 2:.2f} wide, wider than any margin the paper reports. "
        "They are drawn under the paper and gpu-sample profiles; the claims page says how many facts "
        "each comparison needs."
    )


def sampled_tables(
    results: Results,
    oracle: Mapping[str, Run],
    datasets: Sequence[str],
    methods: Sequence[str],
    interval: Mapping,
    runs: int,
    dimensions: Mapping[str, Sequence[str]],
    model: str,
    backend: str,
) -> dict[str, tuple[pd.DataFrame, str]]:
    """The sampled rows' three tables with their captions: Tables 4 and 5, Table 19, the verdict shares."""
    shares = pd.DataFrame(
        [
            verdict_share_row(shown_name(results, name), results[(name, "fhs")][0].records, dimensions[name])
            for name in datasets
        ]
    )
    return {
        "main": (main_table(results, oracle, datasets, methods, interval), main_caption(results, runs)),
        "cost": (cost_table(results, datasets, methods), f"Table 19: cost per fact with {model} ({backend})"),
        "shares": (shares, "Share of the verifier's dimension verdicts (first run)"),
    }


def cost_parts(cost: pd.DataFrame, caption: str) -> list[tuple[pd.DataFrame, str]]:
    """Table 19 as two tables that fit a 1280-pixel page: the method's own calls, then the selector's and the
    whole method's (wall time, parse failures, cut answers)."""
    keys = ["dataset", "method"]
    later = [c for c in cost.columns if c.startswith("selector") or c in SELECTOR_AND_WALL]
    own = [c for c in cost.columns if c not in later and c not in keys]
    return [
        (cost[keys + own], f"{caption}: the method's own calls"),
        (cost[keys + later], f"{caption}: the shared selector's calls and the whole method"),
    ]


def show_cost(table: tuple[pd.DataFrame, str]) -> None:
    """Table 19 in its two parts (:func:`cost_parts`)."""
    for frame, caption in cost_parts(*table):
        show(frame, caption=caption)


def show_sampled(
    protocol: bool, summary: str, tables: Mapping[str, tuple[pd.DataFrame, str]], notes: Sequence[str]
) -> None:
    """Tables 4 and 5 with their notes as the page's table, or every sampled table folded under ``summary``."""
    if protocol:
        parts = [part for key, table in tables.items() for part in (cost_parts(*table) if key == "cost" else [table])]
        show_folded(summary, parts, notes)
    else:
        show(*tables["main"])
        show_notes(notes)


def show_viewer(protocol: bool, tables: Sequence[tuple[pd.DataFrame, str]], line: str) -> None:
    """The one-fact viewer: folded under its rank line when the fact comes from a protocol sample."""
    if protocol:
        show_folded(f"One fact of the sample, stage by stage: {line.strip()}", tables)
        return
    for frame, caption in tables:
        show(frame, caption=caption)
    print(line)
