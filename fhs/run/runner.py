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

from fhs.data.facts import Fact, gold_match_of, matches_gold
from fhs.data.taxonomies.ids import unknown_gold
from fhs.llm.contract import BackendError, RequestRefused
from fhs.method.context import MethodContext
from fhs.method.registry import get_method
from fhs.run.evaluate import gold_rank, metrics
from fhs.run.health import failed, failed_facts, stage_health, warn_about
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


def _guarded(function):
    """``function`` where a request the server refused for good fails only its own fact."""

    def run(fact: Fact, ctx: MethodContext) -> dict:
        try:
            return function(fact, ctx)
        except RequestRefused as error:
            return {"ranking": [], "failed": " ".join(str(error).split())}

    return run


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
    fresh: bool = False,
) -> dict:
    """Run ``method`` on every fact not yet recorded in ``out_dir``; return metrics.json's content.

    ``llm_calls``/``cache_hits``/tokens count what THIS invocation did (a fact
    recorded by an earlier run costs nothing now); ``per_fact`` averages the
    cost over every record, cached or not, for the cost tables. A fact whose
    request the server refused is recorded as failed (and retried by the next
    run); the metrics leave it out and say how many were left out.
    """
    out_dir = Path(out_dir)
    function = _timed(_guarded(get_method(method)))
    started = time.perf_counter()
    new_records: list[dict] = []
    with RecordWriter(out_dir / "records.jsonl", config=run_config, fresh=fresh) as writer:
        todo = [fact for fact in facts if fact.id not in writer or failed(writer.done[fact.id])]
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
                "rank": gold_rank(ranking, fact.gold, gold_match_of(fact)),
                **stage,
            }
            if gold_match_of(fact) != "exact":
                record["gold_match"] = gold_match_of(fact)
            if "selected" in stage:
                record["correct"] = matches_gold(stage["selected"], fact.gold, gold_match_of(fact))
            writer.write(record)
            new_records.append(record)
        bar.close()
        everything = writer.records_in_order(fact.id for fact in facts)
    records = [r for r in everything if not failed(r)]
    if everything and not records:  # every fact failed: a recall of 0.0 would be a metric of nothing
        reasons = failed_facts(everything)
        raise BackendError(f"all {len(everything)} facts failed, so there is no metric to report "
                           f"(e.g. {reasons['ids'][0]}: {reasons['reasons'][reasons['ids'][0]][:160]})")
    # Acc. and its basis (selector pick or rank 1) come from fhs.run.evaluate, as in the chapters
    result: dict[str, Any] = {"method": method, **metrics(records)}
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
    stages = stage_health(everything)
    result["parse_failures"] = {name: block["parse_failures"] for name, block in stages.items()}
    result["truncations"] = {name: block["truncations"] for name, block in stages.items()}
    result["fallbacks"] = {name: block["fallbacks"] for name, block in stages.items()}
    result["stages"] = stages
    result["failed_facts"] = failed_facts(everything)
    unknown = unknown_gold(facts, ctx.taxonomy)
    result["unknown_gold"] = {"count": len(unknown), "ids": unknown[:50]}
    warn_about(stages, result["failed_facts"], len(everything))
    if run_config:
        result["config"] = dict(run_config)
    write_json_atomic(out_dir / "metrics.json", result)
    return result
