"""The claims page's tables: one row per claim, the paper's figure and ours on the same line, and a tally.

The verdicts come from :mod:`fhs.book.claims`; this module only lays them out (four narrow columns,
so a table fits a 1280-pixel page), so the page's notebook is a few calls.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pandas as pd

from fhs.book.check import load_regression
from fhs.book.claims import FAILS, HOLDS, NEEDS, TOO_FEW, Verdict, split_ref
from fhs.core.errors import InputError

STANDINGS = (HOLDS, FAILS, TOO_FEW, NEEDS)


def title(chapter: str) -> str:
    """``"01_readiness_gap"`` -> ``"01 The retrieval-readiness gap"`` (the stem where no regression file says)."""
    try:
        return f"{chapter[:2]} {load_regression(chapter).title}"
    except InputError:
        return chapter


def _compared(verdict: Verdict) -> str:
    names = [split_ref(ref, verdict.claim.chapter)[1] for ref in verdict.claim.ours]
    return " − ".join(names) if verdict.claim.kind == "difference" else names[0]


def _ours(verdict: Verdict) -> str:
    if verdict.ours is None:
        return "not measured"
    text = f"{verdict.ours:.3f} [{verdict.low:.3f}, {verdict.high:.3f}] on {verdict.facts:,} facts"
    if verdict.ceilings:
        text += "; perfect model (ch. 9): " + ", ".join(f"{s} {v:.3f}" for s, v in verdict.ceilings.items())
    return text


def _section(section: str) -> str:
    """``"5.2, Table 4"`` -> ``"§5.2, Table 4"``; a section already named in words stays as written."""
    return f"§{section}" if section[:1].isdigit() else section


def claims_frame(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """Every claim on one row: what it says (section, comparison), the paper's figure, ours with its
    interval and facts, and the standing with why."""
    return pd.DataFrame(
        [
            {
                "claim": f"{v.claim.claim} ({_section(v.claim.section)}: {_compared(v)})",
                "paper": ""
                if v.paper is None
                else f"{v.paper:+.3f}"
                if v.claim.kind == "difference"
                else f"{v.paper:.3f}",
                "this build, 95% interval": _ours(v),
                "standing": f"{v.standing}: {v.detail}" if v.detail else v.standing,
            }
            for v in verdicts
        ]
    )


def by_chapter(verdicts: Sequence[Verdict]) -> dict[str, list[Verdict]]:
    """The verdicts grouped under their chapter's title, in chapter order."""
    groups: dict[str, list[Verdict]] = {}
    for verdict in sorted(verdicts, key=lambda v: v.claim.chapter):
        groups.setdefault(title(verdict.claim.chapter), []).append(verdict)
    return groups


def tally(verdicts: Sequence[Verdict]) -> pd.DataFrame:
    """How many claims stand each way, per chapter and in all."""
    counts = Counter((title(v.claim.chapter), v.standing) for v in verdicts)
    chapters = list(by_chapter(verdicts))
    rows = [{"chapter": chapter, **{s: counts[(chapter, s)] for s in STANDINGS}} for chapter in chapters]
    rows.append({"chapter": "all", **{s: sum(counts[(c, s)] for c in chapters) for s in STANDINGS}})
    return pd.DataFrame(rows)
