"""The prefix requests share, before and after the prompt reorder, side by side (``python -m dev.bench_prefix``).

Each prompt order (``FHSConfig.prompt_order``) runs the same methods on the same
context-level sample with the simulated model (``fhs.plan.simulated``:
schema-valid answers, no latency) behind a fresh response cache, as ``fhs run``
would, and every request that reaches the model is logged in send order. The
logs are then measured with ``dev.prefix_reuse``: the share of prompt tokens a
vLLM prefix cache (16-token blocks) could serve from earlier requests, and what
llama.cpp's saved states could reuse. Given request logs instead (``--log``, for
example a rehearsal's traffic), it measures those.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from dev.prefix_reuse import RequestLog, measure, qwen_tokenizer, read_request_log, tokenized
from fhs.data.sampling import sample_by_context
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.run.ledger import MemoryLedger
from fhs.method.prompting import prompt_counter
from fhs.method.registry import get_method
from fhs.plan.simulated import SimulatedBackend

DEFAULT_METHODS = ("fhs", "structured", "free-text", "feedback-refine")
STATES = (1, 16)  # llama.cpp: the previous call's KV only, or the best of 16 saved states (the default)
ORDERS = ("evidence-first", "shared-first")  # before the reorder (the authors' order), after


def simulated_logs(datasets: Sequence[str], methods: Sequence[str], *, facts: int = 50, profile: str = "paper",
                   orders: Sequence[str] = ORDERS, data: str | Path | None = None,
                   progress: bool = True) -> dict[str, RequestLog]:
    """One request log per prompt order: ``methods`` one after another on each dataset's sample."""
    from fhs.run.inputs import ModelChoice, load_experiment

    for method in methods:
        get_method(method)  # an unknown name fails before anything is loaded
    experiments = [load_experiment(dataset, data=data, progress=False) for dataset in datasets]
    samples = [sample_by_context(e.facts, facts)[:facts] for e in experiments]
    logs: dict[str, RequestLog] = {}
    with tempfile.TemporaryDirectory(prefix="fhs-prefix-") as scratch:
        for order in orders:
            log = RequestLog(SimulatedBackend(counter=prompt_counter()))
            store = ResponseCache(Path(scratch) / f"{order}.sqlite")
            choice = ModelChoice.resolve(profile, cache=Path(scratch) / f"{order}.sqlite")
            choice._llm = CachedLLM(log, store)
            for experiment, chosen in zip(experiments, samples):
                config = choice.profile.fhs_config(prompt_order=order)
                ctx = experiment.llm_context(choice, config, ledger=MemoryLedger())
                for method in methods:
                    function = get_method(method)
                    for fact in tqdm(chosen, desc=f"{order}/{experiment.spec.name}/{method}",
                                     disable=not progress, leave=False):
                        function(fact, ctx)
            store.close()
            logs[order] = log
    return logs


def measure_logs(logs: dict[str, Sequence[tuple[str, list[dict[str, str]]]]],
                 capacity_blocks: int | None = None) -> dict[str, Any]:
    """Each log's shares under every cache model, with the Qwen vocabulary's token ids."""
    tokenize = qwen_tokenizer()
    return {name: {model: share.to_dict() for model, share in
                   measure(tokenized(entries, tokenize), capacity_blocks=capacity_blocks, states=STATES).items()}
            for name, entries in logs.items()}


def bench_prefix(datasets: Sequence[str], methods: Sequence[str] = DEFAULT_METHODS, *, facts: int = 50,
                 profile: str = "paper", data: str | Path | None = None, logs: Sequence[str | Path] = (),
                 capacity_blocks: int | None = None, out_dir: str | Path | None = None,
                 progress: bool = True) -> dict[str, Any]:
    """Shares for the given request logs, or for a simulated run in each prompt order."""
    if logs:
        stems = [Path(path).stem for path in logs]
        names = stems if len(set(stems)) == len(stems) else [str(path) for path in logs]
        entries = {name: list(read_request_log(path)) for name, path in zip(names, logs)}
        setting: dict[str, Any] = {"logs": [str(p) for p in logs]}
    else:
        made = simulated_logs(datasets, methods, facts=facts, profile=profile, data=data, progress=progress)
        if out_dir is not None:
            for order, log in made.items():
                log.write(Path(out_dir) / f"requests-{order}.jsonl")
        entries = {order: log.entries for order, log in made.items()}
        setting = {"datasets": list(datasets), "methods": list(methods), "facts_per_dataset": facts,
                   "profile": profile}
    return {**setting, "capacity_blocks": capacity_blocks, "shares": measure_logs(entries, capacity_blocks)}


def format_table(result: dict[str, Any]) -> str:
    """The side-by-side table ``python -m dev.bench_prefix`` prints: one column per log, one block per cache model."""
    names = list(result["shares"])
    width = max(14, *(len(n) + 2 for n in names))
    where = (", ".join(result["logs"]) if "logs" in result else
             f"{result['facts_per_dataset']} facts of each of {', '.join(result['datasets'])}, methods "
             f"{', '.join(result['methods'])}, profile {result['profile']}, simulated model")
    lines = [f"Prompt tokens a prefix cache reuses ({where})", " " * 28 + "".join(f"{n:>{width}}" for n in names)]
    models = list(next(iter(result["shares"].values())))
    for model in models:
        first = result["shares"][names[0]][model]
        lines.append(first["model"])
        lines.append(f"  {'all requests':<26}" + "".join(
            f"{result['shares'][n][model]['share']:>{width}.1%}" for n in names))
        for purpose in first["by_purpose"]:
            cells = [result["shares"][n][model]["by_purpose"].get(purpose) for n in names]
            lines.append(f"    {purpose:<24}" + "".join(
                f"{c['share']:>{width}.1%}" if c else f"{'-':>{width}}" for c in cells))
    totals = [result["shares"][n][models[0]] for n in names]
    lines.append(f"  {'requests':<26}" + "".join(f"{t['requests']:>{width},}" for t in totals))
    lines.append(f"  {'prompt tokens':<26}" + "".join(f"{t['prompt_tokens']:>{width},}" for t in totals))
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    from dev.cli import names, request_stream_parser, write_json

    parser = request_stream_parser("python -m dev.bench_prefix", __doc__.split("\n")[0], datasets="fincl, codiesp",
                                   methods=DEFAULT_METHODS, facts=50)
    parser.add_argument("--profile", default="paper", help="whose prompt budgets the simulated run uses")
    parser.add_argument("--log", action="append", default=[],
                        help="measure this request log (JSONL of chat messages in send order) instead of a "
                             "simulated run; repeat to compare logs side by side")
    parser.add_argument("--log-dir", default=None, help="also write the simulated runs' request logs here")
    parser.add_argument("--capacity-blocks", type=int, default=None,
                        help="a prefix cache of this many 16-token blocks, least recently used evicted "
                             "(default: unbounded)")
    args = parser.parse_args(argv)
    result = bench_prefix(args.dataset or ["fincl", "codiesp"], names(args.methods), facts=args.facts,
                          profile=args.profile, data=args.data, logs=args.log, capacity_blocks=args.capacity_blocks,
                          out_dir=args.log_dir)
    print(format_table(result))
    write_json(args.out, result)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
