"""A record's few small fields: what metrics, intervals, costs and health need of one fact.

A full record holds every stage's output (an FHS record at the paper's settings
is about 95 KB: four rankings of 200 ids and the fused pool). Metrics need a
handful of its fields, so a run keeps a *summary* per fact in memory and leaves
the record on disk: a summary is a plain dict with the record's own keys
(``SUMMARY_FIELDS``, so every function of ``fhs.run.evaluate`` reads it as it
reads a record), plus the fact's model-call totals (``cost``), per-stage
parse counts (``health``) and, once written, where its record starts in
``records.jsonl`` (``offset``, so one record is read back without the others).
Memory then grows by about a kilobyte a fact, not by the record's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from fhs.run.health import record_health

# The record fields a summary keeps (when the record has them).
SUMMARY_FIELDS = ("id", "context_id", "modality", "gold", "rank", "correct", "selected", "failed", "gold_match")
FAILED_REASON_CHARS = 300  # a refused request's message is kept this long (failed_facts reports it)
COST_FIELDS = ("calls", "fresh", "tokens_in", "tokens_out", "model_seconds", "recorded_seconds")


def record_cost(record: Mapping) -> dict[str, float]:
    """Model calls of one record: all of them, those not served by the cache, tokens and seconds."""
    if "cost" in record and "llm_calls" not in record:  # already a summary
        return dict(record["cost"])
    calls = record.get("llm_calls") or []
    fresh = [call for call in calls if not call.get("cached")]
    return {
        "calls": len(calls),
        "fresh": len(fresh),
        "tokens_in": sum(call.get("tokens_in", 0) for call in calls),
        "tokens_out": sum(call.get("tokens_out", 0) for call in calls),
        # seconds of the calls made now, and of every call when it was made (the method's cost)
        "model_seconds": sum(call.get("seconds", 0.0) for call in fresh),
        "recorded_seconds": sum(call.get("seconds", 0.0) for call in calls),
    }


def record_summary(record: Mapping) -> dict[str, Any]:
    """The summary of one record (a summary passes through unchanged)."""
    if "cost" in record and "llm_calls" not in record:
        return dict(record)
    summary = {name: record[name] for name in SUMMARY_FIELDS if name in record}
    if summary.get("failed"):
        summary["failed"] = str(summary["failed"])[:FAILED_REASON_CHARS]
    summary["cost"] = record_cost(record)
    summary["health"] = record_health(record)
    return summary


def call_totals(records: Iterable[Mapping]) -> dict[str, float]:
    """Model calls, cache hits, tokens and model seconds over records (or their summaries)."""
    total: dict[str, float] = dict.fromkeys(COST_FIELDS, 0)
    for record in records:
        for name, value in record_cost(record).items():
            total[name] += value
    return {
        "llm_calls": total["fresh"],
        "cache_hits": total["calls"] - total["fresh"],
        "tokens_in": total["tokens_in"],
        "tokens_out": total["tokens_out"],
        "model_seconds": round(total["model_seconds"], 3),
        # seconds the calls took when they were made, cached or not (the cost of the method)
        "recorded_seconds": round(total["recorded_seconds"], 3),
    }


def new_calls(records: Iterable[Mapping]) -> dict[str, int]:
    """Calls each stage (``purpose``) made that no cache served, in the order the stages first appear."""
    counts: dict[str, int] = {}
    for record in records:
        for call in record.get("llm_calls") or []:
            if not call.get("cached"):
                counts[call["purpose"]] = counts.get(call["purpose"], 0) + 1
    return counts
