"""What each ``fhs`` subcommand does once its arguments are parsed.

Heavy imports stay inside the commands, so ``fhs --help`` and a bad option answer at once.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from fhs.cli.parser import names
from fhs.core.errors import InputError
from fhs.data.datasets import DATASETS
from fhs.data.domain import available_domains
from fhs.data.taxonomies import TAXONOMIES
from fhs.method.config import DEFAULT_CONFIG
from fhs.retrieval.kinds import DEFAULT_RETRIEVER, retriever_kind


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
    if args.what in ("prefix", "kv"):
        return cmd_bench_prefix(args)
    from fhs.run.bench import bench_retrieval
    from fhs.run.bench_dense import bench_dense

    if not args.dataset or len(args.dataset) != 1:
        raise InputError("bench retrieval takes one --dataset", field="dataset", fix=f"one of {names(DATASETS)}")
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

    methods = _names(args.methods or "direct,structured,fhs")
    result = bench_llm(args.dataset or ["fincl", "codiesp"], methods, profile=args.profile or "cpu",
                       backend=args.backend, model=args.model, facts=args.facts or 3, data=args.data,
                       cache=args.cache)
    print(format_table(result))
    if args.out:
        write_json_atomic(args.out, result)
    return result


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def _numbers(text: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in _names(text)]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        raise InputError(f"{text!r} is not a list of numbers", field=flag, fix="e.g. --n-batch 128,512")
    return values


def cmd_bench_prefix(args: argparse.Namespace) -> dict:
    """``fhs bench prefix`` (shared prefixes, simulated or from logs) and ``fhs bench kv`` (llama.cpp)."""
    from fhs.run.records import write_json_atomic

    if args.what == "prefix":
        from fhs.run.bench_prefix import DEFAULT_METHODS, bench_prefix, format_table

        result = bench_prefix(args.dataset or ["fincl", "codiesp"], _names(args.methods or ",".join(DEFAULT_METHODS)),
                              facts=args.facts or 50, profile=args.profile or "paper", data=args.data,
                              logs=args.log, capacity_blocks=args.capacity_blocks, out_dir=args.log_dir)
    else:
        from fhs.method.config import PROMPT_ORDERS
        from fhs.run.bench_kv import DEFAULT_METHODS, bench_kv, format_table, settings_grid

        for order in _names(args.orders):
            if order not in PROMPT_ORDERS:
                raise InputError(f"unknown prompt order {order!r}", field="orders", fix=f"use {names(PROMPT_ORDERS)}")
        settings = settings_grid(_names(args.orders), _numbers(args.kv_states, "kv-states"),
                                 _numbers(args.n_batch, "n-batch"), _numbers(args.n_threads, "n-threads"))
        result = bench_kv(args.dataset or ["fincl"], _names(args.methods or ",".join(DEFAULT_METHODS)),
                          facts=args.facts or 2, settings=settings, model=args.model or "qwen2.5-0.5b",
                          data=args.data)
    print(format_table(result))
    if args.out:
        write_json_atomic(args.out, result)
    return result
