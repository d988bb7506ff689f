"""The claims page's tables: one row per claim, the paper's figure and ours on the same line, and a tally.

The verdicts come from :mod:`fhs.book.claims`; this module only lays them out, so the page's
notebook is a few calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from fhs.book.check import load_regression
from fhs.book.claims import FAILS, HOLDS, NEEDS, TOO_FEW, Verdict

STANDINGS = (HOLDS, FAILS, TOO_FEW, NEEDS)


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _ours(verdict: Verdict) -> str:
    if verdict.ours is None:
        return "not measured"
    return f"{verdict.ours:.3f} [{verdict.low:.3f}, {verdict.high:.3f}], {verdict.facts:,} facts"


def _title(chapter: str) -> str:
    try:
        return f"{chapter[:2]} {load_regression(chapter).title}"
    except Exception:  # a chapter without a regression file is named by its stem
        return chapter


def claims_frame(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """Every claim on one row: what it says, where, the paper's figure, ours with its interval, the standing."""
    ceilings = any(v.ceilings for v in verdicts)
    rows = []
    for v in verdicts:
        compared = " − ".join(v.claim.ours) if v.claim.kind == "difference" and len(v.claim.ours) == 2 \
            else v.claim.ours[0]
        row = {"ch.": v.claim.chapter[:2], "claim": v.claim.claim, "paper §": v.claim.section,
               "compared": compared, "paper": _number(v.paper), "this build, 95% interval": _ours(v),
               "standing": f"{v.standing}: {v.detail}" if v.detail else v.standing}
        if ceilings:
            row["perfect model (ch. 9)"] = ", ".join(f"{stage} {value:.3f}" for stage, value in v.ceilings.items())
        rows.append(row)
    return pd.DataFrame(rows)


def tally(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """How many claims stand each way, per chapter and in all."""
    counts = Counter((_title(v.claim.chapter), v.standing) for v in verdicts)
    chapters = list(dict.fromkeys(_title(v.claim.chapter) for v in verdicts))
    rows = [{"chapter": chapter, **{s: counts[(chapter, s)] for s in STANDINGS}} for chapter in chapters]
    rows.append({"chapter": "all", **{s: sum(counts[(c, s)] for c in chapters) for s in STANDINGS}})
    return pd.DataFrame(rows)
