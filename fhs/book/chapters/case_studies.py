"""Chapter 07: Appendix G's worked examples drawn and explained, and cases from our own runs chosen by a fixed rule.

The examples' arithmetic is ``fhs.book.chapters.worked_examples`` (scored by the real
code); this module draws it and writes the sentences the page shows. The case
rule is written before any outcome is seen: per dataset and modality, the first
fact in sample order where FHS and the baseline disagree at rank 1, else the
first whose gold ranks differ (:func:`choose_case`).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fhs.book.chapters import worked_examples as W
from fhs.book.explorer import write_explorer
from fhs.paper import PAPER

PAPER_G = PAPER["appendix-g"]
VERDICT_CODE = {"support": 2, "abstain": 1, "contradict": 0}
VERDICT_COLORS = ["#c1121f", "#adb5bd", "#2d6a4f"]
MODALITIES = ("table", "text")
CASE_COLUMNS = ["dataset", "modality", "fact", "chosen because"]


def short(cid: str, n: int = 34) -> str:
    """The end of a long concept name, where US-GAAP names differ."""
    return cid if len(cid) <= n else "…" + cid[-(n - 1) :]


def example_figure(scored: W.Scored, title: str):
    """Left: the verdict grid per hypothesis. Right: S~ + beta * v̄ per candidate, in final order."""
    import matplotlib.pyplot as plt
    import numpy as np

    from fhs.book.report import NEUTRAL_COLOR, OURS_COLOR

    example = scored.example
    ids = list(scored.final.ids)
    fig, axes = plt.subplots(
        1,
        len(example.hypotheses) + 1,
        figsize=(13, 0.45 * len(ids) + 1.6),
        gridspec_kw={"width_ratios": [1] * len(example.hypotheses) + [2.2]},
        layout="constrained",
    )
    for j, (ax, verdicts, h) in enumerate(zip(axes, scored.verdicts, example.hypotheses)):
        grid = np.array([[VERDICT_CODE.get(verdicts.get(cid, {}).get(d, "abstain"), 1) for d in W.DIMS] for cid in ids])
        ax.imshow(grid, cmap=plt.matplotlib.colors.ListedColormap(VERDICT_COLORS), vmin=0, vmax=2, aspect="auto")
        ax.set_xticks(range(len(W.DIMS)), [d[:4] + ("" if h.is_resolved(d) else "*") for d in W.DIMS], fontsize=8)
        ax.set_yticks(range(len(ids)), [short(c) for c in ids] if j == 0 else [], fontsize=8)
        for i, cid in enumerate(ids):
            ax.text(len(W.DIMS) - 0.4, i, f"{scored.support[j][cid]:.3f}", va="center", fontsize=8)
        ax.set_title(f"h{j + 1} verdicts (v$_{j + 1}$ at right)", fontsize=9)
        ax.grid(False)
    ax = axes[-1]
    y = np.arange(len(ids))
    s = np.array([scored.s_tilde(c) for c in ids])
    bonus = np.array([scored.beta * scored.vbar[c] for c in ids])
    colors = [OURS_COLOR if c == example.gold else NEUTRAL_COLOR for c in ids]
    ax.barh(y, s, color=colors, alpha=0.55, label=r"$\widetilde S$")
    ax.barh(y, bonus, left=s, color=colors, label=r"$\beta\,\bar v$")
    for i, cid in enumerate(ids):
        ax.text(
            s[i] + bonus[i] + 0.01,
            i,
            f"{s[i]:.3f} + {bonus[i]:.3f} = {s[i] + bonus[i]:.3f}   (fused #{scored.rank(cid, fused=True)})",
            va="center",
            fontsize=8,
        )
    ax.set_yticks(y, [f"#{i + 1}" for i in range(len(ids))], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(s + bonus) * 1.6)
    ax.set_title(f"Eq. 3 with β = {scored.beta}: gold in blue", fontsize=9)
    for a in axes[:-1]:
        a.set_ylim(len(ids) - 0.5, -0.5)
    fig.suptitle(title)
    return fig


def rsu_numbers(rsu: W.Scored) -> dict[str, float]:
    """Example 1's quantities the page states and checks: v̄ of gold and rival, the fused lead, the verifier's gap."""
    gold, rival = rsu.example.gold, rsu.example.rival
    return {
        "vbar_gold": rsu.vbar[gold],
        "vbar_rival": rsu.vbar[rival],
        "lead": rsu.s_tilde(rival) - rsu.s_tilde(gold),
        "gap": rsu.beta * (rsu.vbar[gold] - rsu.vbar[rival]),
        "gold_rank": rsu.rank(gold),
    }


def rsu_text(rsu: W.Scored) -> str:
    gold, rival = rsu.example.gold, rsu.example.rival
    n = rsu_numbers(rsu)
    return (
        f"Under h1 the gold gets $v_1 = {rsu.support[0][gold]:.3f}$ and the options concept "
        f"$v_1 = {rsu.support[0][rival]:.3f}$; under h2 both get {rsu.support[1][gold]:.3f}. So "
        f"$\\bar v = {rsu.vbar[gold]:.3f}$ against ${rsu.vbar[rival]:.3f}$ "
        f"(paper: {PAPER_G['rsu']['vbar_gold']:.3f} "
        f"vs {PAPER_G['rsu']['vbar_rival']:.3f}), and $\\beta(\\bar v_{{gold}} - \\bar v_{{options}}) = "
        f"{rsu.beta} \\times {rsu.vbar[gold] - rsu.vbar[rival]:.3f} = {n['gap']:.3f}$, more than the options "
        f"concept's fused lead of {n['lead']:.3f} (paper: {PAPER_G['rsu']['gap']:.3f} > "
        f"{PAPER_G['rsu']['lead']:.3f}). The gold moves from fused rank {rsu.rank(gold, fused=True)} to rank "
        f"{rsu.rank(gold)}."
    )


def securitization_text(paper: W.Scored, strict: W.Scored) -> str:
    cap = paper.example.gold
    return (
        f"With abstentions excluded: $v_1 = {paper.support[0][cap]:.3f}$, $v_2 = {paper.support[1][cap]:.3f}$, "
        f"$\\bar v = {paper.vbar[cap]:.3f}$ (paper: {PAPER_G['securitization']['vbar_paper']}). "
        f"Abstain-as-non-support: $v_1 = {strict.support[0][cap]:.3f}$, $v_2 = {strict.support[1][cap]:.3f}$, "
        f"$\\bar v = {strict.vbar[cap]:.3f}$ (paper: {PAPER_G['securitization']['vbar_strict']}). Either way the "
        f"three borrowing-capacity concepts rise above the facility concepts "
        f"({', '.join(short(c, 40) for c in paper.final.ids[:3])}); "
        f"the fused score, not the verifier, orders them within the family."
    )


def choose_case(fhs_records: Sequence[Mapping], base_records: Sequence[Mapping], modality: str) -> tuple[Any, str]:
    """The rule above: first rank-1 disagreement in sample order, else first rank difference."""

    def at_one(record):
        return record.get("rank") == 1

    base = {r["id"]: r for r in base_records}
    pairs = [(r, base[r["id"]]) for r in fhs_records if r["modality"] == modality and r["id"] in base]
    for f, b in pairs:
        if at_one(f) != at_one(b):
            return f["id"], "disagree at rank 1"
    for f, b in pairs:
        if f.get("rank") != b.get("rank"):
            return f["id"], "gold ranks differ"
    return None, "no difference"


def choose_cases(
    order: Mapping[str, Sequence[str]],
    fhs_records: Mapping[str, Sequence[Mapping]],
    base_records: Mapping[str, Sequence[Mapping]],
) -> list[dict[str, Any]]:
    """One case per dataset and modality that has one; ``order`` is each dataset's fact ids in sample order."""
    cases = []
    for name, ids in order.items():
        ordered = sorted(fhs_records[name], key=lambda r: list(ids).index(r["id"]))
        for modality in MODALITIES:
            fact_id, why = choose_case(ordered, base_records[name], modality)
            if fact_id is not None:
                cases.append({"dataset": name, "modality": modality, "fact": fact_id, "chosen because": why})
    return cases


def gold_rank_cell(record: Mapping | None) -> str:
    """Table 25's cell: the gold's rank ("—" outside the top 200), ✓ / ✗ for the selector's pick where it ran."""
    if record is None:
        return "not run"
    rank = record.get("rank")
    mark = "" if "correct" not in record else (" ✓" if record["correct"] else " ✗")
    return (str(rank) if rank is not None else "—") + mark


def gold_rank_table(
    cases: Sequence[Mapping], records: Mapping[tuple[str, str], Sequence[Mapping]], methods: Sequence[str]
) -> list[dict[str, Any]]:
    """One row per case: each method's gold rank on that fact (``records`` keyed by (dataset, method))."""
    rows = []
    for case in cases:
        row = {"dataset": case["dataset"], "modality": case["modality"], "fact": case["fact"]}
        for method in methods:
            by_id = {r["id"]: r for r in records[(case["dataset"], method)]}
            row[method] = gold_rank_cell(by_id.get(case["fact"]))
        rows.append(row)
    return rows


def frame_or_empty(rows: Sequence[Mapping], columns: Sequence[str]) -> pd.DataFrame:
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=list(columns))


def case_page(case: Mapping, paths: Sequence[Path], static: Path, data=None) -> Path:
    """The explorer page (``fhs show``) of one case, FHS first, saved under ``static``."""
    out = static / f"{case['dataset']}-{case['modality']}.html"
    write_explorer(
        list(paths),
        [case["fact"]],
        out,
        data=data,
        title=f"Case: {case['dataset']} {case['modality']} fact {case['fact']}",
    )
    return out


def embedded(page: Path) -> str:
    """A saved page inside an iframe of the book's page."""
    return (
        f'<div><iframe srcdoc="{html.escape(page.read_text(encoding="utf-8"))}" '
        'style="width:100%;height:720px;border:1px solid #ccc"></iframe></div>'
    )


def case_study_metrics(
    rsu: W.Scored,
    securitization: W.Scored,
    strict: W.Scored,
    cases: Sequence[Mapping],
    pages: int,
    table25: Sequence[Mapping],
    baseline: str,
) -> dict[str, float]:
    """Chapter 07's check: the worked examples' numbers and how many cases the rule found and FHS won."""
    cap = securitization.example.gold
    return {
        **{f"appendix-g/rsu/{k}": v for k, v in rsu_numbers(rsu).items()},
        "appendix-g/securitization/vbar_paper": securitization.vbar[cap],
        "appendix-g/securitization/vbar_strict": strict.vbar[cap],
        "cases/count": len(cases),
        "cases/pages": pages,
        "cases/fhs_at_rank1": sum(row["fhs"].split(" ")[0] == "1" for row in table25),
        f"cases/{baseline}_at_rank1": sum(row[baseline].split(" ")[0] == "1" for row in table25),
    }


def paper_mismatches(checked: Mapping[str, float]) -> list[str]:
    """Worked-example values that differ from the paper's printed ones at its precision (none on any profile)."""
    wrong = []
    for name, value in checked.items():
        if name.startswith("appendix-g/"):
            _, example, metric = name.split("/")
            if round(value, 3) != PAPER_G[example][metric]:
                wrong.append(f"{name}: {value:.3f} vs the paper's {PAPER_G[example][metric]}")
    return wrong
