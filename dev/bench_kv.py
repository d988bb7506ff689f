"""llama.cpp's prompt cost per prompt order, saved KV states and batch/thread setting (``python -m dev.bench_kv``).

A fixed stream of requests is built once per prompt order (the methods on a
context-level sample with the simulated model and the ``cpu`` profile's budgets,
as ``python -m dev.bench_prefix`` does) and replayed against real llama.cpp backends, one
per setting, loaded side by side in one process. The replay goes request by
request across all settings, so a slower or busier stretch of the machine falls
on every setting alike. Each call generates one token: what is measured is the
prompt, the part prefix reuse saves. Per setting it reports the prompt tokens
llama.cpp evaluated (the rest came from its cache or a restored state), the
seconds llama.cpp spent evaluating them, and each call's wall time (restoring
and saving states included).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm import tqdm

from fhs.llm.contract import Message, Request

DEFAULT_METHODS = ("structured", "fhs")


@dataclass(frozen=True)
class Setting:
    order: str
    kv_states: int = 0
    n_batch: int = 512
    n_threads: int = 2

    @property
    def name(self) -> str:
        return f"{self.order} kv={self.kv_states} batch={self.n_batch} threads={self.n_threads}"


@dataclass
class Totals:
    requests: int = 0
    prompt_tokens: int = 0
    evaluated: int = 0
    prompt_seconds: float = 0.0
    wall_seconds: float = 0.0
    restores: int = 0
    per_call: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens, "evaluated": self.evaluated,
                "reused_share": round(1 - self.evaluated / self.prompt_tokens, 4) if self.prompt_tokens else None,
                "prompt_seconds": round(self.prompt_seconds, 3), "wall_seconds": round(self.wall_seconds, 3),
                "prompt_tok_s": round(self.evaluated / self.prompt_seconds, 1) if self.prompt_seconds else None,
                "restores": self.restores, "per_call": self.per_call}


def settings_grid(orders: Sequence[str], kv_states: Sequence[int], n_batch: Sequence[int],
                  n_threads: Sequence[int]) -> list[Setting]:
    return [Setting(*values) for values in itertools.product(orders, kv_states, n_batch, n_threads)]


def replay(streams: dict[str, Sequence[tuple[str, list[dict[str, str]]]]], settings: Sequence[Setting], *,
           model: str = "qwen2.5-0.5b", n_ctx: int = 8192, progress: bool = True) -> dict[str, Totals]:
    """Every setting answers its order's stream, request by request across settings (one token each)."""
    from fhs.llm.llama_cpp import LlamaCppBackend
    from fhs.llm.models import model_path

    path = model_path(model)
    backends = {s: LlamaCppBackend(path, n_ctx=n_ctx, n_threads=s.n_threads, kv_states=s.kv_states,
                                   n_batch=s.n_batch, n_ubatch=s.n_batch, model_name=model) for s in settings}
    totals = {s.name: Totals() for s in settings}
    longest = max(len(stream) for stream in streams.values())
    for i in tqdm(range(longest), desc="replay", disable=not progress, leave=False):
        for setting, backend in backends.items():
            stream = streams[setting.order]
            if i >= len(stream):
                continue
            purpose, messages = stream[i]
            request = Request(messages=tuple(Message(m["role"], m["content"]) for m in messages),
                              max_tokens=1, purpose=purpose)
            before = backend.states.restored if backend.states else 0
            (answer,) = backend.complete([request])
            total = totals[setting.name]
            total.requests += 1
            total.prompt_tokens += answer.tokens_in
            total.evaluated += answer.prompt_evaluated or 0
            total.prompt_seconds += answer.prompt_seconds or 0.0
            total.wall_seconds += answer.seconds
            total.restores += (backend.states.restored if backend.states else 0) - before
            total.per_call.append({"purpose": purpose, "tokens": answer.tokens_in,
                                   "evaluated": answer.prompt_evaluated, "seconds": round(answer.seconds, 3)})
    return totals


def bench_kv(datasets: Sequence[str] = ("fincl",), methods: Sequence[str] = DEFAULT_METHODS, *, facts: int = 2,
             settings: Sequence[Setting] = (), model: str = "qwen2.5-0.5b", data: str | Path | None = None,
             progress: bool = True) -> dict[str, Any]:
    """Build each order's request stream with the simulated model, then replay it on llama.cpp per setting."""
    from dev.bench_prefix import simulated_logs

    settings = list(settings) or settings_grid(("evidence-first", "shared-first"), (0, 16), (512,), (2,))
    orders = list(dict.fromkeys(s.order for s in settings))
    logs = simulated_logs(datasets, methods, facts=facts, profile="cpu", orders=orders, data=data, progress=progress)
    totals = replay({order: log.entries for order, log in logs.items()}, settings, model=model, progress=progress)
    return {"datasets": list(datasets), "methods": list(methods), "facts_per_dataset": facts, "model": model,
            "settings": {s.name: {**dataclasses.asdict(s), **totals[s.name].to_dict()} for s in settings}}


def format_table(result: dict[str, Any]) -> str:
    """Per setting: tokens sent and evaluated, seconds, speed, and the ratios against the first setting."""
    rows = list(result["settings"].items())
    head = (f"{result['model']} (llama.cpp), {result['facts_per_dataset']} facts of {', '.join(result['datasets'])}, "
            f"methods {', '.join(result['methods'])}, one generated token per call")
    columns = ("calls", "tok sent", "evaluated", "reused", "restores", "prompt s", "wall s", "prompt tok/s",
               "eval x", "wall x")
    lines = [head, f"{'setting':<52}" + "".join(f"{c:>12}" for c in columns)]
    base = rows[0][1]
    for name, row in rows:
        cells = (row["requests"], row["prompt_tokens"], row["evaluated"], f"{row['reused_share']:.1%}",
                 row["restores"], row["prompt_seconds"], row["wall_seconds"], row["prompt_tok_s"],
                 f"{row['evaluated'] / base['evaluated']:.2f}" if base["evaluated"] else "-",
                 f"{row['wall_seconds'] / base['wall_seconds']:.2f}" if base["wall_seconds"] else "-")
        lines.append(f"{name:<52}" + "".join(f"{c:>12}" for c in cells))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from dev.cli import names, numbers, request_stream_parser, write_json
    from fhs.core.errors import InputError
    from fhs.method.config import PROMPT_ORDERS

    parser = request_stream_parser("python -m dev.bench_kv", __doc__.split("\n")[0], datasets="fincl",
                                   methods=DEFAULT_METHODS, facts=2)
    parser.add_argument("--model", default="qwen2.5-0.5b", help="the GGUF model")
    parser.add_argument("--orders", default="evidence-first,shared-first", help="prompt orders to replay")
    parser.add_argument("--kv-states", default="0,16", help="saved KV states to compare (0: the last call's only)")
    parser.add_argument("--n-batch", default="512", help="llama.cpp batch sizes (n_batch = n_ubatch)")
    parser.add_argument("--n-threads", default="2", help="llama.cpp thread counts")
    args = parser.parse_args(argv)
    for order in names(args.orders):
        if order not in PROMPT_ORDERS:
            raise InputError(f"unknown prompt order {order!r}", field="orders", fix=f"use {', '.join(PROMPT_ORDERS)}")
    settings = settings_grid(names(args.orders), numbers(args.kv_states, "kv-states"),
                             numbers(args.n_batch, "n-batch"), numbers(args.n_threads, "n-threads"))
    result = bench_kv(args.dataset or ["fincl"], names(args.methods), facts=args.facts, settings=settings,
                      model=args.model, data=args.data)
    print(format_table(result))
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
