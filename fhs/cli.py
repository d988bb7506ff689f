"""The ``fhs`` command line: run a method on a dataset, or benchmark retrieval.

Bad input of any kind ends in one line on stderr that names the file, line or
field and the fix, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from fhs.errors import InputError


def _add_data_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", required=True, help="fincl, ixbrl, ixbrl-dev or codiesp")
    parser.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    parser.add_argument("--limit", type=int, default=None, help="use only the first N facts")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fhs", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run one method on one dataset")
    _add_data_args(run)
    run.add_argument("--method", required=True, help="direct or oracle")
    run.add_argument("--wcov", type=float, default=None, help="label-coverage weight w_cov (default 1.0)")
    run.add_argument("--out", required=True, help="run directory for records.jsonl and metrics.json")
    run.add_argument("--quiet", action="store_true", help="no progress bar")

    bench = commands.add_parser("bench", help="benchmarks that print ratios measured side by side")
    bench.add_argument("what", choices=["retrieval"])
    _add_data_args(bench)
    bench.add_argument("--queries", type=int, default=2000, help="queries timed for our scorer")
    bench.add_argument("--reference-queries", type=int, default=50, help="queries timed for rank-bm25")
    return parser


def cmd_run(args: argparse.Namespace) -> dict:
    from fhs.experiment import load_experiment
    from fhs.methods import get_method
    from fhs.runner import run_method

    get_method(args.method)  # fail on an unknown method before loading any data
    experiment = load_experiment(args.dataset, data=args.data, limit=args.limit, w_cov=args.wcov)
    ctx = experiment.method_context()
    run_config = {
        "dataset": args.dataset,
        "method": args.method,
        "limit": args.limit,
        "retrieval": asdict(experiment.retriever.config),
    }
    result = run_method(experiment.facts, args.method, ctx, args.out, run_config=run_config, progress=not args.quiet)
    print(json.dumps({k: v for k, v in result.items() if k != "config"}, indent=2))
    return result


def cmd_bench(args: argparse.Namespace) -> dict:
    from fhs.bench import bench_retrieval

    result = bench_retrieval(args.dataset, data=args.data, limit=args.limit,
                             n_queries=args.queries, n_reference=args.reference_queries)
    print(json.dumps(result, indent=2))
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
