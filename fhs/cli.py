"""The ``fhs`` command line: run a method on a dataset, or benchmark retrieval.

Bad input of any kind ends in one line on stderr that names the file, line or
field and the fix, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from fhs.core.errors import InputError
from fhs.data.datasets import DATASETS
from fhs.data.domain import available_domains
from fhs.llm.contract import BackendError
from fhs.llm.factory import BACKENDS
from fhs.llm.openai import STRUCTURED_MODES
from fhs.method.registry import METHODS
from fhs.run.profiles import PROFILES


def _names(registry) -> str:
    """``a, b or c`` from a registry's keys: help texts list what the code accepts."""
    names = list(registry)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _add_data_args(parser: argparse.ArgumentParser, own_files: bool = False) -> None:
    parser.add_argument("--dataset", required=not own_files, default=None,
                        help=_names(DATASETS) + (" (or --facts with --taxonomy)" if own_files else ""))
    if own_files:
        parser.add_argument("--facts", default=None, help="your own located facts (JSONL, see fhs/data/facts.py)")
        parser.add_argument("--taxonomy", default=None,
                            help="your own taxonomy (JSONL/CSV/TSV with id, label[, definition, datatype])")
        parser.add_argument("--domain", default=None,
                            help=f"dimension set for LLM methods: {', '.join(available_domains())} or a domain YAML file")
    parser.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N facts")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fhs", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run one method on one dataset")
    _add_data_args(run, own_files=True)
    run.add_argument("--method", required=True, help=_names(METHODS))
    run.add_argument("--wcov", type=float, default=None, help="label-coverage weight w_cov (default 1.0)")
    run.add_argument("--out", required=True, help="run directory for records.jsonl and metrics.json")
    run.add_argument("--profile", default=None,
                     help=f"{_names(PROFILES)}: backend, model and sample size (default cpu for LLM methods)")
    run.add_argument("--backend", default=None, help=f"{_names(BACKENDS)} (default: the profile's)")
    run.add_argument("--model", default=None, help="model name (default: the profile's)")
    run.add_argument("--base-url", action="append", default=None,
                     help="OpenAI-compatible server URL; repeat to spread requests over several servers")
    run.add_argument("--structured", choices=STRUCTURED_MODES, default=None,
                     help="how an OpenAI-compatible server gets the schema: json_schema (vLLM), "
                          "json_object or gbnf (llama.cpp's server)")
    run.add_argument("--seed", type=int, default=0, help="sampling seed (each hypothesis j samples with its own)")
    run.add_argument("--sample", type=int, default=None,
                     help="a context-level sample of about N facts (default: the profile's for LLM methods)")
    run.add_argument("--cache", default=None, help="SQLite response cache (default $FHS_CACHE/llm/responses.sqlite)")
    run.add_argument("--selector", choices=["on", "off"], default=None,
                     help="the shared listwise selector (default: on for structured and fhs, off for direct)")
    run.add_argument("--workers", type=int, default=None,
                     help="facts processed at once, to keep a server busy (default: the profile's; 1 on the CPU)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")

    bench = commands.add_parser("bench", help="benchmarks that print ratios measured side by side")
    bench.add_argument("what", choices=["retrieval", "llm"])
    bench.add_argument("--dataset", action="append", default=None,
                       help=f"{_names(DATASETS)}; repeat for several (llm: default fincl and codiesp)")
    bench.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    bench.add_argument("--limit", type=int, default=None, help="retrieval: use only the first N facts")
    bench.add_argument("--queries", type=int, default=2000, help="queries timed for our scorer")
    bench.add_argument("--reference-queries", type=int, default=50, help="queries timed for rank-bm25")
    bench.add_argument("--methods", default="direct,structured,fhs",
                       help=f"llm: comma-separated, from {_names(METHODS)}")
    bench.add_argument("--facts", type=int, default=3, help="llm: facts per dataset (whole contexts)")
    bench.add_argument("--profile", default="cpu", help=f"llm: {_names(PROFILES)}")
    bench.add_argument("--backend", default=None, help=f"llm: {_names(BACKENDS)} (default: the profile's)")
    bench.add_argument("--model", default=None, help="llm: model name (default: the profile's)")
    bench.add_argument("--cache", default=None,
                       help="llm: a response cache to reuse (default: a fresh temporary one, so the model is measured)")
    bench.add_argument("--out", default=None, help="llm: also write the result as JSON here")
    return parser


def cmd_run(args: argparse.Namespace) -> dict:
    from fhs.data.sampling import sample_by_context
    from fhs.method.registry import LLM_METHODS, get_method
    from fhs.run.inputs import ModelChoice
    from fhs.run.runner import run_method

    get_method(args.method)  # fail on an unknown method before loading any data
    selector = args.selector == "on" if args.selector else args.method in LLM_METHODS
    uses_model = args.method in LLM_METHODS or selector
    model = None
    if uses_model:
        model = ModelChoice.resolve(args.profile or "cpu", backend=args.backend, model=args.model,
                                    base_urls=args.base_url, seed=args.seed, cache=args.cache,
                                    structured=args.structured)
    experiment = _experiment(args)
    facts = experiment.facts
    if args.limit is not None:
        facts = facts[: args.limit]
    elif args.sample is not None or model is not None:
        facts = sample_by_context(facts, args.sample if args.sample is not None else model.profile.llm_facts)
    run_config = {
        "dataset": experiment.spec.name,
        "method": args.method,
        "retrieval": asdict(experiment.retriever.config),
    }
    if model is not None:
        ctx = experiment.llm_context(model)
        ctx.config = ctx.config.replace(selector=selector)
        run_config["model"] = model.describe()
        run_config["fhs"] = ctx.config.to_dict()
    else:
        ctx = experiment.method_context()
    workers = args.workers or (model.profile.workers if model is not None else 1)
    result = run_method(facts, args.method, ctx, args.out, run_config=run_config, progress=not args.quiet,
                        workers=workers)
    print(json.dumps({k: v for k, v in result.items() if k != "config"}, indent=2))
    return result


def _experiment(args: argparse.Namespace):
    """A named dataset, or the user's own facts and taxonomy files."""
    from fhs.run.inputs import load_experiment, load_experiment_from_files

    if args.facts or args.taxonomy:
        if not (args.facts and args.taxonomy):
            raise InputError("--facts and --taxonomy go together", field="taxonomy" if args.facts else "facts",
                             fix="pass both files, or --dataset for a bundled dataset")
        return load_experiment_from_files(args.facts, args.taxonomy, domain=args.domain, w_cov=args.wcov)
    if args.dataset is None:
        raise InputError("no input", field="dataset", fix="pass --dataset NAME, or --facts FILE with --taxonomy FILE")
    return load_experiment(args.dataset, data=args.data, w_cov=args.wcov, progress=not args.quiet)


def cmd_bench(args: argparse.Namespace) -> dict:
    if args.what == "llm":
        return cmd_bench_llm(args)
    from fhs.run.bench import bench_retrieval

    if not args.dataset or len(args.dataset) != 1:
        raise InputError("bench retrieval takes one --dataset", field="dataset", fix=f"one of {_names(DATASETS)}")
    result = bench_retrieval(args.dataset[0], data=args.data, limit=args.limit,
                             n_queries=args.queries, n_reference=args.reference_queries)
    print(json.dumps(result, indent=2))
    return result


def cmd_bench_llm(args: argparse.Namespace) -> dict:
    from fhs.run.bench_llm import bench_llm, format_table
    from fhs.run.records import write_json_atomic

    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    result = bench_llm(args.dataset or ["fincl", "codiesp"], methods, profile=args.profile, backend=args.backend,
                       model=args.model, facts=args.facts, data=args.data, cache=args.cache)
    print(format_table(result))
    if args.out:
        write_json_atomic(args.out, result)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            cmd_run(args)
        elif args.command == "bench":
            cmd_bench(args)
    except InputError as error:
        print(f"fhs: error: {error}", file=sys.stderr)
        return 2
    except BackendError as error:
        kept = f"; finished facts are kept in {args.out}, run the same command again to continue" \
            if getattr(args, "out", None) else ""
        print(f"fhs: error: {error}{kept}", file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
