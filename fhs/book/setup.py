"""A chapter's set-up from its parameters cell: the study, the seeded model choices, the bootstrap settings.

Every LLM chapter starts the same way: the profile's study (``fhs.book.study``),
its sample narrowed by ``llm_limit`` or ``llm_fraction``, and one model choice
per seeded run (the paper reports the mean of three runs). Doing it here keeps
the chapters' set-up cells to one call and the choices identical across pages,
so chapters that share ``runs_dir`` and ``cache_dir`` share their runs and calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from fhs.book.study import Study
from fhs.run.inputs import ModelChoice


@dataclass(frozen=True)
class Chapter:
    """What a chapter's cells share: the study, one model choice per seeded run, the bootstrap settings."""

    study: Study
    choices: tuple[ModelChoice, ...]
    interval: dict

    @property
    def choice(self) -> ModelChoice:
        """The first seeded run's model choice (one-fact views, fingerprints, the page's model name)."""
        return self.choices[0]

    @property
    def seeds(self) -> tuple[int, ...]:
        return tuple(c.seed for c in self.choices)


def llm_chapter(profile: str, runs_dir: str | Path = "runs", *, llm_limit: int | None = None,
                llm_fraction: float | None = None, runs: int | None = None, backend: str | None = None,
                model: str | None = None, base_url: str | None = None, max_in_flight: int | None = None,
                thinking: bool | None = None, replay: str | Path | None = None,
                cache_dir: str | Path = ".fhs-cache", seed: int = 20260724, bootstrap_resamples: int = 2000,
                configurations: Mapping[str, str] | None = None, seeds: tuple[int, ...] | None = None) -> Chapter:
    """The study and seeded choices a chapter's parameters ask for.

    ``runs`` keeps the first N of the profile's seeds (None: all of them), or
    ``seeds`` names them; ``seed`` and ``bootstrap_resamples`` are the bootstrap's.
    """
    study = Study.for_profile(profile, runs_dir, progress=False, configurations=dict(configurations or {}))
    if llm_limit is not None:
        study.profile = study.profile.with_llm_facts(int(llm_limit))
    if llm_fraction is not None:  # a rehearsal: a share of every LLM sample
        study.profile = replace(study.profile, llm_fraction=float(llm_fraction))
    chosen = study.seeds(runs) if seeds is None else tuple(seeds)
    first = ModelChoice.resolve(profile, backend=backend, model=model,
                                base_urls=base_url.split(",") if base_url else None,
                                seed=chosen[0], cache=Path(cache_dir) / "responses.sqlite",
                                max_in_flight=max_in_flight, thinking=thinking, replay=replay)
    return Chapter(study, tuple(replace(first, seed=s) for s in chosen),
                   dict(resamples=bootstrap_resamples, seed=seed))


def dimension_names(study: Study, dataset: str) -> tuple[str, ...]:
    """The six dimensions of ``dataset``'s domain file, in the domain's order (what the verdicts are keyed by)."""
    from fhs.data.domain import load_domain

    return load_domain(study.experiment(dataset).spec.domain).dimension_names
