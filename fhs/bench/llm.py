"""Model cost, measured: per method the calls, tokens, prompt and generation speed, seconds per fact.

``fhs bench llm`` runs the given methods, one after another, on the same small
context-level sample with one model, and reads every fresh answer's cost from
the backend: prompt tokens sent, prompt tokens llama.cpp actually evaluated
(the rest came from the KV cache of the previous call, see
``fhs/llm/llama_cpp.py``), generated tokens, and the seconds of each part. A
temporary response cache (the default) makes it measure the model, not the
cache. It also reports what a cost change must not break: the share of replies
that parsed and the verifier's verdict distribution.
"""

from __future__ import annotations

import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from fhs.data.sampling import sample_by_context
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import Request, Response
from fhs.method.registry import get_method
from fhs.run.evaluate import gold_rank


@dataclass(frozen=True)
class CallCost:
    """One fresh model call, with the method that made it."""

    method: str
    purpose: str
    tokens_in: int
    tokens_out: int
    seconds: float
    prompt_evaluated: int | None
    prompt_seconds: float | None


class TimedBackend:
    """A backend that logs every answer it gives under the method now being measured."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.kind = getattr(backend, "kind", type(backend).__name__)
        self.model = getattr(backend, "model", "")
        self.name = getattr(backend, "name", f"{self.kind}:{self.model}")
        self.method = ""
        self.log: list[CallCost] = []

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        answers = self.backend.complete(requests)
        for request, answer in zip(requests, answers):
            self.log.append(
                CallCost(
                    self.method,
                    request.purpose or "other",
                    answer.tokens_in,
                    answer.tokens_out,
                    answer.seconds,
                    answer.prompt_evaluated,
                    answer.prompt_seconds,
                )
            )
        return answers


def call_costs(calls: Sequence[CallCost], n_facts: int) -> dict[str, Any]:
    """Totals and speeds over calls; prompt speed counts the tokens llama.cpp evaluated."""
    n = max(n_facts, 1)
    tokens_in = sum(c.tokens_in for c in calls)
    tokens_out = sum(c.tokens_out for c in calls)
    seconds = sum(c.seconds for c in calls)
    timed = [c for c in calls if c.prompt_seconds is not None and c.prompt_evaluated is not None]
    evaluated = sum(c.prompt_evaluated or 0 for c in timed)
    prompt_seconds = sum(c.prompt_seconds or 0.0 for c in timed)
    generation_seconds = sum(c.seconds - (c.prompt_seconds or 0.0) for c in timed)
    generated = sum(c.tokens_out for c in timed)
    return {
        "calls_per_fact": round(len(calls) / n, 2),
        "tokens_in_per_fact": round(tokens_in / n, 1),
        "tokens_out_per_fact": round(tokens_out / n, 1),
        "prompt_evaluated_per_fact": round(evaluated / n, 1) if timed else None,
        "prompt_reused_share": round(1 - evaluated / sum(c.tokens_in for c in timed), 3) if timed else None,
        "prompt_tok_s": round(evaluated / prompt_seconds, 1) if timed and prompt_seconds > 0 else None,
        "generation_tok_s": round(generated / generation_seconds, 1) if timed and generation_seconds > 0 else None,
        "prompt_seconds_per_fact": round(prompt_seconds / n, 2) if timed else None,
        "generation_seconds_per_fact": round(generation_seconds / n, 2) if timed else None,
        "seconds_per_fact": round(seconds / n, 2),
    }


def quality(stages: Sequence[dict], facts: Sequence[Any]) -> dict[str, Any]:
    """What must survive a cost change: parse rate, verdict distribution, gold in the list, selector hits."""
    calls = [call for stage in stages for call in stage.get("llm_calls") or []]
    verdicts: Counter[str] = Counter()
    malformed = 0
    for stage in stages:
        for block in (stage.get("verifier") or {}).get("verdicts", []):
            malformed += block.get("malformed", 0)
            for rulings in block.get("entries", {}).values():
                verdicts.update(rulings.values())
    ranks = [gold_rank(stage.get("ranking", []), fact.gold) for stage, fact in zip(stages, facts)]
    selected = [stage["selected"] in fact.gold for stage, fact in zip(stages, facts) if "selected" in stage]
    total = sum(verdicts.values())
    return {
        "parsed_share": round(sum(bool(c.get("parsed")) for c in calls) / len(calls), 3) if calls else None,
        "parsed_by_purpose": {
            p: f"{sum(bool(c.get('parsed')) for c in calls if c['purpose'] == p)}/"
            f"{sum(c['purpose'] == p for c in calls)}"
            for p in sorted({c["purpose"] for c in calls})
        },
        "verdicts": {k: round(v / total, 3) for k, v in sorted(verdicts.items())} if total else None,
        "malformed_verdicts": malformed,
        "gold_in_list": sum(r is not None for r in ranks),
        "selector_correct": sum(selected) if selected else None,
    }


def bench_llm(
    datasets: Sequence[str],
    methods: Sequence[str],
    *,
    profile: str = "cpu",
    backend: str | None = None,
    model: str | None = None,
    facts: int = 3,
    data: str | Path | None = None,
    cache: str | Path | None = None,
    seed: int = 0,
    progress: bool = True,
) -> dict[str, Any]:
    """Run ``methods`` on ``facts`` facts of each dataset with one model; cost and quality per method.

    ``cache=None`` measures with a fresh temporary response cache (every call
    reaches the model); a path reuses that cache (a warm-cache measurement).
    """
    from fhs.core.errors import InputError
    from fhs.llm.factory import make_llm
    from fhs.run.inputs import ModelChoice, load_experiment

    if facts < 1:  # zero facts would divide the time per fact by zero
        raise InputError(f"must be at least 1, got {facts}", field="facts", fix="measure at least one fact")
    if not methods:  # nothing to measure: fail before a model is loaded
        raise InputError("no method to measure", field="methods", fix="name at least one method, e.g. direct,fhs")
    for method in methods:
        get_method(method)  # fail on an unknown name before loading a model
    choice = ModelChoice.resolve(profile, backend=backend, model=model, seed=seed)
    started = time.perf_counter()
    engine = make_llm(choice.backend, choice.model, base_urls=list(choice.base_urls) or None)
    load_seconds = time.perf_counter() - started
    timed = TimedBackend(engine)
    with tempfile.TemporaryDirectory(prefix="fhs-bench-") as scratch:
        store = ResponseCache(Path(cache) if cache else Path(scratch) / "responses.sqlite")
        choice._llm = CachedLLM(timed, store)
        choice.cache_path = store.path  # and the verdict ledger of that cache, so a fresh cache asks the verifier
        per_method: dict[str, list[CallCost]] = {m: [] for m in methods}
        stages: dict[str, list[dict]] = {m: [] for m in methods}
        sampled: list[Any] = []
        wall: dict[str, float] = {m: 0.0 for m in methods}
        by_dataset: dict[str, dict[str, float]] = {m: {} for m in methods}
        for dataset in datasets:
            experiment = load_experiment(dataset, data=data, progress=False)
            chosen = sample_by_context(experiment.facts, facts)[:facts]
            sampled += chosen
            ctx = experiment.llm_context(choice)
            ctx.config = ctx.config.replace(selector=True)
            for method in methods:
                timed.method = method
                function = get_method(method)
                begin = len(timed.log)
                clock = time.perf_counter()
                for fact in tqdm(chosen, desc=f"{dataset}/{method}", disable=not progress, leave=False):
                    stages[method].append(function(fact, ctx))
                wall[method] += time.perf_counter() - clock
                per_method[method] += timed.log[begin:]
                by_dataset[method][dataset] = round(sum(c.seconds for c in timed.log[begin:]) / max(len(chosen), 1), 2)
        store.close()
    n = len(sampled)
    by_method = {}
    for method in methods:
        row = {
            **call_costs(per_method[method], n),
            "wall_seconds_per_fact": round(wall[method] / max(n, 1), 2),
            **quality(stages[method], sampled),
            "seconds_per_fact_by_dataset": by_dataset[method],
        }
        row["by_purpose"] = {
            purpose: call_costs([c for c in per_method[method] if c.purpose == purpose], n)
            for purpose in sorted({c.purpose for c in per_method[method]})
        }
        by_method[method] = row
    return {
        "datasets": list(datasets),
        "facts": n,
        "profile": choice.profile.name,
        "backend": choice.backend,
        "model": choice.model,
        "fresh_cache": cache is None,
        "load_seconds": round(load_seconds, 2),
        "methods": by_method,
    }


def format_table(result: dict[str, Any]) -> str:
    """The side-by-side table ``fhs bench llm`` prints."""
    head = (
        f"{result['model']} ({result['backend']}), {result['facts']} facts of {', '.join(result['datasets'])}, "
        f"{'fresh' if result['fresh_cache'] else 'given'} cache"
    )
    columns = ("calls", "tok in", "evaluated", "tok out", "prompt tok/s", "gen tok/s", "s/fact", "parsed")
    lines = [head, "method      " + "".join(f"{c:>13}" for c in columns)]
    for method, row in result["methods"].items():
        cells = (
            row["calls_per_fact"],
            row["tokens_in_per_fact"],
            row["prompt_evaluated_per_fact"],
            row["tokens_out_per_fact"],
            row["prompt_tok_s"],
            row["generation_tok_s"],
            row["seconds_per_fact"],
            row["parsed_share"],
        )
        lines.append(f"{method:<12}" + "".join(f"{'-' if c is None else c:>13}" for c in cells))
        for purpose, part in row["by_purpose"].items():
            cells = (
                part["calls_per_fact"],
                part["tokens_in_per_fact"],
                part["prompt_evaluated_per_fact"],
                part["tokens_out_per_fact"],
                part["prompt_tok_s"],
                part["generation_tok_s"],
                part["seconds_per_fact"],
                "",
            )
            lines.append(f"  {purpose:<10}" + "".join(f"{'-' if c is None else c:>13}" for c in cells))
        lines.append(f"  s/fact by dataset: {row['seconds_per_fact_by_dataset']}")
        if row["verdicts"]:
            lines.append(f"  verdicts: {row['verdicts']}, malformed codes: {row['malformed_verdicts']}")
    return "\n".join(lines)
