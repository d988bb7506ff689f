"""A plan calibrated on the user's own server: prefill and decode rates and KV capacity, measured.

``fhs plan --base-url URL --calibrate`` sends a short probe through the project's client
(:class:`fhs.llm.openai.OpenAIBackend`) before it prints the days:

- prefill: ``prompts`` requests at once, each a prompt of the plan's selector length
  (the longest and most frequent shape) that begins with its own nonce, so no prefix
  cache serves it, and ``max_tokens`` 1: prompt tokens over the wall time, less the wall
  time of as many one-line requests (the round trip and the one answer token);
- decode: ``batch`` requests at once (the batch the plan's KV cache allows), each a short
  prompt and ``decode_tokens`` answer tokens (``ignore_eos``, vLLM's extension, so the
  answer runs to its length): answer tokens over the wall time, less the time the same
  short prompts take to prefill at the rate just measured;
- KV capacity: vLLM's ``/metrics`` line ``vllm:cache_config_info`` (``num_gpu_blocks`` x
  ``block_size``), None where the server does not report it.

The simulated server (``fhs.plan.sim_server``) implements all three with known rates;
``tests/test_plan_calibrate.py`` checks that the probe recovers them.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

from fhs.llm.contract import Message, Request
from fhs.llm.tokens import TokenCounter

_CACHE_INFO = re.compile(r"^vllm:cache_config_info\{(?P<labels>[^}]*)\}", re.M)
_LABEL = re.compile(r'(\w+)="([^"]*)"')
FILLER = "Concept label, definition and category profile of one candidate in the shortlist. "


@dataclass(frozen=True)
class Measured:
    """What the probe measured: rates in tokens a second, the KV cache in tokens, and how."""

    prefill_tps: float
    decode_tps: float
    kv_tokens: int | None
    detail: dict[str, Any]


def kv_capacity(base_url: str, timeout: float = 10.0) -> int | None:
    """The KV cache's size in tokens as vLLM's ``/metrics`` reports it; None if it does not."""
    import httpx

    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        reply = httpx.get(f"{root}/metrics", timeout=timeout, trust_env=False)
    except httpx.HTTPError:
        return None
    match = _CACHE_INFO.search(reply.text) if reply.status_code == 200 else None
    if match is None:
        return None
    labels = dict(_LABEL.findall(match["labels"]))
    try:
        return int(labels["num_gpu_blocks"]) * int(labels["block_size"])
    except (KeyError, ValueError):
        return None


def prompt_of(tokens: int, counter: TokenCounter, nonce: str) -> str:
    """A prompt of about ``tokens`` tokens under ``counter`` that starts with ``nonce``."""
    per = max(counter.count(FILLER), 1)
    text = f"[{nonce}] " + FILLER * max(tokens // per, 1)
    while counter.count(text) > tokens and len(text) > len(nonce) + 8:
        text = text[: int(len(text) * 0.98)]
    return text


def _timed(backend: Any, requests: list[Request]) -> tuple[float, list[Any]]:
    started = time.perf_counter()
    answers = backend.complete(requests)
    return time.perf_counter() - started, answers


def probe(
    base_url: str,
    model: str,
    counter: TokenCounter,
    *,
    prompt_tokens: int,
    batch: int,
    prompts: int = 8,
    decode_tokens: int = 256,
    short_prompt: int = 64,
    timeout: float = 600.0,
) -> Measured:
    """Measure the server at ``base_url``: prefill on ``prompts`` prompts of ``prompt_tokens``, decode
    at ``batch`` sequences of ``decode_tokens``, the KV capacity it reports."""
    from fhs.llm.openai import OpenAIBackend

    stamp = f"{time.time_ns():x}"

    def tiny(n: int, tag: str) -> list[Request]:
        return [
            Request(messages=(Message("user", f"[{stamp}-{tag}{i}] ok"),), max_tokens=1, purpose="probe")
            for i in range(n)
        ]

    long = [
        Request(
            messages=(Message("user", prompt_of(prompt_tokens, counter, f"{stamp}-p{i}")),),
            max_tokens=1,
            purpose="probe-prefill",
        )
        for i in range(prompts)
    ]
    short = [
        Request(
            messages=(Message("user", prompt_of(short_prompt, counter, f"{stamp}-d{i}")),),
            max_tokens=decode_tokens,
            purpose="probe-decode",
        )
        for i in range(batch)
    ]
    backend = OpenAIBackend(
        [base_url],
        model,
        max_in_flight=max(prompts, batch),
        timeout=timeout,
        structured="none",
        thinking=False,
        extra_body={"ignore_eos": True},
        max_retries=2,
        give_up_s=timeout,
    )
    try:
        _timed(backend, tiny(max(prompts, batch), "w"))  # connections opened, the client's loop started
        seconds, answers = _timed(backend, long)
        overhead, _ = _timed(backend, tiny(prompts, "t"))  # the round trip and one answer token, no prompt
        seconds_d, decoded = _timed(backend, short)
    finally:
        backend.close()
    prefill_in = sum(a.tokens_in for a in answers)
    prefill_tps = prefill_in / max(seconds - overhead, seconds * 0.5)
    decode_out = sum(a.tokens_out for a in decoded)
    decoding = max(seconds_d - sum(a.tokens_in for a in decoded) / prefill_tps, seconds_d * 0.5)
    return Measured(
        prefill_tps,
        decode_out / decoding,
        kv_capacity(base_url),
        {
            "prefill": {
                "requests": prompts,
                "prompt_tokens": prefill_in,
                "seconds": round(seconds, 3),
                "round_trip_seconds": round(overhead, 3),
            },
            "decode": {"requests": batch, "output_tokens": decode_out, "seconds": round(seconds_d, 3)},
        },
    )


def calibrated_server(
    server: Any,
    base_url: str,
    model: str,
    counter: TokenCounter,
    purposes: dict[str, Any],
    total: dict[str, int],
    **probe_options: Any,
) -> tuple[Any, Measured]:
    """``server`` (a :class:`fhs.plan.server.Server`) with the rates and KV capacity measured at ``base_url``:
    the probe's prompts are the selector's mean length (within the server's context), its decode batch
    the one the measured KV cache allows the plan's mean request."""
    from dataclasses import replace

    from fhs.llm.server_info import served_context_length
    from fhs.plan.server import MAX_BATCH

    requests = max(total["requests"], 1)
    mean_len = (total["prompt_tokens"] + total["output_tokens"]) / requests
    selector = purposes.get("selector") or max(purposes.values(), key=lambda p: p["mean_prompt_tokens"])
    context = served_context_length(base_url, model) or selector["mean_prompt_tokens"] + 64
    kv = kv_capacity(base_url)
    batch = max(1, min(int((kv if kv is not None else server.kv_tokens()) // max(mean_len, 1)), MAX_BATCH))
    options = {"prompt_tokens": int(min(selector["mean_prompt_tokens"], context - 64)), "batch": batch, **probe_options}
    measured = probe(base_url, model, counter, **options)
    return replace(
        server,
        prefill_tps=measured.prefill_tps,
        decode_tps=measured.decode_tps,
        kv_capacity=measured.kv_tokens,
        measured_by=f"measured at {base_url}",
    ), measured


BENCH_FIELDS = ("total_token_throughput", "total_input_tokens", "total_output_tokens", "completed")


def bench_throughput(path: str) -> tuple[float, str]:
    """The total tokens a second of a ``vllm bench serve --save-result`` file, and a line saying what was
    measured (the request shape, to hold against the plan's); a file that is not one is a one-line error."""
    import json
    import math
    from pathlib import Path

    from fhs.core.errors import InputError

    fix = "pass the JSON that vllm bench serve --save-result wrote"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(
            f"cannot read it ({error.__class__.__name__})", path=path, field="bench-json", fix=fix
        ) from None
    try:
        result = json.loads(text)
    except (ValueError, RecursionError):
        raise InputError("not JSON", path=path, field="bench-json", fix=fix) from None
    if not isinstance(result, dict):
        raise InputError("not a JSON object", path=path, field="bench-json", fix=fix)
    values = {}
    for name in BENCH_FIELDS:
        value = result.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise InputError(
                f"{name} must be a number above 0, got {str(value)[:40]!r}", path=path, field="bench-json", fix=fix
            )
        values[name] = float(value)
    n = values["completed"]
    shape = (
        f"vllm bench serve ({Path(path).name}): {int(n):,} requests of {values['total_input_tokens'] / n:,.0f} "
        f"in and {values['total_output_tokens'] / n:,.0f} out, no prefix reuse"
    )
    return values["total_token_throughput"], shape
