"""How ``fhs plan`` prints a plan: one line per chapter, dataset and method, then the totals.

Seeded runs of one method are summed on one line (the ``runs`` column); runs
that ask nothing new (replays of an earlier run's calls, LLM-free runs) are
counted on one line per chapter. A request count marked ``=`` is exact; ``~``
marks a figure estimated from the plan's sample (see :mod:`fhs.plan.dry_run`).
Token counts are always estimates; where the Qwen tokenizer could not load they are
counted by characters, and the totals' and days' lines say so and what to install.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fhs.plan.dry_run import Row


def grouped(rows: Sequence[Row]) -> list[dict[str, Any]]:
    """Rows summed over seeds: chapter, dataset, method label, runs, facts, requests, tokens, exactness."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for row in rows:
        key = (row.run.chapter, row.run.dataset, row.run.label)
        block = out.setdefault(
            key,
            {
                "chapter": key[0],
                "dataset": key[1],
                "method": key[2],
                "runs": 0,
                "facts": row.facts,
                "requests": 0,
                "prompt_tokens": 0,
                "output_tokens": 0,
                "exact": True,
                "asks_model": row.run.asks_model,
            },
        )
        block["runs"] += 1
        block["requests"] += row.requests
        block["prompt_tokens"] += row.prompt_tokens
        block["output_tokens"] += row.output_tokens
        block["exact"] = block["exact"] and row.requests_exact
    return list(out.values())


def _tokens(n: float) -> str:
    return f"{n / 1e6:,.1f}M" if n >= 1e5 else f"{n:,.0f}"


def estimated_mark(plan: Mapping[str, Any]) -> str:
    """What a token figure carries on its line when the exact tokenizer could not load: '' otherwise."""
    fix = plan.get("tokens_exact_with")
    return f" (estimated: {plan['tokenizer']}; exact with the Qwen tokenizer: {fix})" if fix else ""


def format_plan(plan: Mapping[str, Any], rows: Sequence[Row]) -> str:
    """The plan as text: the table, the totals per chapter and per stage, the wall time."""
    changes = ", ".join(f"{k}={v}" for k, v in plan["changes"].items()) if plan.get("changes") else ""
    lines = [
        f"fhs plan --profile {plan['profile']}: {plan['description']}" + (f" (what if: {changes})" if changes else ""),
        f"seeds {', '.join(map(str, plan['seeds']))}; facts sent to the model: "
        + ", ".join(f"{d} {n:,}" for d, n in plan["facts"].items()),
        f"dry run: the simulated model on {', '.join(f'{d} {n}' for d, n in plan['sample'].items())} "
        f"sampled facts; tokens counted with {plan['tokenizer']}; {plan['seconds']:.0f} s",
    ]
    lines += [
        f"left out: {left['chapter']} (needs the {left['extra']} extra: {left['install']})"
        for left in plan.get("left_out", ())
    ]
    lines.append("")
    estimated = estimated_mark(plan)
    header = (
        f"{'chapter':<24}{'dataset':<11}{'method':<32}{'runs':>5}{'facts':>8}{'requests':>13}"
        f"{'prompt tok':>12}{'output tok':>12}"
    )
    lines += [header, "-" * len(header)]
    free: dict[str, int] = {}
    replayed: dict[str, int] = {}
    for block in grouped(rows):
        if not block["asks_model"]:
            free[block["chapter"]] = free.get(block["chapter"], 0) + block["runs"]
            continue
        if block["requests"] == 0:  # every call served by an earlier run's answers or verdicts
            replayed[block["chapter"]] = replayed.get(block["chapter"], 0) + block["runs"]
            continue
        mark = "=" if block["exact"] else "~"
        lines.append(
            f"{block['chapter']:<24}{block['dataset']:<11}{block['method'][:31]:<32}{block['runs']:>5}"
            f"{block['facts']:>8,}{mark + format(block['requests'], ','):>13}"
            f"{_tokens(block['prompt_tokens']):>12}{_tokens(block['output_tokens']):>12}"
        )
    for chapter, n in replayed.items():
        lines.append(f"{chapter:<24}{'':<11}{n} runs replayed from earlier runs (no new request)")
    for chapter, n in free.items():
        lines.append(f"{chapter:<24}{'':<11}{n} LLM-free runs (no request)")
    lines += ["", "per chapter (hours at the throughput below):"]
    for chapter, block in plan["chapters"].items():
        lines.append(
            f"  {chapter:<24}{block['requests']:>12,} requests {_tokens(block['prompt_tokens']):>9} in "
            f"{_tokens(block['output_tokens']):>8} out {block['hours']:>9,.1f} h"
        )
    lines += ["", "per stage (request shapes: mean prompt and output tokens a request):"]
    for purpose, shape in sorted(plan["purposes"].items(), key=lambda kv: -kv[1]["prompt_tokens"]):
        lines.append(
            f"  {purpose:<17}{shape['requests']:>12,} requests  {shape['mean_prompt_tokens']:>7,} in  "
            f"{shape['mean_output_tokens']:>5,} out  (output: {shape['output_source']})"
        )
    total = plan["total"]
    lines += [
        "",
        f"total: {total['requests']:,} requests, {_tokens(total['prompt_tokens'])} prompt tokens, "
        f"{_tokens(total['output_tokens'])} output tokens{estimated}",
        f"wall time at {plan['throughput_text']}: {plan['hours']:,.1f} h = {plan['days']:,.2f} days"
        + (" (from estimated tokens)" if estimated else ""),
        "",
        "= exact request count; ~ estimated from the sample (variable rounds, replays, a stand-in "
        "retriever); tokens are estimates (prompts rendered from real facts and counted exactly on "
        "the sample, then scaled; outputs from the simulator unless marked measured)",
        f"measure your own server with this shape: {plan['bench_command']}; then pass --bench-json "
        "bench.json (or --base-url URL --calibrate)",
    ]
    if plan.get("server"):
        from fhs.plan.server import format_server

        lines += ["", *format_server(plan["server"], estimated=bool(estimated), label="server (published rates)")]
        if plan.get("measured"):
            lines += ["", *format_server(plan["measured"], estimated=bool(estimated), label="server (measured)")]
    if plan.get("stand_in_retrievers"):
        lines.append(
            f"BM25 stood in for: {', '.join(plan['stand_in_retrievers'])} (their concept embeddings are "
            "not built yet; --build-dense embeds them first, and plans those runs on the real retrievers)"
        )
    return "\n".join(lines)
