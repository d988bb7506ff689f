"""The ``fhs`` command line: run a method on a dataset, check a domain file, or benchmark retrieval.

Bad input of any kind ends in one line on stderr that names the file, line or
field and the fix, and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import asdict

from fhs.core.errors import InputError
from fhs.data.datasets import DATASETS
from fhs.data.domain import available_domains
from fhs.data.taxonomies import TAXONOMIES
from fhs.llm.contract import BackendError
from fhs.llm.factory import BACKENDS
from fhs.llm.openai import STRUCTURED_MODES
from fhs.method.config import DEFAULT_CONFIG, NAMED_CONFIGS
from fhs.method.knobs import FUSION, NORMALISE, RENDER, WINDOW
from fhs.method.registry import METHODS
from fhs.retrieval.encoders import DEFAULT_MODEL, MODELS
from fhs.retrieval.kinds import DEFAULT_RETRIEVER, RETRIEVERS, retriever_kind
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
    parser.add_argument("--limit", type=_positive_int("limit"), default=None, help="use only the first N facts")
    parser.add_argument("--retriever", choices=list(RETRIEVERS), default=DEFAULT_RETRIEVER,
                        help="first-stage retriever: " + "; ".join(f"{k} = {v}" for k, v in RETRIEVERS.items()))
    parser.add_argument("--dense-model", choices=list(MODELS), default=DEFAULT_MODEL,
                        help=f"embedding model of dense and hybrid (default {DEFAULT_MODEL})")


def _positive_int(name: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{name} expects a whole number, got {text!r}") from None
        if value < 1:
            raise argparse.ArgumentTypeError(f"--{name} must be at least 1, got {value}")
        return value
    return parse


def _weight(name: str):
    """An argparse type: a finite number >= 0 (``nan`` and ``inf`` would poison every score)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{name} expects a number, got {text!r}") from None
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"--{name} must be a finite number >= 0, got {text}")
        return value

    return parse


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is the same one-line error and exit status 2 as any bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(message, fix=f"see {self.prog} --help")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fhs", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run one method on one dataset")
    _add_data_args(run, own_files=True)
    run.add_argument("--method", required=True, help=_names(METHODS))
    run.add_argument("--wcov", type=_weight("wcov"), default=None, help="label-coverage weight w_cov (default 1.0 for bm25, 0 for dense and hybrid)")
    knobs = run.add_argument_group("FHS knobs", "each a configuration of the one FHS code path; a variant that "
                                   "changes only these replays cached hypotheses and verdicts")
    knobs.add_argument("--beta", type=_weight("beta"), default=None, help="verifier weight beta of Eq. 3 (default 0.6; 0 = no verifier)")
    knobs.add_argument("--j", type=_positive_int("j"), default=None, help="hypotheses sampled per fact, J (default 2)")
    knobs.add_argument("--fusion", choices=list(FUSION), default=None, help="RRF over the rankings: summed (paper) or mean")
    knobs.add_argument("--normalise", choices=list(NORMALISE), default=None,
                       help="fused scores range-normalised over the pool (paper) or raw")
    knobs.add_argument("--render", choices=list(RENDER), default=None,
                       help="query forms per hypothesis: both (paper), label only or definition only")
    knobs.add_argument("--window", choices=list(WINDOW), default=None,
                       help="verifier window: one candidate per category profile (paper) or the plain top K_v")
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
    run.add_argument("--sample", type=_positive_int("sample"), default=None,
                     help="a context-level sample of about N facts (default: the profile's for LLM methods)")
    run.add_argument("--cache", default=None, help="SQLite response cache (default $FHS_CACHE/llm/responses.sqlite)")
    run.add_argument("--selector", choices=["on", "off"], default=None,
                     help="the shared listwise selector (default: on for structured and fhs, off for direct)")
    run.add_argument("--config", choices=list(NAMED_CONFIGS), default=DEFAULT_CONFIG,
                     help="named FHS configuration: " + "; ".join(
                         f"{c.name} = {c.description}" for c in NAMED_CONFIGS.values())
                     + f" (default {DEFAULT_CONFIG})")
    run.add_argument("--workers", type=_positive_int("workers"), default=None,
                     help="facts processed at once, to keep a server busy (default: the profile's; 1 on the CPU)")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--fresh", action="store_true",
                     help="discard the records already in --out instead of resuming from them")
    run.add_argument("--replay-unparsed", action="store_true",
                     help="serve cached answers that a stage could not parse (default: ask the model again)")
    run.add_argument("--replay-from-any-server", action="store_true",
                     help="reuse cached answers made by another server URL for the same model name")

    domain = commands.add_parser("domain", help="check a domain file (dimensions, glosses, category profiles)")
    domain.add_argument("action", choices=["check"])
    domain.add_argument("file", help="domain YAML file (see fhs/data/domains/us-gaap.yaml)")
    domain.add_argument("--taxonomy", default=None,
                        help="concept file: also report categories that match no concept, and the profile count")

    bench = commands.add_parser("bench", help="benchmarks that print ratios measured side by side")
    bench.add_argument("what", choices=["retrieval", "llm"])
    bench.add_argument("--dataset", action="append", default=None,
                       help=f"{_names(DATASETS)}; repeat for several (llm: default fincl and codiesp)")
    bench.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    bench.add_argument("--limit", type=int, default=None, help="retrieval: use only the first N facts")
    bench.add_argument("--queries", type=_positive_int("queries"), default=None,
                       help="retrieval: queries timed (default 2000 for bm25, 200 for dense and hybrid)")
    bench.add_argument("--reference-queries", type=int, default=50, help="queries timed for rank-bm25")
    bench.add_argument("--retriever", choices=list(RETRIEVERS), default=DEFAULT_RETRIEVER,
                       help="retrieval: bm25 (against rank-bm25), or dense/hybrid measured beside BM25")
    bench.add_argument("--dense-model", choices=list(MODELS), default=DEFAULT_MODEL,
                       help=f"retrieval: embedding model of dense and hybrid (default {DEFAULT_MODEL})")
    bench.add_argument("--embed-limit", type=_positive_int("embed-limit"), default=None,
                       help="dense/hybrid: time the cold embedding on the first N concepts only "
                            "(default: the whole taxonomy, in a scratch folder)")
    bench.add_argument("--methods", default="direct,structured,fhs",
                       help=f"llm: comma-separated, from {_names(METHODS)}")
    bench.add_argument("--facts", type=int, default=3, help="llm: facts per dataset (whole contexts)")
    bench.add_argument("--profile", default="cpu", help=f"llm: {_names(PROFILES)}")
    bench.add_argument("--backend", default=None, help=f"llm: {_names(BACKENDS)} (default: the profile's)")
    bench.add_argument("--model", default=None, help="llm: model name (default: the profile's)")
    bench.add_argument("--cache", default=None,
                       help="llm: a response cache to reuse (default: a fresh temporary one, so the model is measured)")
    bench.add_argument("--out", default=None, help="llm: also write the result as JSON here")

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
    from fhs.data.taxonomies.ids import check_gold
    from fhs.data.sampling import sample_by_context
    from fhs.method.registry import LLM_METHODS, get_method
    from fhs.run.inputs import ModelChoice
    from fhs.run.runner import run_method

    get_method(args.method)  # fail on an unknown method before loading any data
    selector = args.selector == "on" if args.selector else args.method in LLM_METHODS
    uses_model = args.method in LLM_METHODS or selector
    model = None
    if uses_model and (args.facts or args.taxonomy) and not args.domain:
        raise InputError(f"--method {args.method} asks a model, which needs the taxonomy's domain", field="domain",
                         fix="pass --domain FILE.yaml (check it with `fhs domain check FILE.yaml`) or one of "
                             + ", ".join(available_domains()))
    if uses_model:
        model = ModelChoice.resolve(args.profile or "cpu", backend=args.backend, model=args.model,
                                    base_urls=args.base_url, seed=args.seed, cache=args.cache,
                                    structured=args.structured, replay_unparsed=args.replay_unparsed,
                                    any_server=args.replay_from_any_server)
    experiment = _experiment(args)
    facts = experiment.facts
    if args.limit is not None:
        facts = facts[: args.limit]
    elif args.sample is not None or model is not None:
        facts = sample_by_context(facts, args.sample if args.sample is not None else model.profile.llm_facts)
    check_gold(facts, experiment.taxonomy, args.facts or experiment.spec.name)
    inputs = experiment.fingerprint(llm=model is not None)
    if model is not None:
        inputs["model"] = model.fingerprint()
    run_config = {
        "dataset": experiment.spec.name,
        "method": args.method,
        "retriever": retriever_kind(experiment.retriever),
        "retrieval": asdict(experiment.retriever.config),
        "inputs": inputs,
    }
    if args.facts:  # where the inputs came from, so `fhs show` can find them again (not part of the stamp)
        from pathlib import Path

        taxonomy = args.taxonomy if args.taxonomy in TAXONOMIES else str(Path(args.taxonomy).resolve())
        run_config["sources"] = {"facts": str(Path(args.facts).resolve()), "taxonomy": taxonomy,
                                 "domain": args.domain or experiment.spec.domain}
    if model is not None:
        ctx = experiment.llm_context(model)
        ctx.config = _with_knobs(ctx.config.with_named(args.config).replace(selector=selector), args)
        run_config["model"] = model.describe()
        if args.config != DEFAULT_CONFIG:
            run_config["fhs_configuration"] = args.config
        run_config["fhs"] = ctx.config.to_dict()
    else:
        ctx = experiment.method_context()
    workers = args.workers or (model.profile.workers if model is not None else 1)
    result = run_method(facts, args.method, ctx, args.out, run_config=run_config, progress=not args.quiet,
                        workers=workers, fresh=args.fresh)
    print(json.dumps({k: v for k, v in result.items() if k != "config"}, indent=2))
    return result


def _with_knobs(config, args: argparse.Namespace):
    """The run's FHSConfig with the knobs given on the command line."""
    from fhs.method.knobs import knob_overrides

    changes = knob_overrides(beta=args.beta, j=args.j, fusion=args.fusion, normalise=args.normalise,
                             render=args.render, window=args.window)
    try:
        return config.replace(**changes)
    except ValueError as error:
        raise InputError(str(error), field=next(iter(changes), "fhs"),
                         fix="see fhs run --help for each knob's range") from None


def _experiment(args: argparse.Namespace):
    """A named dataset, or the user's own facts and taxonomy files."""
    from fhs.run.inputs import load_experiment, load_experiment_from_files

    if args.facts or args.taxonomy:
        if not (args.facts and args.taxonomy):
            raise InputError("--facts and --taxonomy go together", field="taxonomy" if args.facts else "facts",
                             fix="pass both files, or --dataset for a bundled dataset")
        return load_experiment_from_files(args.facts, args.taxonomy, domain=args.domain, w_cov=args.wcov,
                                          retriever=args.retriever, dense_model=args.dense_model, data=args.data)
    if args.dataset is None:
        raise InputError("no input", field="dataset", fix="pass --dataset NAME, or --facts FILE with --taxonomy FILE")
    return load_experiment(args.dataset, data=args.data, w_cov=args.wcov, progress=not args.quiet,
                           retriever=args.retriever, dense_model=args.dense_model)


def cmd_domain(args: argparse.Namespace) -> int:
    """Print the check's errors and warnings, one line each; exit status 1 when there are errors."""
    from fhs.data.domain_check import check_domain
    from fhs.data.taxonomies import load_taxonomy_file

    taxonomy = load_taxonomy_file(args.taxonomy) if args.taxonomy else None
    report = check_domain(args.file, taxonomy)
    for line in report.lines():
        print(line, file=sys.stdout if line.startswith(("warning", args.file)) else sys.stderr)
    return 0 if report.ok else 1


def cmd_bench(args: argparse.Namespace) -> dict:
    if args.what == "llm":
        return cmd_bench_llm(args)
    from fhs.run.bench import bench_retrieval
    from fhs.run.bench_dense import bench_dense

    if not args.dataset or len(args.dataset) != 1:
        raise InputError("bench retrieval takes one --dataset", field="dataset", fix=f"one of {_names(DATASETS)}")
    if args.retriever == DEFAULT_RETRIEVER:
        result = bench_retrieval(args.dataset[0], data=args.data, limit=args.limit,
                                 n_queries=args.queries or 2000, n_reference=args.reference_queries)
    else:
        result = bench_dense(args.dataset[0], retriever=args.retriever, model=args.dense_model, data=args.data,
                             limit=args.limit, n_queries=args.queries or 200, embed_limit=args.embed_limit)
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
    try:
        args = parser.parse_args(argv)
    except InputError as error:
        print(f"fhs: error: {error}", file=sys.stderr)
        return 2
    kept = f"; finished facts are kept in {args.out}, run the same command again to continue" \
        if getattr(args, "out", None) else ""
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
        elif args.command == "domain":
            return cmd_domain(args)
    except InputError as error:
        print(f"fhs: error: {error}", file=sys.stderr)
        return 2
    except BackendError as error:
        print(f"fhs: error: {error}{kept}", file=sys.stderr)
        return 3
    except OSError as error:  # the disk, not the input: --out unwritable, full, or not a directory
        where = f"{error.filename}: " if error.filename else ""
        print(f"fhs: error: {where}{error.strerror or error}{kept}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fhs: stopped{kept.replace('; finished', ': finished')}" if kept else "fhs: stopped",
              file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
