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
from fhs.data.taxonomies import TAXONOMIES
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
                            help=f"with --facts: a built-in taxonomy by name ({_names(TAXONOMIES)}) or your own "
                                 "concept file (JSONL/CSV/TSV with id, label[, definition, datatype])")
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
    bench.add_argument("what", choices=["retrieval"])
    _add_data_args(bench)
    bench.add_argument("--queries", type=int, default=2000, help="queries timed for our scorer")
    bench.add_argument("--reference-queries", type=int, default=50, help="queries timed for rank-bm25")
    show = commands.add_parser("show", help="write an offline HTML page showing what a run did with chosen facts")
    show.add_argument("run_dir", help="a run directory (the --out of `fhs run`, or one under runs/<profile>/)")
    show.add_argument("--fact", action="append", default=[], help="a fact id (repeat for several facts on one page)")
    show.add_argument("--compare", action="append", default=[],
                      help="another run directory shown side by side (repeat for more)")
    show.add_argument("--out", default=None, help="the HTML file (default: RUN_DIR/show.html)")
    show.add_argument("--list", action="store_true", help="print the run's fact ids with their gold rank, and stop")
    show.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")

    taxonomy = commands.add_parser("taxonomy", help="built-in taxonomies as files")
    taxonomy_commands = taxonomy.add_subparsers(dest="taxonomy_command", required=True)
    export = taxonomy_commands.add_parser("export", help="write a built-in taxonomy as a concept file")
    export.add_argument("name", help=_names(TAXONOMIES))
    export.add_argument("--out", required=True, help="the concept file (.jsonl, .csv or .tsv)")
    export.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")

    facts = commands.add_parser("facts", help="located facts from your own sources")
    facts_commands = facts.add_subparsers(dest="facts_command", required=True)
    from_ixbrl = facts_commands.add_parser("from-ixbrl", help="the located facts of inline-XBRL filings (.htm or .htm.gz)")
    from_ixbrl.add_argument("filings", nargs="+", help="one or more inline-XBRL filings")
    from_ixbrl.add_argument("--out", required=True, help="the facts file (JSONL), for `fhs run --facts`")
    from_ixbrl.add_argument("--taxonomy", default="us-gaap-2024",
                            help="datatypes come from this taxonomy, and facts whose gold is outside it are "
                                 "dropped, as the ixbrl dataset does (a name, a concept file, or 'none')")
    from_ixbrl.add_argument("--keep-unreachable", action="store_true",
                            help="keep facts whose gold concepts are all outside the taxonomy")
    from_ixbrl.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    return parser


def cmd_show(args: argparse.Namespace) -> None:
    from pathlib import Path

    from fhs.book.explorer import check_fact_ids, write_explorer

    if args.list:
        from fhs.run.records import read_records

        lines = [f"{r['id']}\t{r.get('modality', '')}\trank={r.get('rank')}"
                 for r in read_records(_records_file(args.run_dir))]
        try:
            sys.stdout.write("\n".join(lines) + "\n")
        except BrokenPipeError:  # `fhs show RUN --list | head`
            sys.stderr.close()
        return
    if not args.fact:
        raise InputError("no fact chosen", field="fact",
                         fix=f"pass --fact ID; list the run's fact ids with `fhs show {args.run_dir} --list`")
    runs = [args.run_dir, *args.compare]
    for run_dir in runs:  # an unknown id fails before any data is loaded
        check_fact_ids(run_dir, args.fact)
    out = Path(args.out) if args.out else Path(args.run_dir) / "show.html"
    write_explorer(runs, args.fact, out, data=args.data)
    print(out)


def _records_file(run_dir: str):
    from pathlib import Path

    from fhs.book.explorer import check_fact_ids

    check_fact_ids(run_dir, [])  # names a folder that is not a run
    return Path(run_dir) / "records.jsonl"


def cmd_taxonomy(args: argparse.Namespace) -> None:
    from fhs.core.errors import choose
    from fhs.data.taxonomies import load_taxonomy
    from fhs.data.taxonomies.generic import write_generic

    choose(TAXONOMIES, args.name, "taxonomy")
    taxonomy = load_taxonomy(args.name, args.data)
    path = write_generic(taxonomy, args.out)
    print(f"{len(taxonomy):,} concepts of {args.name} -> {path}")


def cmd_facts(args: argparse.Namespace) -> None:
    from fhs.data.datasets.ixbrl import load_filing
    from fhs.data.facts import write_facts
    from fhs.data.taxonomies import load_taxonomy, load_taxonomy_file

    name = args.taxonomy
    taxonomy = None if name == "none" else load_taxonomy(name, args.data) if name in TAXONOMIES \
        else load_taxonomy_file(name)
    facts = []
    for filing in args.filings:
        facts.extend(load_filing(filing, taxonomy, keep_unreachable=args.keep_unreachable or taxonomy is None))
    write_facts(facts, args.out)
    tables = sum(f.modality == "table" for f in facts)
    print(f"{len(facts):,} located facts ({tables:,} table, {len(facts) - tables:,} text) "
          f"from {len(args.filings)} filing(s) -> {args.out}")


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
    if args.facts:  # where the inputs came from, so `fhs show` can find them again
        from pathlib import Path

        taxonomy = args.taxonomy if args.taxonomy in TAXONOMIES else str(Path(args.taxonomy).resolve())
        run_config.update(facts=str(Path(args.facts).resolve()), taxonomy=taxonomy,
                          domain=args.domain or experiment.spec.domain)
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
        return load_experiment_from_files(args.facts, args.taxonomy, domain=args.domain, w_cov=args.wcov,
                                          data=args.data)
    if args.dataset is None:
        raise InputError("no input", field="dataset", fix="pass --dataset NAME, or --facts FILE with --taxonomy FILE")
    return load_experiment(args.dataset, data=args.data, w_cov=args.wcov, progress=not args.quiet)


def cmd_bench(args: argparse.Namespace) -> dict:
    from fhs.run.bench import bench_retrieval

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
        elif args.command == "show":
            cmd_show(args)
        elif args.command == "taxonomy":
            cmd_taxonomy(args)
        elif args.command == "facts":
            cmd_facts(args)
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
