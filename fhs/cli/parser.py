"""The ``fhs`` command line's arguments: every subcommand, option and value check.

Valid choices come from the registries, so a new method, dataset or knob appears in
``--help`` and in the errors without touching this file.
"""

from __future__ import annotations

import argparse

from fhs.cli.data_command import add_data_parser
from fhs.cli.renamed import add_renamed
from fhs.core.errors import InputError
from fhs.core.ranges import count_problem, weight_problem
from fhs.data.datasets import DATASETS
from fhs.data.domain import available_domains
from fhs.data.taxonomies import TAXONOMIES
from fhs.llm.backends import ENGINES, ORACLE
from fhs.llm.openai import (
    DEFAULT_BACKOFF_S,
    DEFAULT_GIVE_UP_S,
    DEFAULT_REQUEST_TIMEOUT_S,
    MAX_BACKOFF_S,
    MAX_WAIT_S,
    STRUCTURED_MODES,
)
from fhs.method.config import DEFAULT_CONFIG, NAMED_CONFIGS
from fhs.method.registry import METHODS
from fhs.retrieval.encoders import DEFAULT_MODEL, MODELS
from fhs.retrieval.kinds import DEFAULT_RETRIEVER, RETRIEVERS
from fhs.run.evaluate import MISS, REFUSED
from fhs.run.knobs import FUSION, NORMALISE, RENDER, SELECTOR_LAYOUT, WINDOW
from fhs.run.profiles import PROFILES

MIN_TOKENS_PER_S = 0.01  # fhs plan: a slower rate plans a run no one would wait for
COMMAND_LINE = "The fhs command line: run a method on a dataset, check a domain file, or benchmark retrieval."


def names(registry) -> str:
    """``a, b or c`` from a registry's keys: help texts list what the code accepts."""
    names = list(registry)
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def _add_data_args(parser: argparse.ArgumentParser | argparse._ArgumentGroup, own_files: bool = False) -> None:
    parser.add_argument(
        "--dataset",
        required=not own_files,
        default=None,
        help=names(DATASETS)
        + ", or a dataset spec file (YAML: name, facts, taxonomy[, domain])"
        + (" (or --facts with --taxonomy)" if own_files else ""),
    )
    if own_files:
        parser.add_argument("--facts", default=None, help="your own located facts (JSONL, see fhs/data/facts.py)")
        parser.add_argument(
            "--taxonomy",
            default=None,
            help=f"with --facts: a built-in taxonomy by name ({names(TAXONOMIES)}) or your own "
            "concept file (JSONL/CSV/TSV with id, label[, definition, datatype])",
        )
        parser.add_argument(
            "--domain",
            default=None,
            help=f"dimension set for LLM methods: {', '.join(available_domains())} or a domain YAML file",
        )
    parser.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    parser.add_argument("--limit", type=_positive_int("limit"), default=None, help="use only the first N facts")
    parser.add_argument(
        "--retriever",
        choices=list(RETRIEVERS),
        default=DEFAULT_RETRIEVER,
        help="first-stage retriever: " + "; ".join(f"{k} = {v}" for k, v in RETRIEVERS.items()),
    )
    parser.add_argument(
        "--dense-model",
        choices=list(MODELS),
        default=DEFAULT_MODEL,
        help=f"embedding model of dense and hybrid (default {DEFAULT_MODEL})",
    )


def _positive_int(name: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{name} expects a whole number, got {text!r}") from None
        problem = count_problem(value)
        if problem:
            raise argparse.ArgumentTypeError(f"--{name} {problem}, got {value}")
        return value

    return parse


def _weight(name: str):
    """An argparse type: a finite number >= 0 (``nan`` and ``inf`` would poison every score)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{name} expects a number, got {text!r}") from None
        problem = weight_problem(value)
        if problem:
            raise argparse.ArgumentTypeError(f"--{name} {problem}, got {text}")
        return value

    return parse


def _rate(name: str):
    """An argparse type: tokens per second, a finite number of at least ``MIN_TOKENS_PER_S``."""

    def parse(text: str) -> float:
        value = _weight(name)(text)
        if value < MIN_TOKENS_PER_S:
            raise argparse.ArgumentTypeError(f"--{name} must be at least {MIN_TOKENS_PER_S:g} tokens/s, got {text}")
        return value

    return parse


def _seconds(name: str):
    """An argparse type: a duration in seconds, a finite number above zero and at most ``MAX_WAIT_S``."""

    def parse(text: str) -> float:
        value = _weight(name)(text)
        if not 0 < value <= MAX_WAIT_S:
            raise argparse.ArgumentTypeError(
                f"--{name} must be a number of seconds above 0 and at most {MAX_WAIT_S:,.0f} (a week), got {text}"
            )
        return value

    return parse


def _fraction(text: str) -> float:
    """An argparse type: a share in (0, 1]."""
    value = _weight("fraction")(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"--fraction must be above 0 and at most 1, got {text}")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad option is the same one-line error and exit status 2 as any bad input."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise InputError(message, fix=f"see {self.prog} --help")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="fhs", description=COMMAND_LINE)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    run = commands.add_parser("run", help="run one method on one dataset")
    data = run.add_argument_group("data and retrieval", "which facts, and the first-stage index they are searched in")
    _add_data_args(data, own_files=True)
    data.add_argument(
        "--sample",
        type=_positive_int("sample"),
        default=None,
        help="run on a context-level sample of about N facts (default: the profile's for LLM methods)",
    )
    data.add_argument(
        "--wcov",
        type=_weight("wcov"),
        default=None,
        help="label-coverage weight w_cov (default 1.0 for bm25, 0 for dense and hybrid)",
    )
    method = run.add_argument_group("method")
    method.add_argument("--method", required=True, help=names(METHODS))
    method.add_argument(
        "--config",
        choices=list(NAMED_CONFIGS),
        default=DEFAULT_CONFIG,
        help="named FHS configuration: "
        + "; ".join(f"{c.name} = {c.description}" for c in NAMED_CONFIGS.values())
        + f" (default {DEFAULT_CONFIG})",
    )
    method.add_argument(
        "--selector",
        choices=["on", "off"],
        default=None,
        help="the shared listwise selector (default: on for structured and fhs, off for direct)",
    )
    method.add_argument("--seed", type=int, default=0, help="sampling seed (each hypothesis j samples with its own)")
    knobs = run.add_argument_group(
        "FHS knobs",
        "each a configuration of the one FHS code path; a variant that "
        "changes only these replays cached hypotheses and verdicts",
    )
    knobs.add_argument(
        "--beta",
        type=_weight("beta"),
        default=None,
        help="verifier weight beta of Eq. 3 (default 0.6; 0 = no verifier)",
    )
    knobs.add_argument("--j", type=_positive_int("j"), default=None, help="hypotheses sampled per fact, J (default 2)")
    knobs.add_argument(
        "--fusion", choices=list(FUSION), default=None, help="RRF over the rankings: summed (paper) or mean"
    )
    add_renamed(
        knobs,
        "--normalize",
        "--normalise",
        choices=list(NORMALISE),
        default=None,
        help="fused scores range-normalized over the pool (paper) or raw",
    )
    knobs.add_argument(
        "--render",
        choices=list(RENDER),
        default=None,
        help="query forms per hypothesis: both (paper), label only or definition only",
    )
    knobs.add_argument(
        "--window",
        choices=list(WINDOW),
        default=None,
        help="verifier window: one candidate per category profile (paper) or the plain top K_v",
    )
    knobs.add_argument(
        "--selector-layout",
        choices=list(SELECTOR_LAYOUT),
        default=None,
        help="selector candidates numbered in the method's order (paper) or by concept id, the "
        "method's order then given as numbers: a prefix a server caches (book/deviations.md)",
    )
    model = run.add_argument_group("model", "which backend answers, and where its answers are kept")
    model.add_argument(
        "--profile",
        default=None,
        help=f"{names(PROFILES)}: backend, model and sample size (default: paper with "
        f"--backend openai or vllm, else cpu)",
    )
    model.add_argument(
        "--backend",
        default=None,
        help=f"{names(ENGINES)} (default: the profile's); {ORACLE}: no model, every stage answered "
        "from the fact's gold concept, an analysis tool (fhs/llm/oracle.py)",
    )
    model.add_argument(
        "--oracle-noise",
        default=None,
        metavar="hypotheses=P,verdicts=Q",
        help=f"with --backend {ORACLE}: corrupt each hypothesis value and query with probability P "
        "and flip each verdict with probability Q, seeded by --seed (default no noise)",
    )
    model.add_argument("--model", default=None, help="model name (default: the profile's)")
    model.add_argument(
        "--thinking",
        choices=["on", "off"],
        default=None,
        help="Qwen3's thinking mode, sent to the chat template whatever the model is called "
        "(default: the profile's; off, as in the paper)",
    )
    model.add_argument("--cache", default=None, help="SQLite response cache (default $FHS_CACHE/llm/responses.sqlite)")
    add_renamed(
        model,
        "--cache-unparsed",
        "--replay-unparsed",
        action="store_true",
        help="serve cached answers that a stage could not parse (default: ask the model again)",
    )
    add_renamed(
        model,
        "--cache-any-server",
        "--replay-from-any-server",
        action="store_true",
        help="reuse cached answers made by another server URL for the same model name",
    )
    model.add_argument(
        "--replay",
        default=None,
        metavar="ARCHIVE",
        help="answer every model call from an `fhs archive` file, with no server; a call it does not hold is an error",
    )
    server = run.add_argument_group("server", "an OpenAI-compatible server (--backend openai)")
    server.add_argument(
        "--base-url",
        action="append",
        default=None,
        help="OpenAI-compatible server URL; repeat to spread requests over several servers",
    )
    add_renamed(
        server,
        "--schema-transport",
        "--structured",
        choices=STRUCTURED_MODES,
        default=None,
        help="how the server gets a request's JSON schema: json_schema (vLLM), json_object or gbnf "
        "(llama.cpp's server), or none (not the method structured)",
    )
    server.add_argument(
        "--max-in-flight",
        type=_positive_int("max-in-flight"),
        default=None,
        help="requests in flight per server URL, for the whole process (default: the profile's, "
        "128 for paper); match the server's --max-num-seqs",
    )
    server.add_argument(
        "--request-timeout",
        type=_seconds("request-timeout"),
        default=None,
        metavar="SECONDS",
        help=f"the deadline of one request, from sending to the answer's last byte (default "
        f"{DEFAULT_REQUEST_TIMEOUT_S:g}); a request that reaches it is retried like a reset, "
        f"and its in-flight slot freed",
    )
    server.add_argument(
        "--give-up-after",
        type=_seconds("give-up-after"),
        default=None,
        metavar="SECONDS",
        help=f"stop after this long with no successful answer at all (default {DEFAULT_GIVE_UP_S:g}); "
        f"until then busy answers (429, 503), resets and deadlines are retried with backoff "
        f"that honours Retry-After",
    )
    server.add_argument(
        "--retry-backoff",
        type=_seconds("retry-backoff"),
        default=None,
        metavar="SECONDS",
        help=f"the first wait before asking again after a failed attempt whose answer names no "
        f"Retry-After (default {DEFAULT_BACKOFF_S:g}), doubled at each try up to "
        f"{MAX_BACKOFF_S:g} s",
    )
    out = run.add_argument_group("output and progress")
    out.add_argument("--out", required=True, help="run directory for records.jsonl and metrics.json")
    out.add_argument(
        "--workers",
        type=_positive_int("workers"),
        default=None,
        help="facts in flight at once, to keep a server busy (default: the profile's; 1 on the CPU)",
    )
    out.add_argument(
        "--refused",
        choices=list(REFUSED),
        default=MISS,
        help="facts the server refused: "
        + "; ".join(f"{k} = {v}" for k, v in REFUSED.items())
        + f" (default {MISS}); metrics.json counts them either way",
    )
    out.add_argument(
        "--fresh",
        action="store_true",
        help="discard the records already in --out instead of resuming from them, and reuse no "
        "verdict of the verdict ledger (model answers still come from --cache)",
    )
    out.add_argument(
        "--retry-unusable",
        action="store_true",
        help="run again the finished facts whose records hold an answer no stage could use (not "
        "parseable, or cut at max_tokens), asking the model again for those answers: after "
        "fixing a server that sent them",
    )
    out.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar (the search kernels' one compile per machine is still said on stderr)",
    )

    archive = commands.add_parser(
        "archive",
        help="pack runs' model answers, verdicts and records into one file "
        "that `fhs run --replay` and the book rebuild from without a server",
    )
    archive.add_argument(
        "run_dirs",
        nargs="+",
        metavar="RUN_DIR",
        help="run folders (the --out of `fhs run`), or folders holding them (e.g. runs/paper)",
    )
    archive.add_argument("--out", required=True, help="the archive file to write")
    archive.add_argument(
        "--cache",
        default=None,
        help="the response cache the runs used (default $FHS_CACHE/llm/responses.sqlite; "
        "the book's is .fhs-cache/responses.sqlite)",
    )

    domain = commands.add_parser("domain", help="check a domain file (dimensions, glosses, category profiles)")
    domain.add_argument("action", choices=["check"])
    domain.add_argument("file", help="domain YAML file (see fhs/data/domains/us-gaap.yaml)")
    domain.add_argument(
        "--taxonomy",
        default=None,
        help="concept file: also report categories that match no concept, and the profile count",
    )

    bench = commands.add_parser("bench", help="benchmarks that print ratios measured side by side")
    bench.add_argument(
        "what",
        choices=["retrieval", "llm"],
        help="retrieval (ours against rank-bm25, or dense/hybrid beside BM25); llm (model cost per method)",
    )
    bench.add_argument(
        "--dataset",
        action="append",
        default=None,
        help=f"{names(DATASETS)}; repeat for several (llm: default fincl and codiesp)",
    )
    bench.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    bench.add_argument(
        "--limit", type=_positive_int("limit"), default=None, help="retrieval: use only the first N facts"
    )
    bench.add_argument(
        "--queries",
        type=_positive_int("queries"),
        default=None,
        help="retrieval: queries timed (default 2000 for bm25, 200 for dense and hybrid)",
    )
    bench.add_argument("--reference-queries", type=int, default=50, help="queries timed for rank-bm25")
    bench.add_argument(
        "--repeats",
        type=_positive_int("repeats"),
        default=5,
        help="retrieval: interleaved repetitions of every timed scorer (the median is reported)",
    )
    bench.add_argument(
        "--retriever",
        choices=list(RETRIEVERS),
        default=DEFAULT_RETRIEVER,
        help="retrieval: bm25 (against rank-bm25), or dense/hybrid measured beside BM25",
    )
    bench.add_argument(
        "--dense-model",
        choices=list(MODELS),
        default=DEFAULT_MODEL,
        help=f"retrieval: embedding model of dense and hybrid (default {DEFAULT_MODEL})",
    )
    bench.add_argument(
        "--embed-limit",
        type=_positive_int("embed-limit"),
        default=None,
        help="dense/hybrid: time the cold embedding on the first N concepts only "
        "(default: the whole taxonomy, in a scratch folder)",
    )
    bench.add_argument(
        "--methods", default=None, help=f"llm: comma-separated, from {names(METHODS)} (default direct,structured,fhs)"
    )
    bench.add_argument(
        "--facts", type=_positive_int("facts"), default=None, help="llm: facts per dataset, whole contexts (default 3)"
    )
    bench.add_argument("--profile", default=None, help=f"llm: {names(PROFILES)} (default cpu)")
    bench.add_argument("--backend", default=None, help=f"llm: {names(ENGINES)} (default: the profile's)")
    bench.add_argument("--model", default=None, help="llm: model name (default: the profile's)")
    bench.add_argument(
        "--cache",
        default=None,
        help="llm: a response cache to reuse (default: a fresh temporary one, so the model is measured)",
    )
    bench.add_argument("--out", default=None, help="llm: also write the result as JSON here")

    plan = commands.add_parser(
        "plan",
        help="size a profile's run before any model is asked: requests, tokens, "
        "wall time per chapter, dataset and method",
    )
    plan.add_argument("--profile", required=True, help=names(PROFILES))
    plan.add_argument(
        "--chapter",
        action="append",
        default=None,
        help="plan only this chapter (e.g. 02_main_results); repeat for several (default: all)",
    )
    plan.add_argument("--json", action="store_true", help="print the plan as JSON")
    plan.add_argument("--out", default=None, help="also write the plan as JSON to this file")
    add_renamed(
        plan,
        "--dry-run-facts",
        "--sample",
        type=_positive_int("dry-run-facts"),
        default=20,
        help="facts per dataset the dry run asks the simulated model (a context-level sample; default 20): "
        "more is slower and estimates tokens more closely; the planned runs keep the profile's samples",
    )
    plan.add_argument(
        "--fraction",
        type=_fraction,
        default=None,
        help="plan a rehearsal on this share of every LLM sample (make rehearsal's REHEARSAL_FRACTION)",
    )
    plan.add_argument(
        "--throughput",
        type=_rate("throughput"),
        default=None,
        help="your server's total tokens/s under load (default: a published vLLM figure for "
        "Qwen3-32B on one H100, 2,149 tok/s)",
    )
    plan.add_argument(
        "--prefill-tps",
        type=_rate("prefill-tps"),
        default=None,
        help="prompt tokens/s under load; with --decode-tps instead of --throughput",
    )
    plan.add_argument(
        "--decode-tps", type=_rate("decode-tps"), default=None, help="generated tokens/s under load; with --prefill-tps"
    )
    plan.add_argument(
        "--bench-json",
        default=None,
        help="the result file of `vllm bench serve --save-result` run with the command the plan "
        "prints: its total tokens/s instead of --throughput",
    )
    plan.add_argument(
        "--gpu",
        choices=["h100", "h200", "b200"],
        default=None,
        help="model a vLLM server on this GPU: prefill, decode at the batch its KV cache allows, "
        "a compute floor (fhs/plan/server.py cites the figures); --prefill-tps/--decode-tps "
        "replace its rates with measured ones",
    )
    plan.add_argument(
        "--precision",
        choices=["bf16", "fp8"],
        default=None,
        help="with --gpu: the weights' and KV cache's precision (default bf16)",
    )
    plan.add_argument(
        "--tensor-parallel",
        type=_positive_int("tensor-parallel"),
        default=None,
        help="with --gpu: GPUs the model is split over, on one node (default 1)",
    )
    plan.add_argument(
        "--base-url",
        default=None,
        help="your vLLM server (e.g. http://127.0.0.1:8000/v1): count tokens with its tokenizer "
        "(/tokenize); with --calibrate, measure it too",
    )
    plan.add_argument(
        "--calibrate",
        action="store_true",
        help="with --base-url and --gpu: a probe of a minute or two measures the server's prefill and "
        "decode rates and reads its KV capacity, and the plan prints days from them beside "
        "the published-rate model",
    )
    plan.add_argument(
        "--dataset",
        action="append",
        default=None,
        help="plan the chapters on this dataset instead of their own: a built-in name or a dataset "
        "spec file (the chapters' datasets parameter); repeat for several",
    )
    plan.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="what if: an FHS setting changed for every run (fhs/method/config.py), e.g. "
        "selector_candidates=20; repeatable",
    )
    plan.add_argument(
        "--build-dense",
        action="store_true",
        help="embed the taxonomies the dense and hybrid runs use before planning them (once: "
        "the chapters reuse the embeddings); without it BM25 stands in where none is built",
    )
    plan.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    plan.add_argument("--quiet", action="store_true", help="no progress bar")

    show = commands.add_parser("show", help="write an offline HTML page showing what a run did with chosen facts")
    show.add_argument("run_dir", help="a run directory (the --out of `fhs run`, or one under runs/<profile>/)")
    show.add_argument("--fact", action="append", default=[], help="a fact id (repeat for several facts on one page)")
    show.add_argument(
        "--compare", action="append", default=[], help="another run directory shown side by side (repeat for more)"
    )
    show.add_argument("--out", default=None, help="the HTML file (default: RUN_DIR/show.html)")
    show.add_argument("--list", action="store_true", help="print the run's fact ids with their gold rank, and stop")
    show.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")

    taxonomy = commands.add_parser("taxonomy", help="built-in taxonomies as files")
    taxonomy_commands = taxonomy.add_subparsers(dest="taxonomy_command", required=True)
    export = taxonomy_commands.add_parser("export", help="write a built-in taxonomy as a concept file")
    export.add_argument("name", help=names(TAXONOMIES))
    export.add_argument("--out", required=True, help="the concept file (.jsonl, .csv or .tsv)")
    export.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")

    facts = commands.add_parser("facts", help="located facts from your own sources")
    facts_commands = facts.add_subparsers(dest="facts_command", required=True)
    from_ixbrl = facts_commands.add_parser(
        "from-ixbrl", help="the located facts of inline-XBRL filings (.htm or .htm.gz)"
    )
    from_ixbrl.add_argument("filings", nargs="+", help="one or more inline-XBRL filings")
    from_ixbrl.add_argument("--out", required=True, help="the facts file (JSONL), for `fhs run --facts`")
    from_ixbrl.add_argument(
        "--taxonomy",
        default="us-gaap-2024",
        help="datatypes come from this taxonomy, and facts whose gold is outside it are "
        "dropped, as the ixbrl dataset does (a name, a concept file, or 'none')",
    )
    from_ixbrl.add_argument(
        "--keep-unreachable", action="store_true", help="keep facts whose gold concepts are all outside the taxonomy"
    )
    from_ixbrl.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    from_table = facts_commands.add_parser(
        "from-table", help="the located facts of your own tables (CSV, TSV or HTML), serialised as from-ixbrl does"
    )
    from_table.add_argument(
        "tables",
        nargs="+",
        help="CSV/TSV files (a 'gold' column tags each row's values) or HTML files (data-gold on a cell)",
    )
    from_table.add_argument("--out", required=True, help="the facts file (JSONL), for `fhs run --facts`")
    from_table.add_argument(
        "--cells",
        default=None,
        help="a cell map instead (CSV: row, column, gold[, datatype, table]; counted from 1); only with one table file",
    )
    from_table.add_argument(
        "--datatype", default="", help="datatype of a fact neither the taxonomy nor the table gives one"
    )
    from_table.add_argument(
        "--taxonomy",
        default="none",
        help="take each fact's datatype from its gold concept here (a name or a concept file; default none)",
    )
    from_table.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")

    add_data_parser(commands)
    return parser
