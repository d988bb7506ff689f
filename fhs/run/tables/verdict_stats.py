"""Verifier diagnostics from FHS records (Table 15, Appendix E.2): what the verdicts tell apart.

Everything here reads a run's records; nothing calls a model. Verdicts are
``support``, ``contradict`` (the paper's "no support") and ``abstain``. A
support rate is supports over non-abstaining verdicts, the quantity v_j(c)
averages (Section 4.4).

A hypothesis is called *correct* when its own rendered queries put a gold
concept inside the top ``k`` of at least one of their rankings (k = K_v = 10
by default): the reading it encodes already retrieves the answer. This is our
operational definition; the paper does not spell one out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

VERDICTS = ("support", "contradict", "abstain")


def _calls(records: Sequence[Mapping[str, Any]]):
    """(record, hypothesis index, hypothesis, verdict block) for every hypothesis the verifier judged."""
    for record in records:
        verifier = record.get("verifier")
        if not verifier:
            continue
        for j, (hypothesis, block) in enumerate(zip(record["hypotheses"], verifier["verdicts"])):
            if block["asked"]:
                yield record, j, hypothesis, block


def hypothesis_is_correct(record: Mapping[str, Any], j: int, k: int = 10) -> bool:
    gold = set(record["gold"])
    return any(
        q["hypothesis_index"] == j and gold & set(ranking[:k])
        for q, ranking in zip(record["queries"], record["rankings"])
    )


def _rate(counts: Mapping[str, int]) -> float | None:
    ruled = counts.get("support", 0) + counts.get("contradict", 0)
    return counts.get("support", 0) / ruled if ruled else None


def _tally(rows, dimensions):
    counts = {d: {v: 0 for v in VERDICTS} for d in dimensions}
    for entry in rows:
        for d in dimensions:
            counts[d][entry.get(d, "abstain")] += 1
    return counts


def support_by_group(records: Sequence[Mapping[str, Any]], dimensions: Sequence[str], group) -> dict[str, dict]:
    """Per dimension (and ``all``): support rate and abstain share for each value of ``group``.

    ``group(record, j, candidate_id) -> label`` splits the judged (hypothesis, candidate) pairs.
    """
    rows: dict[str, list[Mapping[str, str]]] = {}
    for record, j, _, block in _calls(records):
        for cid, entry in block["entries"].items():
            rows.setdefault(group(record, j, cid), []).append(entry)
    result = {}
    for label, entries in sorted(rows.items()):
        counts = _tally(entries, dimensions)
        total = {v: sum(c[v] for c in counts.values()) for v in VERDICTS}
        result[label] = {
            "pairs": len(entries),
            **{d: _rate(c) for d, c in counts.items()},
            "all": _rate(total),
            "abstain": total["abstain"] / max(sum(total.values()), 1),
        }
    return result


def panel_a(records, dimensions):
    """Does the verifier separate candidates? Support for gold vs non-gold candidates."""
    return support_by_group(records, dimensions, lambda r, j, cid: "gold" if cid in r["gold"] else "non-gold")


def panel_b(records, dimensions, k: int = 10):
    """Does it judge the hypothesis? Support under correct vs incorrect hypotheses (module docstring)."""
    return support_by_group(
        records,
        dimensions,
        lambda r, j, cid: "correct hypothesis" if hypothesis_is_correct(r, j, k) else "incorrect hypothesis",
    )


def window_stats(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    """How often the gold is in the judged window (per verifier call), and dimensions resolved per call."""
    calls = list(_calls(records))
    inside = [bool(set(r["gold"]) & set(r["verifier"]["window"]["ids"])) for r, _, _, _ in calls]
    resolved = [
        sum(1 for v in h["dimensions"].values() if str(v).strip().upper() not in ("", "UNRESOLVED"))
        for _, _, h, _ in calls
    ]
    n = max(len(calls), 1)
    return {"calls": len(calls), "gold_in_window": sum(inside) / n, "dimensions_resolved": sum(resolved) / n}


def verdict_shares(records: Sequence[Mapping[str, Any]], dimensions: Sequence[str]) -> dict[str, dict[str, float]]:
    """Per dimension, the share of support / contradict / abstain verdicts over every judged pair."""
    counts = _tally((entry for _, _, _, block in _calls(records) for entry in block["entries"].values()), dimensions)
    return {d: {v: c[v] / max(sum(c.values()), 1) for v in VERDICTS} for d, c in counts.items()}
