"""Run one method over a list of facts: records as they finish, then metrics.

The runner is the single place where a method's per-fact output becomes a
record on disk, so every method (and every ablation) is evaluated the same
way and a rerun resumes from the records already written.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from fhs.evaluate import gold_rank, metrics
from fhs.facts import Fact
from fhs.methods import MethodContext, get_method
from fhs.records import RecordWriter, write_json_atomic


def run_method(
    facts: Sequence[Fact],
    method: str,
    ctx: MethodContext,
    out_dir: str | Path,
    *,
    run_config: Mapping[str, Any] | None = None,
    progress: bool = True,
) -> dict:
    """Run ``method`` on every fact not yet recorded in ``out_dir``; return metrics.json's content."""
    out_dir = Path(out_dir)
    function = get_method(method)
    started = time.perf_counter()
    with RecordWriter(out_dir / "records.jsonl", config=run_config) as writer:
        todo = [fact for fact in facts if fact.id not in writer]
        bar = tqdm(todo, desc=f"{method}", unit="fact", disable=not progress or not todo, leave=False)
        for fact in bar:
            stage = function(fact, ctx)
            ranking = stage.get("ranking", [])
            record = {
                "id": fact.id,
                "context_id": fact.context_id,
                "modality": fact.modality,
                "gold": list(fact.gold),
                "method": method,
                "rank": gold_rank(ranking[: ctx.retriever.config.top_k], fact.gold),
                **stage,
            }
            if "selected" in stage:
                record["correct"] = stage["selected"] in fact.gold
            writer.write(record)
        records = writer.records_in_order(fact.id for fact in facts)
    result = metrics(records)
    if any("correct" in r for r in records):
        result["accuracy"] = sum(bool(r.get("correct")) for r in records) / max(len(records), 1)
    result.update(
        {
            "method": method,
            "n_new": len(todo),
            "llm_calls": ctx.stats.calls,
            "cache_hits": ctx.stats.cache_hits,
            "tokens_in": ctx.stats.tokens_in,
            "tokens_out": ctx.stats.tokens_out,
            "wall_seconds": round(time.perf_counter() - started, 3),
        }
    )
    if run_config:
        result["config"] = dict(run_config)
    write_json_atomic(out_dir / "metrics.json", result)
    return result
