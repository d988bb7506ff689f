"""What each ``fhs`` subcommand does once its arguments are parsed.

Heavy imports stay inside the commands, so ``fhs --help`` and a bad option answer at once.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from fhs.cli.parser import names
from fhs.core.errors import InputError
from fhs.data.datasets import DATASETS
from fhs.data.domain import available_domains
from fhs.data.taxonomies import TAXONOMIES
from fhs.retrieval.kinds import DEFAULT_RETRIEVER


def cmd_show(args: argparse.Namespace) -> None:
    from pathlib import Path

    from fhs.book.explorer import check_fact_ids, write_explorer

    if args.list:
        from fhs.run.records import read_records

        lines = [
            f"{_printable(r['id'])}\t{_printable(r.get('modality', ''))}\trank={_printable(r.get('rank'))}"
            for r in read_records(_records_file(args.run_dir))
        ]
        try:
            sys.stdout.write("\n".join(lines) + "\n")
        except BrokenPipeError:  # `fhs show RUN --list | head`
            sys.stderr.close()
        return
    if not args.fact:
        raise InputError(
            "no fact chosen",
            field="fact",
            fix=f"pass --fact ID; list the run's fact ids with `fhs show {args.run_dir} --list`",
        )
    runs = [args.run_dir, *args.compare]
    for run_dir in runs:  # an unknown id fails before any data is loaded
        check_fact_ids(run_dir, args.fact)
    out = Path(args.out) if args.out else Path(args.run_dir) / "show.html"
    guard_out(
        out,
        args.data,
        files=[
            (path, f"run {run_dir}'s {path.name}")
            for run_dir in runs
            for path in sorted(Path(run_dir).iterdir())
            if path.is_file() and path.suffix != ".html"
        ],
    )
    write_explorer(runs, args.fact, out, data=args.data)
    print(out)


def _printable(value) -> str:
    """``value`` as text with control characters escaped (``\\x1b``): a record cannot drive the terminal."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in str(value))


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
    guard_out(args.out, args.data)
    taxonomy = load_taxonomy(args.name, args.data)
    path = write_generic(taxonomy, args.out)
    print(f"{len(taxonomy):,} concepts of {args.name} -> {path}")


def cmd_facts(args: argparse.Namespace) -> None:
    from fhs.data.datasets.ixbrl import load_filing
    from fhs.data.facts import write_facts
    from fhs.data.taxonomies import load_taxonomy, load_taxonomy_file

    name = args.taxonomy
    read = [*(getattr(args, "filings", None) or args.tables), *([args.cells] if getattr(args, "cells", None) else [])]
    guard_out(
        args.out,
        args.data,
        files=[(path, "input file") for path in read]
        + ([] if name == "none" or name in TAXONOMIES else [(name, "taxonomy file")]),
    )
    taxonomy = (
        None if name == "none" else load_taxonomy(name, args.data) if name in TAXONOMIES else load_taxonomy_file(name)
    )
    if args.facts_command == "from-table":
        _facts_from_tables(args, taxonomy)
        return
    facts = []
    for filing, stem in _filing_stems(args.filings):
        facts.extend(
            load_filing(filing, taxonomy, keep_unreachable=args.keep_unreachable or taxonomy is None, stem=stem)
        )
    write_facts(facts, args.out)
    tables = sum(f.modality == "table" for f in facts)
    print(
        f"{len(facts):,} located facts ({tables:,} table, {len(facts) - tables:,} text) "
        f"from {len(args.filings)} filing(s) -> {args.out}"
    )


def _facts_from_tables(args: argparse.Namespace, taxonomy) -> None:
    from fhs.data.datasets.table_file import facts_from_table
    from fhs.data.facts import write_facts
    from fhs.data.taxonomies.ids import align_gold, check_gold

    if args.cells and len(args.tables) > 1:
        raise InputError("a cell map (--cells) tags one table file", field="cells", fix="give one table file")
    facts = []
    for path, stem in _filing_stems(args.tables):
        stem = stem.removesuffix(".csv").removesuffix(".tsv")
        found = facts_from_table(path, stem=stem, cell_map=args.cells, datatype=args.datatype, taxonomy=taxonomy)
        if taxonomy is not None:  # a misspelled gold id is named here, not only by `fhs run`
            check_gold(align_gold(found, taxonomy), taxonomy, path)
        facts.extend(found)
    untyped = sum(not fact.datatype for fact in facts)
    write_facts(facts, args.out)
    print(
        f"{len(facts):,} located facts from {len(args.tables)} table file(s) -> {args.out}"
        + (
            f" ({untyped:,} without a datatype: --datatype, a datatype column, or --taxonomy gives one)"
            if untyped
            else ""
        )
    )


def _filing_stems(filings: list[str]) -> list[tuple[str, str]]:
    """Each filing with the name its fact and context ids start with: two files of one name get
    ``-2``, ``-3`` after it (said on stderr), so their ids never collide; one file twice is an error."""
    from pathlib import Path

    from fhs.core.errors import warn
    from fhs.data.datasets.ixbrl import filing_stem

    seen: set[str] = set()
    named: list[tuple[str, str]] = []
    taken: set[str] = set()
    for filing in filings:
        resolved = str(Path(filing).resolve())
        if resolved in seen:
            raise InputError(
                "the same filing is given twice", path=filing, field="filings", fix="pass each filing once"
            )
        stem = base = filing_stem(Path(filing))
        number = 1
        while stem in taken:
            number += 1
            stem = f"{base}-{number}"
        if stem != base:
            warn(f"{filing} has the same name as an earlier filing: its ids start with {stem}, not {base}")
        seen.add(resolved)
        taken.add(stem)
        named.append((filing, stem))
    return named


def cmd_run(args: argparse.Namespace) -> dict:
    from dataclasses import replace

    from fhs.data.sampling import sample_by_context
    from fhs.data.taxonomies.ids import check_gold
    from fhs.run.inputs import ModelChoice
    from fhs.run.knobs import knob_overrides
    from fhs.run.lock import LOCK_NAME
    from fhs.run.profiles import default_profile
    from fhs.run.records import STAMP_NAME
    from fhs.run.runner import AllFactsFailed
    from fhs.run.spec import RunSpec

    # an unknown method or setting fails here, before any data is loaded
    spec = RunSpec(
        dataset="",
        method=args.method,
        seed=args.seed,
        retriever=args.retriever,
        dense_model=args.dense_model,
        w_cov=args.wcov,
        configuration=args.config,
        overrides=knob_overrides(
            beta=args.beta,
            j=args.j,
            fusion=args.fusion,
            normalise=args.normalize,
            render=args.render,
            window=args.window,
            selector_layout=args.selector_layout,
        ),
        selector=None if args.selector is None else args.selector == "on",
    )
    if spec.asks_model and (args.facts or args.taxonomy) and not args.domain:
        raise InputError(
            f"--method {args.method} asks a model, which needs the taxonomy's domain",
            field="domain",
            fix="pass --domain FILE.yaml (check it with `fhs domain check FILE.yaml`) or one of "
            + ", ".join(available_domains()),
        )
    if spec.asks_model:
        spec = replace(
            spec,
            model=ModelChoice.resolve(
                args.profile or default_profile(args.backend),
                backend=args.backend,
                model=args.model,
                base_urls=args.base_url,
                seed=args.seed,
                cache=args.cache,
                structured=args.schema_transport,
                replay_unparsed=args.cache_unparsed,
                any_server=args.cache_any_server,
                max_in_flight=args.max_in_flight,
                thinking={"on": True, "off": False}.get(args.thinking),
                replay=args.replay,
                request_timeout=args.request_timeout,
                give_up_after=args.give_up_after,
                retry_backoff=args.retry_backoff,
                oracle_noise=args.oracle_noise,
            ),
        )
    if args.retry_unusable and (args.cache_unparsed or not spec.asks_model):
        raise InputError(
            "--retry-unusable asks the model again for answers no stage could use"
            + (
                ", which --cache-unparsed serves from the cache instead"
                if spec.asks_model
                else f"; --method {args.method} asks no model"
            ),
            field="retry-unusable",
            fix="leave one of them out",
        )
    if args.oracle_noise is not None and not spec.asks_model:
        raise InputError(
            f"--method {args.method} asks no model, so the oracle has nothing to answer",
            field="oracle-noise",
            fix="leave --oracle-noise out, or run an LLM method",
        )
    experiment = _experiment(args)
    inputs = _run_inputs(args, experiment.spec)  # the inputs are named first, then where the run would write
    guard_out(args.out, args.data, files=inputs)
    for name in ("records.jsonl", "metrics.json", STAMP_NAME, LOCK_NAME):  # nor a file the run writes there
        guard_out(os.path.join(args.out, name), args.data, files=inputs)
    spec = replace(spec, dataset=experiment.spec.name)
    facts = experiment.facts
    if args.limit is not None:
        facts = facts[: args.limit]
    elif args.sample is not None:
        facts = sample_by_context(facts, args.sample)
    elif spec.model is not None:
        facts = sample_by_context(facts, spec.model.profile.llm_sample_size(experiment.spec.name, len(facts)))
    if spec.model is not None or args.sample is not None or args.limit is not None:
        print(_facts_note(args, spec.model, len(facts), len(experiment.facts)), file=sys.stderr, flush=True)
    check_gold(facts, experiment.taxonomy, args.facts or experiment.spec.name)
    sources = None
    if args.facts:  # where the inputs came from, so `fhs show` can find them again (not part of the stamp)
        from pathlib import Path

        taxonomy = args.taxonomy if args.taxonomy in TAXONOMIES else str(Path(args.taxonomy).resolve())
        sources = {
            "facts": str(Path(args.facts).resolve()),
            "taxonomy": taxonomy,
            "domain": args.domain or experiment.spec.domain,
        }
    # a server profile's workers keep a server busy; the oracle and no model are one process's work
    asks_server = spec.model is not None and spec.model.answerer().gold is None
    workers = args.workers or (spec.model.profile.workers if spec.model is not None and asks_server else 1)
    try:
        outcome = spec.execute(
            experiment,
            facts,
            out_dir=args.out,
            fresh=args.fresh,
            refused=args.refused,
            sources=sources,
            retry_unusable=args.retry_unusable,
            workers=workers,
            progress=not args.quiet,
        )
        metrics, nothing_ran = outcome.metrics, None
    except AllFactsFailed as error:
        metrics, nothing_ran = error.metrics, error
    if spec.model is not None and spec.model.replay is not None:  # a call the archive lacks: name it
        from fhs.run.archive import replay_failures

        problem = replay_failures(metrics, spec.model.replay, args.out)
        if problem is not None:
            raise problem
    if nothing_ran is not None:
        raise nothing_ran
    print(json.dumps({k: v for k, v in metrics.items() if k != "config"}, indent=2))
    return metrics


def _facts_note(args: argparse.Namespace, model, used: int, available: int) -> str:
    """The run's first line: how many facts it takes, and whether a sample was taken."""
    name = args.facts or args.dataset
    profile = f"profile {model.profile.name}" if model is not None else "no model"
    if args.limit is not None:
        return f"fhs: {name}: the first {used:,} of {available:,} facts (--limit; {profile})"
    if used < available:
        return (
            f"fhs: {name}: a context-level sample of {used:,} of {available:,} facts ({profile}; "
            f"--sample N for another size, --profile paper-full for every fact)"
        )
    return f"fhs: {name}: all {used:,} facts, no sample taken ({profile})"


def cmd_archive(args: argparse.Namespace) -> dict:
    from fhs.run.archive import pack
    from fhs.run.inputs import default_llm_cache

    summary = pack(args.run_dirs, args.out, cache=args.cache or default_llm_cache())
    print(
        f"{summary['runs']} run(s), {summary['facts']:,} records, {summary['answers']:,} model answers and "
        f"{summary['verdicts']:,} verdicts -> {summary['archive']} ({summary['bytes'] / 1e6:.1f} MB; "
        f"content sha256 {summary['sha256']}, which a replay checks)"
    )
    return summary


def guard_out(out, data: str | None, files=()) -> None:
    """Refuse an ``--out`` onto one of ``files`` or inside the data directory (``fhs.core.outputs``)."""
    from fhs.core.outputs import check_out
    from fhs.data.download.fetch import target_dir

    root, _ = target_dir(data)
    check_out(out, files=files, folders=[(root, "the data directory")])


def _run_inputs(args: argparse.Namespace, spec) -> list[tuple[str, str]]:
    """The files a run reads: its spec, facts, taxonomy and domain files, the archive it replays, its cache."""
    from pathlib import Path

    named = [
        (spec.source, "dataset spec"),
        (spec.facts_file, "facts file"),
        (spec.taxonomy_file, "taxonomy file"),
        (args.facts, "facts file"),
        (None if args.taxonomy in TAXONOMIES else args.taxonomy, "taxonomy file"),
        (args.replay, "archive replayed"),
        (args.cache, "response cache"),
    ]
    named += [
        (domain, "domain file")
        for domain in (spec.domain, args.domain)
        if domain and Path(domain).suffix.lower() in (".yaml", ".yml")
    ]
    return [(str(path), what) for path, what in named if path]


def _experiment(args: argparse.Namespace):
    """A named dataset, or the user's own facts and taxonomy files."""
    from fhs.run.inputs import load_experiment, load_experiment_from_files

    if args.facts or args.taxonomy:
        if not (args.facts and args.taxonomy):
            raise InputError(
                "--facts and --taxonomy go together",
                field="taxonomy" if args.facts else "facts",
                fix="pass both files, or --dataset for a bundled dataset",
            )
        return load_experiment_from_files(
            args.facts,
            args.taxonomy,
            domain=args.domain,
            w_cov=args.wcov,
            retriever=args.retriever,
            dense_model=args.dense_model,
            data=args.data,
        )
    if args.dataset is None:
        raise InputError("no input", field="dataset", fix="pass --dataset NAME, or --facts FILE with --taxonomy FILE")
    return load_experiment(
        args.dataset,
        data=args.data,
        w_cov=args.wcov,
        progress=not args.quiet,
        retriever=args.retriever,
        dense_model=args.dense_model,
    )


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
    from fhs.bench.dense import bench_dense
    from fhs.bench.retrieval import bench_retrieval, format_retrieval_bench

    if not args.dataset or len(args.dataset) != 1:
        raise InputError("bench retrieval takes one --dataset", field="dataset", fix=f"one of {names(DATASETS)}")
    if args.retriever == DEFAULT_RETRIEVER:
        result = bench_retrieval(
            args.dataset[0],
            data=args.data,
            limit=args.limit,
            n_queries=args.queries or 2000,
            n_reference=args.reference_queries,
            repeats=args.repeats,
        )
        print(format_retrieval_bench(result), file=sys.stderr)  # stdout keeps the JSON alone
    else:
        result = bench_dense(
            args.dataset[0],
            retriever=args.retriever,
            model=args.dense_model,
            data=args.data,
            limit=args.limit,
            n_queries=args.queries or 200,
            embed_limit=args.embed_limit,
        )
    print(json.dumps(result, indent=2))
    return result


def cmd_bench_llm(args: argparse.Namespace) -> dict:
    from fhs.bench.llm import bench_llm, format_table
    from fhs.run.records import write_json_atomic

    if args.out:
        guard_out(
            args.out,
            args.data,
            files=[*_spec_files(args.dataset), *([(args.cache, "response cache")] if args.cache else [])],
        )
    methods = _names(args.methods if args.methods is not None else "direct,structured,fhs")
    if not methods:
        from fhs.method.registry import LLM_METHODS, METHODS

        raise InputError(
            f"no method named in {args.methods!r}",
            field="methods",
            fix="pass a comma-separated list such as direct,fhs (LLM methods: "
            + ", ".join(m for m in METHODS if m in LLM_METHODS)
            + ")",
        )
    result = bench_llm(
        args.dataset or ["fincl", "codiesp"],
        methods,
        profile=args.profile or "cpu",
        backend=args.backend,
        model=args.model,
        facts=args.facts or 3,
        data=args.data,
        cache=args.cache,
    )
    print(format_table(result))
    if args.out:
        write_json_atomic(args.out, result)
    return result


def _spec_files(datasets: list[str] | None) -> list[tuple[str, str]]:
    from fhs.data.datasets import is_spec_file

    return [(name, "dataset spec") for name in datasets or [] if is_spec_file(name)]


def _names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def cmd_plan(args: argparse.Namespace) -> dict:
    """``fhs plan``: the profile's chapters dry-run on the simulated model, printed as a table or JSON."""
    from fhs.book.manifest import plan_profile
    from fhs.plan.table import format_plan
    from fhs.plan.totals import Throughput

    if args.out:  # before the planning, which takes a while
        guard_out(args.out, args.data, files=_spec_files(args.dataset))
    if (args.prefill_tps is None) != (args.decode_tps is None):
        raise InputError(
            "--prefill-tps and --decode-tps go together",
            field="prefill-tps",
            fix="pass both, or one total rate with --throughput",
        )
    if args.throughput is not None and args.prefill_tps is not None:
        raise InputError(
            "--throughput and --prefill-tps/--decode-tps are alternatives",
            field="throughput",
            fix="pass one total rate, or the two rates",
        )
    if args.bench_json is not None and (args.throughput is not None or args.prefill_tps is not None):
        raise InputError(
            "--bench-json and --throughput or --prefill-tps/--decode-tps are alternatives",
            field="bench-json",
            fix="pass the benchmark's result file, or rates",
        )
    throughput = server = None
    if args.gpu is None:
        for flag, given in (
            ("precision", args.precision is not None),
            ("tensor-parallel", args.tensor_parallel is not None),
            ("calibrate", args.calibrate),
        ):
            if given:
                raise InputError(
                    f"--{flag} describes the server that --gpu models, and no --gpu was given",
                    field=flag,
                    fix=f"add --gpu (h100, h200 or b200), or leave out --{flag}",
                )
    else:
        from fhs.plan.server import Server, ServerError

        server = Server(
            gpu=args.gpu,
            precision=args.precision or "bf16",
            tensor_parallel=args.tensor_parallel or 1,
            prefill_tps=args.prefill_tps,
            decode_tps=args.decode_tps,
        )
        try:  # before any chapter is planned: a width no node has, or weights that do not fit
            server.check()
        except ServerError as error:
            raise InputError(str(error), field=error.flag) from None
    if args.calibrate and not args.base_url:
        raise InputError(
            "--calibrate measures a server, and no --base-url was given",
            field="calibrate",
            fix="add --base-url http://HOST:PORT/v1 (your vLLM server)",
        )
    if args.base_url:
        from urllib.parse import urlsplit

        try:
            url = urlsplit(args.base_url)
            ok = url.scheme in ("http", "https") and bool(url.hostname)
        except ValueError:
            ok = False
        if not ok:
            raise InputError(
                f"--base-url {args.base_url!r} is not an http(s) URL with a host",
                field="base-url",
                fix="e.g. http://127.0.0.1:8000/v1",
            )
    if args.bench_json is not None:
        from fhs.plan.calibrate import bench_throughput

        total_tps, measured = bench_throughput(args.bench_json)
        throughput = Throughput(total_tps=total_tps, source=f"measured: {measured}")
    elif args.throughput is not None:
        throughput = Throughput(total_tps=args.throughput, source="given with --throughput")
    elif args.prefill_tps is not None:
        throughput = Throughput(
            total_tps=None,
            prefill_tps=args.prefill_tps,
            decode_tps=args.decode_tps,
            source="given with --prefill-tps/--decode-tps",
        )
    changes = {}
    for text in args.set:
        import dataclasses

        from fhs.core.errors import shown
        from fhs.core.yamlfile import parse_yaml
        from fhs.method.config import FHSConfig

        name, sep, value = text.partition("=")
        if not sep or name not in {f.name for f in dataclasses.fields(FHSConfig)}:
            raise InputError(
                f"--set expects KNOB=VALUE with an FHSConfig field, got {shown(text)}",
                field="set",
                fix="see fhs/method/config.py for the knobs",
            )
        changes[name] = parse_yaml(value, field=f"set {name}")
        try:  # a bad value is named here, before any chapter is planned
            FHSConfig().replace(**{name: changes[name]})
        except (ValueError, TypeError) as error:
            raise InputError(
                str(error), field=f"set {name}", fix="see fhs/method/config.py for the knob's range"
            ) from None
    from fhs.book.manifest import dataset_parameters
    from fhs.plan.server import ServerError

    try:
        plan, rows = plan_profile(
            args.profile,
            chapters=args.chapter,
            sample=args.dry_run_facts,
            fraction=args.fraction,
            throughput=throughput,
            data=args.data,
            progress=not args.quiet and not args.json,
            changes=changes,
            overrides=dataset_parameters(args.dataset) if args.dataset else None,
            build_dense=args.build_dense,
            server=server,
            base_url=args.base_url,
            calibrate=args.calibrate,
        )
    except ServerError as error:  # the plan's longest request does not fit the server's KV cache
        raise InputError(str(error), field=error.flag) from None
    print(json.dumps(plan, indent=2) if args.json else format_plan(plan, rows))
    if args.out:
        from fhs.run.records import write_json_atomic

        write_json_atomic(args.out, plan)
    return plan
