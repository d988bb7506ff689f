"""Run one method over a list of facts: records as they finish, then metrics.

The runner is the single place where a method's per-fact output becomes a
record on disk, so every method (and every ablation) is evaluated the same
way, and a rerun resumes from the records already written.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm  # plain text bars: no ipywidgets warning inside notebooks

from fhs.data.facts import Fact
from fhs.method.context import MethodContext
from fhs.method.registry import get_method
from fhs.run.evaluate import gold_rank, metrics
from fhs.run.records import RecordWriter, write_json_atomic


def call_totals(records: Sequence[Mapping]) -> dict[str, float]:
    """Model calls, cache hits, tokens and model seconds over records' ``llm_calls`` lists."""
    calls = [call for record in records for call in record.get("llm_calls") or []]
    fresh = [call for call in calls if not call.get("cached")]
    return {
        "llm_calls": len(fresh),
        "cache_hits": len(calls) - len(fresh),
        "tokens_in": sum(call.get("tokens_in", 0) for call in calls),
        "tokens_out": sum(call.get("tokens_out", 0) for call in calls),
        "model_seconds": round(sum(call.get("seconds", 0.0) for call in fresh), 3),
        # seconds the calls took when they were made, cached or not (the cost of the method)
        "recorded_seconds": round(sum(call.get("seconds", 0.0) for call in calls), 3),
    }


def accuracy(records: Sequence[Mapping]) -> float | None:
    """Top-1 after the shared selector ("Acc."), over records where the selector ran."""
    judged = [r for r in records if "correct" in r]
    return sum(bool(r["correct"]) for r in judged) / len(judged) if judged else None


def _results(facts: Sequence[Fact], function, ctx: MethodContext, workers: int):
    """``(fact, stage record)`` as facts finish; several at once when ``workers`` > 1.

    Facts in flight at the same time keep an OpenAI-compatible server busy (each
    fact's calls are few and short). If one fact fails, the ones already
    yielded are on disk; those still running are abandoned, and their model
    calls, cached as they returned, make the rerun cheap.
    """
    if workers <= 1:
        for fact in facts:
            yield fact, function(fact, ctx)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(function, fact, ctx): fact for fact in facts}
        try:
            for future in as_completed(futures):
                yield futures[future], future.result()
        finally:
            for future in futures:
                future.cancel()


def _timed(function):
    """The method with its wall-clock seconds on the fact added to the record (Table 19).

    A fact is recorded once, so the figure is the first run's, cached replays aside.
    """
    def timed(fact: Fact, ctx: MethodContext) -> dict:
        started = time.perf_counter()
        stage = function(fact, ctx)
        stage.setdefault("wall_seconds", round(time.perf_counter() - started, 3))
        return stage
    return timed


def run_method(
    facts: Sequence[Fact],
    method: str,
    ctx: MethodContext,
    out_dir: str | Path,
    *,
    run_config: Mapping[str, Any] | None = None,
    progress: bool = True,
    workers: int = 1,
) -> dict:
    """Run ``method`` on every fact not yet recorded in ``out_dir``; return metrics.json's content.

    ``llm_calls``/``cache_hits``/tokens count what THIS invocation did (a fact
    recorded by an earlier run costs nothing now); ``per_fact`` averages the
    cost over every record, cached or not, for the cost tables.
    """
    out_dir = Path(out_dir)
    function = _timed(get_method(method))
    started = time.perf_counter()
    new_records: list[dict] = []
    with RecordWriter(out_dir / "records.jsonl", config=run_config) as writer:
        todo = [fact for fact in facts if fact.id not in writer]
        bar = tqdm(total=len(todo), desc=method, unit="fact", disable=not progress or not todo, leave=False)
        for fact, stage in _results(todo, function, ctx, workers):
            bar.update()
            ranking = stage.get("ranking", [])
            record = {
                "id": fact.id,
                "context_id": fact.context_id,
                "modality": fact.modality,
                "gold": list(fact.gold),
                "method": method,
                "rank": gold_rank(ranking, fact.gold),
                **stage,
            }
            if "selected" in stage:
                record["correct"] = stage["selected"] in fact.gold
            writer.write(record)
            new_records.append(record)
        bar.close()
        records = writer.records_in_order(fact.id for fact in facts)
    result: dict[str, Any] = {"method": method, **metrics(records)}
    acc = accuracy(records)
    if acc is not None:
        result["accuracy"] = acc
        for modality, block in result["by_modality"].items():
            block["accuracy"] = accuracy([r for r in records if r["modality"] == modality])
    totals = call_totals(records)
    result.update(call_totals(new_records))
    result["n_new"] = len(new_records)
    result["wall_seconds"] = round(time.perf_counter() - started, 3)
    n = max(len(records), 1)
    result["per_fact"] = {
        "llm_calls": (totals["llm_calls"] + totals["cache_hits"]) / n,
        "tokens_in": totals["tokens_in"] / n,
        "tokens_out": totals["tokens_out"] / n,
        "model_seconds": totals["recorded_seconds"] / n,
    }
    if run_config:
        result["config"] = dict(run_config)
    write_json_atomic(out_dir / "metrics.json", result)
    return result
