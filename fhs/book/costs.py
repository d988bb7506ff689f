"""Model-call tallies a page shows: split by the calls' purpose, new calls per stage, per-fact spreads.

The per-call arithmetic is ``fhs.run.summary.record_cost`` (calls, calls the
cache did not serve, tokens, seconds); this module only chooses which calls it
reads, so every page counts a call the same way the run's ``metrics.json`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from fhs.run.summary import COST_FIELDS, record_cost


def purpose_costs(records: Iterable[Mapping], purpose: str) -> tuple[dict[str, float], dict[str, float]]:
    """The cost of the calls *not* made for ``purpose`` and of those made for it, summed over records."""
    others: dict[str, float] = dict.fromkeys(COST_FIELDS, 0)
    chosen: dict[str, float] = dict.fromkeys(COST_FIELDS, 0)
    for record in records:
        calls = record.get("llm_calls") or []
        for total, part in (
            (others, [c for c in calls if c["purpose"] != purpose]),
            (chosen, [c for c in calls if c["purpose"] == purpose]),
        ):
            for name, value in record_cost({"llm_calls": part}).items():
                total[name] += value
    return others, chosen


def calls_per_fact(records: Iterable[Mapping], excluded: str = "selector") -> list[int]:
    """Each record's number of calls, leaving out those made for ``excluded``."""
    return [sum(1 for c in record.get("llm_calls") or [] if c["purpose"] != excluded) for record in records]
