"""A plan's totals and wall time: per dataset, chapter and stage, at a server's throughput.

The throughput is the one number ``fhs plan`` cannot measure on a CPU. The default
is a published measurement of the setting the GPU profiles serve; the sizing page
(book/sizing.md) cites it and shows how to measure one's own server with the
plan's request shapes (:func:`bench_command`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fhs.plan.dry_run import RELOCATOR, Row


@dataclass(frozen=True)
class Throughput:
    """A server's aggregate throughput under load: one total rate, or prefill and decode rates.

    The default is a published measurement of the setting the ``paper`` profile serves
    (vLLM, Qwen3-32B BF16, one H100, long prompts and short answers, close to this
    project's requests); ``source`` names it and book/sizing.md cites it. Measure your
    own server and pass it instead.
    """

    total_tps: float | None = 2148.69
    prefill_tps: float | None = None
    decode_tps: float | None = None
    source: str = (
        "published: vLLM 0.11.0, Qwen3-32B BF16, one H100, random 4,000-in/200-out prompts (GPUStack performance lab)"
    )

    def seconds(self, prompt_tokens: int, output_tokens: int) -> float:
        if self.prefill_tps and self.decode_tps:
            return prompt_tokens / self.prefill_tps + output_tokens / self.decode_tps
        if not self.total_tps:
            raise ValueError("a throughput needs a total rate, or both a prefill and a decode rate")
        return (prompt_tokens + output_tokens) / self.total_tps

    def describe(self) -> str:
        if self.prefill_tps and self.decode_tps:
            return f"prefill {_rate(self.prefill_tps)} tok/s, decode {_rate(self.decode_tps)} tok/s ({self.source})"
        if not self.total_tps:
            raise ValueError("a throughput needs a total rate, or both a prefill and a decode rate")
        return f"{_rate(self.total_tps)} tok/s in all ({self.source})"


def _rate(tps: float) -> str:
    """Tokens/s as a person reads them: whole numbers, three significant digits below 10."""
    return f"{tps:,.0f}" if tps >= 10 else f"{tps:.3g}"


def plan_totals(rows: Sequence[Row], throughput: Throughput) -> dict[str, Any]:
    """Totals per dataset, chapter and purpose, the request shapes, and the wall time."""

    def zero() -> dict[str, int]:
        return {"requests": 0, "prompt_tokens": 0, "output_tokens": 0}

    total = zero()
    chapters: dict[str, dict[str, Any]] = {}  # counts, and the hours they take
    purposes: dict[str, dict[str, Any]] = {}  # counts, means and where the output count came from
    facts: dict[str, int] = {}
    for row in rows:
        if row.run.asks_model and row.run.method != RELOCATOR:
            facts[row.run.dataset] = max(facts.get(row.run.dataset, 0), row.facts)
        block = chapters.setdefault(row.run.chapter, zero())
        for key in total:
            value = getattr(row, key)
            total[key] += value
            block[key] += value
        for purpose, part in row.by_purpose.items():
            shape = purposes.setdefault(purpose, {**zero(), "output_source": part["output_source"]})
            for key in ("requests", "prompt_tokens", "output_tokens"):
                shape[key] += int(part[key])
    for shape in purposes.values():
        n = max(shape["requests"], 1)
        shape["mean_prompt_tokens"] = round(shape["prompt_tokens"] / n)
        shape["mean_output_tokens"] = round(shape["output_tokens"] / n)
    seconds = throughput.seconds(total["prompt_tokens"], total["output_tokens"])
    for block in chapters.values():
        block["hours"] = round(throughput.seconds(block["prompt_tokens"], block["output_tokens"]) / 3600, 2)
    return {
        "facts": facts,
        "total": total,
        "chapters": chapters,
        "purposes": purposes,
        "throughput": {
            "total_tps": throughput.total_tps,
            "prefill_tps": throughput.prefill_tps,
            "decode_tps": throughput.decode_tps,
            "source": throughput.source,
        },
        "hours": round(seconds / 3600, 2),
        "days": round(seconds / 86400, 2),
    }


def bench_command(
    purposes: Mapping[str, Mapping[str, Any]], model: str, base_url: str = "http://127.0.0.1:8000", prompts: int = 500
) -> str:
    """A ``vllm bench serve`` command with the plan's request shape (the token-weighted mean prompt and
    answer) that saves its result for ``fhs plan --bench-json bench.json``."""
    requests = sum(p["requests"] for p in purposes.values()) or 1
    prompt = sum(p["prompt_tokens"] for p in purposes.values()) / requests
    output = sum(p["output_tokens"] for p in purposes.values()) / requests
    return (
        f"vllm bench serve --backend openai-chat --endpoint /v1/chat/completions --base-url {base_url} "
        f"--model {model} --dataset-name random --random-input-len {math.ceil(prompt)} "
        f"--random-output-len {max(1, math.ceil(output))} --num-prompts {prompts} --seed 42 "
        f"--save-result --result-filename bench.json"
    )
