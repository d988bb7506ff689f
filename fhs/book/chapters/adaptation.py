"""An adapter's chapter on its own files: coverage of the inventory, relocation rates, runs through the
command line, metrics by kind of gold, and the cost of the model runs.

Nothing here knows a particular taxonomy: chapter 08 passes ICD-10-PCS's
spec (written by ``scripts/pcs_spec.py``) and section names, and any
hierarchical code system with prefix golds (``metadata.gold_match =
"prefix"``, ``fhs/run/evaluate.py``) reads the same. The runs go through
``fhs run --dataset SPEC``, the path an outside user types; the command's
entry point is handed in by the chapter (``fhs.cli`` sits above this layer).
"""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fhs.data.taxonomy import Taxonomy
from fhs.llm.backends import backend_named
from fhs.run.evaluate import by_group, metric_interval, metrics
from fhs.run.records import read_records

METRICS = ("recall@1", "recall@10", "recall@50", "recall@200", "mrr", "accuracy")
LLM_METHODS = ("structured", "fhs")  # the rows with a selector, hence an Acc.
# Parameter counts for the cost estimate: a CPU forward pass reads every weight, so time per token
# grows about linearly with model size.
PARAMETERS = {"smollm2-135m": 135e6, "qwen2.5-0.5b": 494e6, "qwen2.5-0.5b-q4_0": 494e6}


def run_quiet(argv: Sequence[str]) -> None:
    """A command an adapter would type, run from the repository root; its output stays off the page."""
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")


def given_options(**options: str | Path | None) -> list[str]:
    """``--name value`` for each option that is set (underscores become dashes); a None one is left to the
    command's default."""
    return [
        part
        for name, value in options.items()
        if value is not None
        for part in (f"--{name.replace('_', '-')}", str(value))
    ]


def inventory_frame(taxonomy: Taxonomy) -> pd.DataFrame:
    """The concept file's source, license, size and sections, from its rows' metadata."""
    from collections import Counter

    first = next(iter(taxonomy))
    sections = Counter(c.metadata.get("section_name", "?") for c in taxonomy)
    return pd.DataFrame(
        [
            {
                "source": first.metadata.get("source_version", "?"),
                "license": first.metadata.get("license", "?"),
                "concepts": len(taxonomy),
                "sections": ", ".join(f"{name} ({n:,})" for name, n in sections.most_common()),
            }
        ]
    )


def covered(taxonomy: Taxonomy, code: str, rule: str) -> bool:
    """Whether a gold code is in the inventory: itself (``exact``), or any code under it (``prefix``)."""
    return code in taxonomy or (rule == "prefix" and bool(taxonomy.under(code)))


def coverage_rows(
    codes: Sequence[str], taxonomy: Taxonomy, section_names: Mapping[str, str], other: str = "other sections"
) -> list[dict[str, Any]]:
    """Coverage of gold codes, all of them and per section (a code's first character names its section)."""
    by_section: dict[str, list[str]] = {}
    for code in codes:
        by_section.setdefault(section_names.get(code[0], other), []).append(code)
    rows = []
    for label, group in [("all sections", list(codes))] + sorted(by_section.items()):
        rows.append(
            {
                "gold codes (testP.tsv)": label,
                "occurrences": len(group),
                "prefix golds": sum(len(c) < 7 for c in group),
                "covered, exact": sum(covered(taxonomy, c, "exact") for c in group),
                "covered, prefix rule": sum(covered(taxonomy, c, "prefix") for c in group),
            }
        )
    return rows


def coverage_frame(rows: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    frame["share covered (prefix)"] = (frame["covered, prefix rule"] / frame["occurrences"]).round(3)
    return frame


def relocation_row(track: str, pieces: bool, lexicon: str | None, stats: Mapping[str, int]) -> dict[str, Any]:
    """One relocation setting's rate and what the piecewise retry found, from the loader's ``stats``."""
    return {
        "track": track,
        "pieces": "yes" if pieces else "no",
        "lexicon file": "yes" if lexicon else "no",
        "mentions": stats["facts"],
        "located": stats["exact"],
        "rate": round(stats["exact"] / stats["facts"], 4),
        "discontinuous located": f"{stats['discontinuous_located']} / {stats['discontinuous']}",
        "found by pieces": stats["found_by_pieces"],
    }


def relocation_frame(
    settings: Iterable[tuple[str, bool, str | None]], stats_of: Callable[[str, bool, str | None], Mapping[str, int]]
) -> pd.DataFrame:
    """One row per (track, pieces, lexicon file) setting; ``stats_of`` loads the split that way (its ``stats``)."""
    return pd.DataFrame(
        [
            relocation_row(track, pieces, lexicon, stats_of(track, pieces, lexicon))
            for track, pieces, lexicon in settings
        ]
    )


def relocation_rates(rows: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """``track/whole`` or ``track/pieces[+lexicon]`` -> rate, the names the check records."""
    return {
        f"{r['track']}/{'pieces' if r['pieces'] == 'yes' else 'whole'}"
        f"{'+lexicon' if r['lexicon file'] == 'yes' else ''}": r["rate"]
        for r in rows
    }


def model_arguments(
    profile: str,
    cache: Path,
    *,
    backend: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    max_in_flight: int | None = None,
    thinking: bool | None = None,
    replay: str | Path | None = None,
    cache_dir: str | Path | None = None,
    request_timeout: float | None = None,
) -> list[str]:
    """The ``fhs run`` options that give the command line the chapter's ``server`` parameter (whose
    ``cache_dir`` is already in ``cache``, the response cache's file)."""
    argv = ["--profile", profile, "--cache", str(cache)]
    if backend:
        argv += ["--backend", backend]
    if model:
        argv += ["--model", model]
    for url in base_url.split(",") if base_url else []:
        argv += ["--base-url", url]
    if max_in_flight:
        argv += ["--max-in-flight", str(max_in_flight)]
    if thinking is not None:
        argv += ["--thinking", "on" if thinking else "off"]
    if replay:
        argv += ["--replay", str(replay)]
    if request_timeout is not None:
        argv += ["--request-timeout", f"{float(request_timeout):g}"]
    return argv


def cli_run(
    main: Callable[[list[str]], int], files: Sequence[str], method: str, out: Path, *extra: str, wanted: Iterable[str]
) -> dict[str, Any]:
    """``fhs run`` in process on the adapter's ``files`` (``--dataset SPEC``, or --facts/--taxonomy/--domain);
    the records of the ``wanted`` fact ids (a larger earlier sample may have left more) and the metrics."""
    argv = ["run", *files, "--method", method, "--out", str(out), "--quiet", *extra]
    with contextlib.redirect_stdout(io.StringIO()):
        code = main(argv)
    if code != 0:
        raise RuntimeError(f"fhs {' '.join(argv)} exited with {code}")
    ids = set(wanted)
    return {
        "records": [r for r in read_records(out / "records.jsonl") if r["id"] in ids],
        "metrics": json.loads((out / "metrics.json").read_text(encoding="utf-8")),
    }


def results_frame(runs: Mapping[str, Mapping[str, Any]], sample_ids: set[str], interval: Mapping) -> pd.DataFrame:
    """Every run's metrics with 95% intervals; direct and the oracle again on the LLM sample, like for like."""
    rows = []
    for method, run in runs.items():
        records = run["records"]
        row: dict[str, Any] = {"method": method, "facts": len(records)}
        for m in METRICS:
            row[m] = metric_interval(records, m, **interval) if m != "accuracy" or method in LLM_METHODS else None
        rows.append(row)
        if method in ("direct", "oracle"):
            on_sample = [r for r in records if r["id"] in sample_ids]
            rows.append(
                {
                    "method": f"{method} (LLM sample)",
                    "facts": len(on_sample),
                    **{m: metrics(on_sample)[m] for m in METRICS if m != "accuracy"},
                }
            )
    return pd.DataFrame(rows)


def gold_kind_frame(
    runs: Mapping[str, Mapping[str, Any]], kind_of: Mapping[str, str], methods: Sequence[str] = ("direct", "oracle")
) -> pd.DataFrame:
    """Metrics by kind of gold (a prefix, or a full code) for the LLM-free runs."""
    rows = []
    for method in methods:
        for kind, block in by_group(runs[method]["records"], lambda r: kind_of[r["id"]]).items():
            rows.append(
                {
                    "method": method,
                    "gold": "prefix (4 characters)" if kind == "prefix" else "full code",
                    "facts": block["n_facts"],
                    **{m: round(block[m], 4) for m in METRICS[:-1]},
                }
            )
    return pd.DataFrame(rows)


def recall_figure(runs: Mapping[str, Mapping[str, Any]], title: str):
    """Recall@k of direct and the gold-query probe at k = 1, 10, 50, 200."""
    import matplotlib.pyplot as plt

    from fhs.book.report import ORACLE_COLOR

    fig, ax = plt.subplots(figsize=(6, 3))
    for method, color in (("direct", "0.6"), ("oracle", ORACLE_COLOR)):
        block = runs[method]["metrics"]
        ax.plot(
            [1, 10, 50, 200], [block[f"recall@{k}"] for k in (1, 10, 50, 200)], marker="o", color=color, label=method
        )
    ax.set_xscale("log")
    ax.set_xlabel("k")
    ax.set_ylabel("Recall@k")
    ax.set_title(title)
    ax.legend()
    return fig


def cost_rows(
    runs: Mapping[str, Mapping[str, Any]], backend: str, model: str, cpu_facts: int | None = None
) -> list[dict]:
    """Per-fact calls, tokens and seconds of the model runs; on llama.cpp, the cpu profile's time (for its
    sample size unless ``cpu_facts`` is given) estimated by scaling this run's model seconds by the ratio of
    parameter counts (an estimate, not a measurement)."""
    if cpu_facts is None:
        from fhs.run.profiles import get_profile

        cpu_facts = get_profile("cpu").llm_facts
    rows = []
    for method in LLM_METHODS:
        per = runs[method]["metrics"]["per_fact"]
        row = {
            "method": method,
            "facts": runs[method]["metrics"]["n_facts"],
            "LLM calls / fact": round(per["llm_calls"], 2),
            "tokens in / fact": round(per["tokens_in"]),
            "tokens out / fact": round(per["tokens_out"]),
            "model s / fact": round(per["model_seconds"], 2),
        }
        if backend_named(backend).cpu_engine and model in PARAMETERS:
            scale = PARAMETERS["qwen2.5-0.5b"] / PARAMETERS[model]
            row["cpu profile, est. s / fact"] = round(per["model_seconds"] * scale, 1)
            row[f"cpu profile, est. min for {cpu_facts} facts"] = round(
                per["model_seconds"] * scale * cpu_facts / 60, 1
            )
        rows.append(row)
    return rows


def index_seconds(taxonomy: Taxonomy, concept_file: Path, kind: str = "procedure") -> tuple[float, float]:
    """Seconds to build the BM25 index of a concept file's ``kind`` partition, and to read it back from the
    on-disk index cache (keyed by the file's SHA-256, ``fhs.retrieval.index_cache``)."""
    from fhs.retrieval.bm25 import Retriever
    from fhs.run.digests import file_digest
    from fhs.run.inputs import retrieval_config

    config = retrieval_config(taxonomy.name)
    started = time.perf_counter()
    Retriever(taxonomy, config).partition_for(kind)
    built = time.perf_counter() - started
    started = time.perf_counter()
    Retriever(taxonomy, config, cache_key=file_digest(concept_file)).partition_for(kind)
    return built, time.perf_counter() - started


def adaptation_metrics(
    inventory: int,
    coverage: Sequence[Mapping[str, Any]],
    facts: int,
    rates: Mapping[str, float],
    runs: Mapping[str, Mapping[str, Any]],
) -> dict[str, float]:
    """Chapter 08's check: inventory, coverage, relocation and every run's metrics (Acc. for the LLM rows)."""
    total = coverage[0]
    results = {
        "inventory/concepts": inventory,
        "coverage/exact": total["covered, exact"] / total["occurrences"],
        "coverage/prefix": total["covered, prefix rule"] / total["occurrences"],
        "facts": facts,
        **{f"relocation/{name}": rate for name, rate in rates.items()},
    }
    for method, run in runs.items():
        for m in METRICS:
            if m == "accuracy" and method not in LLM_METHODS:
                continue
            results[f"{method}/{m}"] = run["metrics"][m]
        results[f"{method}/facts"] = run["metrics"]["n_facts"]
    return results


def planned_size(profile, dataset: str = "codiesp-P") -> str:
    """The page's LLM sample in words, before the facts exist: the profile's size, or every located fact."""
    target = profile.dataset_facts.get(dataset, profile.llm_facts)
    return (f"about {target:,}" if target is not None else "every located fact") + (
        f", a {profile.llm_fraction:.0%} share of it" if profile.llm_fraction is not None else ""
    )


def document_codes(path: Path) -> list[tuple[str, str]]:
    """The distinct (document, code) gold pairs of a CodiEsp-style TSV (document, code per line), sorted."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return sorted({(line.split("\t")[0], line.split("\t")[1].strip().upper()) for line in lines if line.strip()})


def facts_line(facts) -> str:
    """How many located facts in how many documents, by kind of gold and relocation status."""
    from collections import Counter

    kinds = Counter(f.metadata.get("gold_match", "exact") for f in facts)
    statuses = Counter(f.metadata.get("relocation_status") for f in facts)
    return (
        f"{len(facts)} located facts in {len({f.context_id for f in facts})} documents; "
        f"gold: {kinds['prefix']} prefixes, {kinds['exact']} full codes; relocation: {dict(statuses)}"
    )


def llm_sample(profile, dataset: str, facts) -> tuple[list, list[str]]:
    """The context-level sample the model runs use and the ``--sample`` option that makes ``fhs run`` draw it."""
    from fhs.data.sampling import sample_by_context

    size = profile.llm_sample_size(dataset, len(facts))  # None: every located fact (the paper profile)
    return sample_by_context(facts, size), (["--sample", str(size)] if size is not None else [])


def adapter_runs(
    main: Callable[[list[str]], int], files: Sequence[str], out_root: Path, model_args: Sequence[str], facts, sample
) -> dict[str, dict[str, Any]]:
    """Direct and the oracle on every fact, structured and FHS (``model_args``) on the sample, via ``fhs run``."""
    every, sampled = [f.id for f in facts], [f.id for f in sample]
    runs = {
        "direct": cli_run(main, files, "direct", out_root / "direct", "--selector", "off", wanted=every),
        "oracle": cli_run(main, files, "oracle", out_root / "oracle", wanted=every),
        "structured": cli_run(main, files, "structured", out_root / "structured", *model_args, wanted=sampled),
        "fhs": cli_run(main, files, "fhs", out_root / "fhs", *model_args, wanted=sampled),
    }
    if {r["id"] for r in runs["fhs"]["records"]} != set(sampled):
        raise RuntimeError("fhs run --sample drew other facts than the page's sample (fhs.data.sampling)")
    return runs


def input_fingerprints(name: str, facts, taxonomy: Taxonomy, domain_file: str | Path) -> dict[str, str]:
    """What the adapter's recorded values depend on: its facts, its concept file and its domain file."""
    from fhs.book.fingerprint import facts_fingerprint, file_fingerprint, taxonomy_fingerprint

    return {
        f"{name}/facts": facts_fingerprint(facts),
        f"{name}/taxonomy": taxonomy_fingerprint(taxonomy),
        f"{name}/domain": file_fingerprint(domain_file),
    }
