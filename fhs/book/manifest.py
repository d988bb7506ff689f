"""The book's plan: which runs the chapters make under a profile, sized by ``fhs plan``.

A chapter's runs follow from its parameters (its defaults in :mod:`fhs.book.registry`, with the
profile file's values for the profile on top, as the notebook runner passes them) and from the
profile (its seeds and sample sizes); :mod:`fhs.book.planned` turns them into runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fhs.book.planned import PCS
from fhs.book.registry import REGISTRY, Registry
from fhs.book.toc import PROFILES, SAMPLE_DEFAULTS, folded, load_profiles, merged
from fhs.core.errors import InputError
from fhs.plan.dry_run import RELOCATOR, PlannedRun
from fhs.run.profiles import RunProfile


def chapter_parameters(
    stem: str,
    profile: str,
    overrides: Mapping[str, Any] | None = None,
    registry: Registry = REGISTRY,
    profiles_file: Path = PROFILES,
) -> dict[str, Any]:
    """What a chapter receives under ``profile``: its defaults, the profile file's values, ``overrides``."""
    defaults = dict(registry.get(stem).defaults)
    profiles = load_profiles(profiles_file)
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


def left_out(chapters: list[str] | None = None, registry: Registry = REGISTRY) -> dict[str, str]:
    """The chapters of ``chapters`` (default: all planned) whose extra is not installed: chapter -> extra."""
    from fhs.core.extras import installed

    chosen = chapters or registry.stems
    return {c.stem: c.extra for c in registry.planned() if c.extra and c.stem in chosen and not installed(c.extra)}


def chapter_runs(
    profile: RunProfile,
    chapters: list[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
    registry: Registry = REGISTRY,
) -> list[PlannedRun]:
    """The runs of ``chapters`` (default: all planned, in book order) under ``profile``."""
    planned = Registry(registry.planned())
    for stem in chapters or ():
        planned.get(stem)  # an unknown chapter is an error naming the valid ones
    chosen = set(chapters or planned.stems)
    runs: list[PlannedRun] = []
    for chapter in planned.chapters:
        if chapter.stem in chosen and chapter.runs is not None:
            runs += chapter.runs(
                chapter.stem, profile, flat(chapter_parameters(chapter.stem, profile.name, overrides, registry))
            )
    return runs


# ----------------------------------------------------------------------------- chapter 8's inputs


def pcs_inputs() -> tuple[Path, Path, Path]:
    """Chapter 8's concept file, facts file and domain file, from the spec the chapter builds.

    :func:`fhs.book.pcs_spec.write_spec` runs with the chapter's default domain and lexicon (package data)
    and into the same cache folder as the chapter, so the two build the inputs once between them.
    """
    from fhs.book.pcs_spec import write_spec
    from fhs.core.files import cache_dir
    from fhs.data.datasets.spec_file import read_spec_file

    try:
        spec = read_spec_file(write_spec(cache_dir("pcs")))
    except InputError as error:
        raise InputError(
            f"building chapter 8's inputs failed: {error}",
            fix="install the pcs extra (pip install 'fhs[pcs]') or plan without 08_procedures_pcs",
        ) from None
    if spec.taxonomy_file is None or spec.facts_file is None:
        raise ValueError("chapter 8's spec names no concept file or no facts file")
    return spec.taxonomy_file, spec.facts_file, Path(spec.domain)


def load_inputs(dataset: str, data: str | Path | None = None):
    """A dataset's experiment for the plan: a registered dataset, or chapter 8's files."""
    from fhs.run.inputs import load_experiment, load_experiment_from_files

    if dataset == PCS:
        taxonomy, facts, domain = pcs_inputs()
        return load_experiment_from_files(facts, taxonomy, domain=str(domain), data=data)
    return load_experiment(dataset, data=data, progress=False)


# ----------------------------------------------------------------------------- the plan


def plan_profile(
    profile: str,
    *,
    chapters: list[str] | None = None,
    sample: int = 20,
    fraction: float | None = None,
    throughput=None,
    data: str | Path | None = None,
    progress: bool = True,
    counter=None,
    changes: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    build_dense: bool = False,
    server=None,
    base_url: str | None = None,
    calibrate: bool = False,
    registry: Registry = REGISTRY,
) -> tuple[dict[str, Any], list]:
    """``fhs plan``: the profile's chapters dry-run on the simulated model, sized to the profile.

    ``fraction`` plans a rehearsal on that share of every LLM sample (``make rehearsal``'s
    ``REHEARSAL_FRACTION``); ``changes`` are FHS settings changed for every run (a what-if,
    e.g. a shorter selector list); ``overrides`` are chapter parameters (e.g. :func:`dataset_parameters`);
    ``build_dense`` embeds the taxonomies of dense and hybrid runs first (``fhs.plan.dry_run.dry_run``);
    ``server`` (``fhs.plan.server.Server``) adds the modelled server's prefill, decode, KV and floor.
    ``base_url``: the server whose tokenizer counts the tokens (else the model's own where cached, else
    Qwen's vocabulary: ``fhs.llm.tokens.counter_for``); ``calibrate`` also measures it
    (``fhs.plan.calibrate``) and adds the days at its measured rates and KV capacity. ``registry``: the chapters.
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
    missing = left_out(chapters, registry)
    planned = [stem for stem in chapters or [c.stem for c in registry.planned()] if stem not in missing]
    if not planned:
        stem, extra = next(iter(missing.items()))
        raise InputError(
            f"{stem} needs the {extra} extra, which is not installed", field="chapter", fix=install_hint(extra)
        )
    for stem, extra in missing.items():
        warn(f"planning without {stem}: it needs the {extra} extra ({install_hint(extra)})")
    if counter is None:
        try:
            counter = counter_for(chosen.model, base_url)
        except Exception as error:  # noqa: BLE001 - the server's tokenizer is not reachable: say so, once
            raise InputError(
                f"the server's tokenizer at {base_url} did not answer ({error})",
                field="base-url",
                fix="start the server first, or leave out --base-url",
            ) from None
    started = time.perf_counter()
    runs = chapter_runs(chosen, planned, overrides, registry)
    stats: dict[str, Any] = {}
    rows = dry_run(
        runs,
        chosen,
        lambda name: load_inputs(name, data),
        sample=sample,
        counter=counter,
        data=data,
        progress=progress,
        build_dense=build_dense,
        stats=stats,
    )
    summary = plan_totals(rows, throughput)
    if server is not None:
        from fhs.plan.server import model_time

        summary["server"] = model_time(server, summary["purposes"], summary["total"], stats["prefix_share"])
        if calibrate:
            from fhs.plan.calibrate import calibrated_server

            if base_url is None:  # the command line refuses --calibrate without --base-url
                raise ValueError("calibrating measures a server: base_url names none")

            measured, probe = calibrated_server(
                server, base_url, chosen.model, counter, summary["purposes"], summary["total"]
            )
            summary["measured"] = {
                **model_time(measured, summary["purposes"], summary["total"], stats["prefix_share"]),
                "probe": probe.detail,
            }
    sampled: dict[str, int] = {}
    for row in rows:
        if row.run.asks_model and row.run.method != RELOCATOR:
            sampled[row.run.dataset] = max(sampled.get(row.run.dataset, 0), row.sampled)
    plan = {
        "profile": chosen.name,
        "description": chosen.description,
        "seeds": list(chosen.seeds),
        "fraction": fraction,
        "changes": dict(changes or {}),
        "chapters_planned": planned,
        "left_out": [
            {"chapter": stem, "extra": extra, "install": install_hint(extra)} for stem, extra in missing.items()
        ],
        "sample": sampled,
        "tokenizer": counter.name,
        "tokens_exact_on_sample": bool(counter.exact),
        "tokens_exact_with": None if counter.exact else getattr(counter, "fix", EXACT_FIX),
        "stand_in_retrievers": sorted({f"{row.run.dataset} {row.run.retriever}" for row in rows if row.stand_in}),
        **summary,
        "throughput_text": throughput.describe(),
        "bench_command": bench_command(summary["purposes"], chosen.model),
        "rows": [row.to_dict() for row in rows],
    }
    plan["seconds"] = round(time.perf_counter() - started, 1)
    return plan, rows
