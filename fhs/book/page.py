"""A chapter page's opening and closing: the same set-up from its parameters, the same check at its end.

Every chapter opens with :func:`open_page` (the profile's study, its sample narrowed by
``sample``, one model choice per seeded run from ``server``, the bootstrap settings) and
ends with :meth:`Page.close` (the closing check against the recorded values, saved for
``python -m fhs.book.check record`` unless the run is a protocol check, then the page's
time). Doing it here keeps the chapters' first and last cells to one call each and the
choices identical across pages, so chapters that share ``runs_dir`` and the cache share
their runs and calls.

Two mappings carry what most chapters pass on unchanged (papermill passes a mapping as
one parameter, ``-p server '{base_url: ...}'`` or ``-y 'server: {...}'``):

- ``server``: how models are asked (:data:`SERVER_KEYS`); ``{}`` takes the profile's.
- ``sample``: how much is run and how it is summarised (:data:`SAMPLE_KEYS`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fhs.book.check import CheckReport, check
from fhs.book.page_warnings import collect_warnings, log_path
from fhs.book.study import Study
from fhs.book.toc import SAMPLE_DEFAULTS, SAMPLE_KEYS, SERVER_KEYS
from fhs.core.errors import InputError
from fhs.run.inputs import ModelChoice

# SERVER_KEYS: backend (llama_cpp | openai | vllm); model (as the backend knows it); base_url
# (OpenAI-compatible server(s), comma-separated); max_in_flight (requests in flight per server URL);
# thinking (Qwen3's thinking mode); replay (an `fhs archive` file that answers every call);
# cache_dir (the response cache). SAMPLE_KEYS: llm_limit (facts per dataset sent to a model, a
# context-level sample); llm_fraction (a share of every LLM sample: make rehearsal); runs (the first
# N of the profile's seeds); seed and bootstrap_resamples (the context-clustered bootstrap's);
# protocol_check (a tiny-sample run of the protocol: numbers printed, neither compared nor recorded)
DEFAULT_CACHE_DIR = ".fhs-cache"


def settings(name: str, given: Mapping[str, Any] | None, keys: tuple[str, ...]) -> dict[str, Any]:
    """``given`` checked against ``keys``: an unknown key is an error naming the parameter and the keys."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(keys))
    if unknown:
        raise InputError(
            f"unknown key(s) {', '.join(map(repr, unknown))} in the chapter parameter {name!r}",
            field=name,
            fix=f"use {', '.join(keys)}",
        )
    return given


@dataclass
class Page:
    """What a chapter's cells share: its name and profile, the study, the seeded model choices, the bootstrap."""

    name: str
    profile: str
    study: Study
    choices: tuple[ModelChoice, ...] = ()
    interval: dict = field(default_factory=dict)
    protocol_check: bool = False
    started: float = field(default_factory=time.perf_counter)

    @property
    def choice(self) -> ModelChoice:
        """The first seeded run's model choice (one-fact views, fingerprints, the page's model name)."""
        return self.choices[0]

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(c.seed for c in self.choices)

    def close(
        self, checked: Mapping[str, Any], *, inputs: Mapping[str, str] | None = None, left_out: Sequence[str] = ()
    ) -> None:
        """The closing check: compare, show the table once, record the values (not a protocol check's),
        fail on a miss, say the time. ``left_out``: metric prefixes of rows the parameters did not ask for.

        Returns nothing, so a ``page.close(...)`` as a cell's last line adds no second copy of the table."""
        report = check(
            checked,
            chapter=self.name,
            profile=self.profile,
            save=not self.protocol_check,
            inputs=inputs,
            quiet=True,
            left_out=left_out,
        )
        show_report(report)
        if self.protocol_check:
            print(f"PROTOCOL CHECK: {len(checked)} metrics produced; not compared with recorded values.")
        else:
            report.assert_ok()
        print(
            f"page time: {time.perf_counter() - self.started:.0f} s (profile {self.profile}; "
            "the Provenance page lists every chapter's time)"
        )


def show_report(report: CheckReport) -> None:
    """One output for the check: its HTML table in the book (the same output's plain text where HTML is not
    shown), the text table in a console."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        print(report)
        return
    if get_ipython() is None:
        print(report)
    else:
        display(report)


def open_page(
    name: str,
    profile: str,
    runs_dir: str | Path = "runs",
    *,
    server: Mapping[str, Any] | None = None,
    sample: Mapping[str, Any] | None = None,
    llm: bool = True,
    configurations: Mapping[str, str] | None = None,
    seeds: tuple[int, ...] | None = None,
) -> Page:
    """The study and seeded choices a chapter's parameters ask for; ``llm=False`` for a page that asks no model.

    ``sample['runs']`` keeps the first N of the profile's seeds (None: all of them), or
    ``seeds`` names them."""
    served = settings("server", server, SERVER_KEYS)
    sampled = {**SAMPLE_DEFAULTS, **settings("sample", sample, SAMPLE_KEYS)}
    study = Study.for_profile(profile, runs_dir, progress=False, configurations=dict(configurations or {}))
    if sampled["llm_limit"] is not None:
        study.profile = study.profile.with_llm_facts(int(sampled["llm_limit"]))
    if sampled["llm_fraction"] is not None:  # a rehearsal: a share of every LLM sample
        study.profile = replace(study.profile, llm_fraction=float(sampled["llm_fraction"]))
    page = Page(
        name,
        profile,
        study,
        interval=dict(resamples=sampled["bootstrap_resamples"], seed=sampled["seed"]),
        protocol_check=bool(sampled["protocol_check"]),
    )
    collect_warnings(log_path(runs_dir, profile, name))  # in a notebook: one line per cell, the rest in the log
    if llm:
        chosen = study.seeds(sampled["runs"]) if seeds is None else tuple(seeds)
        base_url = served.get("base_url")
        first = ModelChoice.resolve(
            profile,
            backend=served.get("backend"),
            model=served.get("model"),
            base_urls=base_url.split(",") if base_url else None,
            seed=chosen[0],
            cache=Path(served.get("cache_dir") or DEFAULT_CACHE_DIR) / "responses.sqlite",
            max_in_flight=served.get("max_in_flight"),
            thinking=served.get("thinking"),
            replay=served.get("replay"),
            request_timeout=served.get("request_timeout"),
        )
        page.choices = tuple(replace(first, seed=s) for s in chosen)
    if page.protocol_check:
        model = f" with {page.choice.model}" if page.choices else ""
        print(
            f"PROTOCOL CHECK: profile {profile}{model} on a tiny sample; these are not paper numbers and are "
            "neither compared with nor recorded as this profile's values."
        )
    return page


def dimension_names(study: Study, dataset: str) -> tuple[str, ...]:
    """The six dimensions of ``dataset``'s domain file, in the domain's order (what the verdicts are keyed by)."""
    from fhs.data.domain import load_domain

    return load_domain(study.experiment(dataset).spec.domain).dimension_names
