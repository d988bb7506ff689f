"""A chapter's runs: which facts, which method, where the records live.

A ``Study`` ties a profile to a results folder (``runs/<profile>/``) and hands
out cached runs, so a chapter asks for "direct on fincl without the coverage
term" and gets a run back, computing it only the first time. Every run is a
``fhs.run.spec.RunSpec``, the same object ``fhs run`` executes: one stamp, one
folder rule (``runs/<profile>/<dataset>/<folder>``, the rule in ``fhs.run.spec``).

A :class:`Run` keeps a small summary per fact (id, context, modality, gold,
rank, correct, selected, failed; what metrics and bootstrap intervals read)
and reads full records from disk only when asked (:meth:`Run.iter_records`).
:meth:`Study.run_all` executes many runs together, facts of every run in
flight at once, with the records of running them one after another.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any

from fhs.book.fingerprint import facts_fingerprint, model_fingerprint, taxonomy_fingerprint
from fhs.core.errors import InputError
from fhs.data.datasets import is_spec_file
from fhs.data.facts import Fact
from fhs.data.sampling import sample_by_context
from fhs.method.config import DEFAULT_CONFIG, FHSConfig
from fhs.retrieval.encoders import DEFAULT_MODEL
from fhs.retrieval.kinds import DEFAULT_RETRIEVER
from fhs.run.dataset_offers import dataset_has
from fhs.run.evaluate import MISS, RunsEstimate, evaluated, metric_interval, runs_estimate
from fhs.run.inputs import Experiment, ModelChoice, load_experiment
from fhs.run.profiles import RunProfile, get_profile
from fhs.run.records import records_at
from fhs.run.spec import RunSpec, run_all


@dataclass
class Run:
    """One method's run on one dataset: per-fact summaries and metrics; full records stay on disk.

    ``summaries`` hold, per fact of the run (in the order the facts were
    given), the record's small fields (``fhs.run.summary``); every function of
    ``fhs.run.evaluate`` reads them as it reads records. Under the ``exclude``
    policy, facts the server refused are left out of them (``refused``).
    """

    dataset: str
    method: str
    path: Path
    summaries: list[dict]
    metrics: dict[str, Any]
    refused: str = MISS

    def iter_records(self, fields: Sequence[str] | None = None) -> Iterator[dict]:
        """The run's full records, one at a time in fact order (only ``fields`` of each, when given)."""
        return records_at(self.path / "records.jsonl", self.summaries, fields)

    @cached_property
    def records(self) -> list[dict]:
        """Every full record of the run, in fact order. Loads everything: small runs only
        (an FHS record at the paper's settings is about 95 KB); :meth:`iter_records` streams."""
        return list(self.iter_records())

    def interval(self, metric: str, rank_key: str = "rank", **kw):
        return metric_interval(self.summaries if rank_key == "rank" else self.records, metric, rank_key=rank_key, **kw)


def over_runs(runs: list[Run], metric: str, rank_key: str = "rank", **kw) -> RunsEstimate:
    """``metric`` over seeded runs: the mean, its bootstrap interval from the same runs, the std across runs."""
    rows = [run.summaries if rank_key == "rank" else run.records for run in runs]
    return runs_estimate(rows, metric, rank_key=rank_key, **kw)


@dataclass
class Study:
    profile: RunProfile
    root: Path = Path("runs")
    data: str | Path | None = None
    progress: bool = True
    # dataset -> named FHS configuration (FHSConfig.named); a dataset not listed gets the paper's
    configurations: dict[str, str] = field(default_factory=dict)
    refused: str = MISS  # facts the server refused: misses, or left out ("exclude"); fhs.run.evaluate.REFUSED
    _experiments: dict[str, Experiment] = field(default_factory=dict, repr=False)

    @classmethod
    def for_profile(cls, name: str, root: str | Path = "runs", **kw) -> Study:
        return cls(profile=get_profile(name), root=Path(root), **kw)

    def experiment(self, dataset: str) -> Experiment:
        """A dataset's inputs, loaded once: a built-in name or a spec file's path (then also known by its name)."""
        if dataset not in self._experiments:
            experiment = load_experiment(dataset, data=self.data, progress=self.progress)
            name = experiment.spec.name
            known = self._experiments.get(name)
            if known is not None and known.spec != experiment.spec:
                raise InputError(
                    f"another dataset of this study is already named {name!r}",
                    path=experiment.spec.source,
                    field="name",
                    fix="give each spec file its own name",
                )
            self._experiments[dataset] = self._experiments.setdefault(name, experiment)
        return self._experiments[dataset]

    def dataset_name(self, dataset: str) -> str:
        """The name a dataset's runs are filed under: a built-in's own, a spec file's ``name``."""
        return self.experiment(dataset).spec.name if is_spec_file(dataset) else dataset

    def facts(self, dataset: str, llm: bool = False, seed: int = 0) -> list[Fact]:
        """The profile's facts for a dataset: a context-level sample, or every fact."""
        every = self.experiment(dataset).facts
        name = self.dataset_name(dataset)
        target = self.profile.llm_sample_size(name, len(every)) if llm else self.profile.retrieval_facts
        return sample_by_context(every, target, seed=seed)

    def has(self, dataset: str, need: str) -> bool:
        """Whether a dataset has what a table needs (``fhs.run.dataset_offers.dataset_has``: "dev", "table",
        "text", ...)."""
        return dataset_has(self.experiment(dataset), need)

    def seeds(self, runs: int | None = None) -> tuple[int, ...]:
        """The profile's seeded runs (the paper averages three), or the first ``runs`` of them."""
        seeds = tuple(self.profile.seeds)
        return seeds if runs is None else seeds[: max(1, int(runs))]

    def input_fingerprints(self, facts: dict[str, list[Fact]], model: ModelChoice | None = None) -> dict[str, str]:
        """What a chapter's expected values depend on: per dataset the facts it used and the
        taxonomy, and the model file (for a served model, its name); ``fhs.book.check`` records them."""
        out: dict[str, str] = {}
        for dataset, used in facts.items():
            out[f"{dataset}/facts"] = facts_fingerprint(used)
            out[f"{dataset}/taxonomy"] = taxonomy_fingerprint(self.experiment(dataset).taxonomy)
        if model is not None:
            from fhs.llm.backends import backend_named

            path = backend_named(model.backend).model_file(model.model)
            out["model"] = model_fingerprint(model.backend, model.model, path)
        return out

    def configuration(self, dataset: str) -> str:
        """The named FHS configuration this study uses on ``dataset`` (``paper`` unless set)."""
        return self.configurations.get(dataset, DEFAULT_CONFIG)

    def spec(
        self,
        dataset: str,
        method: str,
        model: ModelChoice | None = None,
        *,
        config: FHSConfig | None = None,
        tag: str = "",
        w_cov: float | None = None,
        retriever: str = DEFAULT_RETRIEVER,
    ) -> RunSpec:
        """The run :meth:`run` (no ``model``) or :meth:`run_llm` would execute, for :meth:`run_all`.

        With a model, the seed is the model choice's and the selector is on
        (``direct`` included) unless ``config`` switches it off; without
        ``config`` the profile's budgets carry the dataset's named
        configuration (:meth:`configuration`), with it ``config`` is the run's
        FHS settings. A dense or hybrid ``retriever`` uses the profile's
        embedding model and leaves label coverage off unless ``w_cov`` is given.
        """
        dense_model = (
            DEFAULT_MODEL
            if retriever == DEFAULT_RETRIEVER
            else self.profile.dense_model_for(self.experiment(dataset).taxonomy.name)
        )
        spec = RunSpec(
            dataset=self.dataset_name(dataset),
            method=method,
            retriever=retriever,
            dense_model=dense_model,
            w_cov=w_cov,
            tag=tag,
        )
        if model is None:
            return spec
        spec = replace(spec, model=model, seed=model.seed, configuration=self.configuration(dataset), selector=True)
        return spec if config is None else spec.with_config(config, model.profile.fhs_config())

    def run(
        self,
        dataset: str,
        method: str,
        *,
        w_cov: float | None = None,
        tag: str = "",
        facts: list[Fact] | None = None,
        retriever: str = DEFAULT_RETRIEVER,
    ) -> Run:
        """Run (or reload) an LLM-free ``method`` on ``dataset``'s sample under this profile."""
        spec = self.spec(dataset, method, tag=tag, w_cov=w_cov, retriever=retriever)
        return self.run_all([spec], None if facts is None else {spec.dataset: facts})[0]

    def run_llm(
        self,
        dataset: str,
        method: str,
        model: ModelChoice,
        *,
        config: FHSConfig | None = None,
        tag: str = "",
        facts: list[Fact] | None = None,
        w_cov: float | None = None,
        retriever: str = DEFAULT_RETRIEVER,
    ) -> Run:
        """Run an LLM method (or ``direct`` with the shared selector) with ``model`` on the profile's sample.

        Records are cached on disk: a larger sample only adds the facts not yet
        recorded, and changed settings or inputs start a new folder (:meth:`spec`).
        """
        spec = self.spec(dataset, method, model, config=config, tag=tag, w_cov=w_cov, retriever=retriever)
        return self.run_all([spec], None if facts is None else {spec.dataset: facts})[0]

    def run_all(
        self, specs: Sequence[RunSpec], facts: Mapping[str, Sequence[Fact]] | None = None, *, workers: int | None = None
    ) -> list[Run]:
        """Execute many runs together; one :class:`Run` per spec, in order.

        ``facts`` gives a dataset's facts (default: the profile's sample, for
        LLM runs or not). ``workers`` facts are in flight at once (default: the
        largest ``workers`` of the models' profiles, 1 without a model); the
        records are those of running the specs one after another, in order.
        """
        chosen = {self.dataset_name(name): given for name, given in (facts or {}).items()}

        def facts_of(spec: RunSpec) -> Sequence[Fact]:
            return chosen[spec.dataset] if spec.dataset in chosen else self.facts(spec.dataset, llm=spec.asks_model)

        if workers is None:
            workers = max([spec.model.profile.workers for spec in specs if spec.model is not None] or [1])
        runs = [(spec, self.experiment(spec.dataset), facts_of(spec)) for spec in specs]
        outcomes = run_all(
            runs, root=self.root / self.profile.name, workers=workers, progress=self.progress, refused=self.refused
        )
        for spec, outcome in zip(specs, outcomes):
            if spec.model is not None and spec.model.replay is not None:  # a call the archive lacks is an error
                from fhs.run.archive import replay_failures

                problem = replay_failures(outcome.metrics, spec.model.replay, outcome.path)
                if problem is not None:
                    raise problem
        return [
            Run(
                spec.dataset,
                spec.method,
                outcome.path,
                evaluated(outcome.summaries, self.refused),
                outcome.metrics,
                self.refused,
            )
            for spec, outcome in zip(specs, outcomes)
        ]


def llm_study(
    profile: str,
    runs_dir: str | Path,
    *,
    llm_limit: int | None = None,
    backend: str | None = None,
    model: str | None = None,
    base_url: str | None = None,
    cache_dir: str | Path = ".fhs-cache",
    seed: int = 0,
    max_in_flight: int | None = None,
    thinking: bool | None = None,
    replay: str | Path | None = None,
    llm_fraction: float | None = None,
    request_timeout: float | None = None,
) -> tuple[Study, ModelChoice]:
    """A chapter's study and model from its parameters cell, with the cache chapter 2 uses.

    Chapters that share this cache and sample (``runs_dir``/``cache_dir``) share FHS's calls.
    ``replay`` (an ``fhs archive`` file) answers every call from the archive, with no server.
    """
    study = Study.for_profile(profile, runs_dir, progress=False)
    if llm_limit is not None:
        study.profile = study.profile.with_llm_facts(int(llm_limit))
    if llm_fraction is not None:  # a rehearsal: a share of every LLM sample
        study.profile = replace(study.profile, llm_fraction=float(llm_fraction))
    choice = ModelChoice.resolve(
        profile,
        backend=backend,
        model=model,
        base_urls=base_url.split(",") if base_url else None,
        seed=seed,
        cache=Path(cache_dir) / "responses.sqlite",
        max_in_flight=max_in_flight,
        thinking=thinking,
        replay=replay,
        request_timeout=request_timeout,
    )
    return study, choice
