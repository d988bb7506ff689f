"""A chapter's runs: which facts, which method, where the records live.

A ``Study`` ties a profile to a results folder (``runs/<profile>/``) and hands
out cached runs, so a chapter asks for "direct on fincl without the coverage
term" and gets records back, computing them only the first time. Every run
goes through ``fhs.run.runner.run_method``, the same path as ``fhs run``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from fhs.book.fingerprint import facts_fingerprint, model_fingerprint, taxonomy_fingerprint
from fhs.data.facts import Fact
from fhs.data.sampling import sample_by_context
from fhs.method.config import DEFAULT_CONFIG, FHSConfig
from fhs.method.context import MethodContext
from fhs.run.evaluate import RunsEstimate, metric_interval, runs_estimate
from fhs.retrieval.encoders import DEFAULT_MODEL
from fhs.retrieval.kinds import DEFAULT_RETRIEVER, retriever_inputs
from fhs.run.inputs import Experiment, ModelChoice, cached_retriever, load_experiment, retrieval_config
from fhs.run.profiles import Profile, get_profile
from fhs.run.records import read_records
from fhs.run.runner import run_method


@dataclass
class Run:
    """One method's records on one dataset, with its metrics."""

    dataset: str
    method: str
    path: Path
    records: list[dict]
    metrics: dict[str, Any]

    def interval(self, metric: str, rank_key: str = "rank", **kw):
        return metric_interval(self.records, metric, rank_key=rank_key, **kw)


def over_runs(runs: list[Run], metric: str, rank_key: str = "rank", **kw) -> RunsEstimate:
    """``metric`` over seeded runs: the mean, its bootstrap interval from the same runs, the std across runs."""
    return runs_estimate([run.records for run in runs], metric, rank_key=rank_key, **kw)


@dataclass
class Study:
    profile: Profile
    root: Path = Path("runs")
    data: str | Path | None = None
    progress: bool = True
    # dataset -> named FHS configuration (FHSConfig.named); a dataset not listed gets the paper's
    configurations: dict[str, str] = field(default_factory=dict)
    _experiments: dict[str, Experiment] = field(default_factory=dict, repr=False)

    @classmethod
    def for_profile(cls, name: str, root: str | Path = "runs", **kw) -> "Study":
        return cls(profile=get_profile(name), root=Path(root), **kw)

    def experiment(self, dataset: str) -> Experiment:
        if dataset not in self._experiments:
            self._experiments[dataset] = load_experiment(dataset, data=self.data, progress=self.progress)
        return self._experiments[dataset]

    def facts(self, dataset: str, llm: bool = False, seed: int = 0) -> list[Fact]:
        """The profile's facts for a dataset: a context-level sample, or every fact."""
        target = self.profile.llm_facts if llm else self.profile.retrieval_facts
        return sample_by_context(self.experiment(dataset).facts, target, seed=seed)

    def input_fingerprints(self, facts: dict[str, list[Fact]], model: ModelChoice | None = None) -> dict[str, str]:
        """What a chapter's expected values depend on: per dataset the facts it used and the
        taxonomy, and the model file (for a served model, its name); ``fhs.book.check`` records them."""
        out: dict[str, str] = {}
        for dataset, used in facts.items():
            out[f"{dataset}/facts"] = facts_fingerprint(used)
            out[f"{dataset}/taxonomy"] = taxonomy_fingerprint(self.experiment(dataset).taxonomy)
        if model is not None:
            path = None
            if model.backend == "llama_cpp":
                from fhs.llm.models import model_path

                path = model_path(model.model)
            out["model"] = model_fingerprint(model.backend, model.model, path)
        return out

    def configuration(self, dataset: str) -> str:
        """The named FHS configuration this study uses on ``dataset`` (``paper`` unless set)."""
        return self.configurations.get(dataset, DEFAULT_CONFIG)

    def run_llm(self, dataset: str, method: str, model: ModelChoice, *, config: FHSConfig | None = None,
                tag: str = "", facts: list[Fact] | None = None, w_cov: float | None = None,
                retriever: str = DEFAULT_RETRIEVER) -> Run:
        """Run an LLM method (or ``direct`` with the shared selector) with ``model`` on the profile's sample.

        Records live in ``<dataset>/<method>[-tag]-seed<seed>``; the model, the
        seed, every FHS knob and a non-default ``retriever`` are part of the run's recorded configuration.
        Without ``config`` the profile's budgets carry the dataset's named
        configuration (:meth:`configuration`).
        """
        if config is None and self.configuration(dataset) != DEFAULT_CONFIG:
            config = model.profile.fhs_config().with_named(self.configuration(dataset))
        experiment = self.experiment(dataset)
        searcher = cached_retriever(experiment.taxonomy,
                                    retrieval_config(experiment.spec.taxonomy, retriever, w_cov=w_cov), retriever,
                                    self.profile.dense_model)
        scoped = Experiment(experiment.spec, experiment.taxonomy, experiment.facts, searcher)
        ctx = scoped.llm_context(model, config)
        settings = {"model": model.describe(), "fhs": ctx.config.to_dict()}
        name_tag = "-".join(part for part in (tag, f"seed{model.seed}") if part)
        run = self.run(dataset, method, w_cov=w_cov, llm=True, tag=name_tag, facts=facts, settings=settings,
                       llm_context=ctx, workers=model.profile.workers, retriever=retriever)
        if model.replay is not None:  # a call the archive lacks is an error, never a silent gap
            from fhs.run.archive import replay_failures

            problem = replay_failures(run.metrics, model.replay, run.path)
            if problem is not None:
                raise problem
        return run

    def run(self, dataset: str, method: str, *, w_cov: float | None = None, llm: bool = False,
            ctx_options: dict[str, Any] | None = None, tag: str = "", facts: list[Fact] | None = None,
            settings: dict[str, Any] | None = None, llm_context: MethodContext | None = None,
            workers: int = 1, retriever: str = DEFAULT_RETRIEVER, **context: Any) -> Run:
        """Run (or reload) ``method`` on ``dataset`` under this profile; records are cached on disk.

        ``settings`` (model, backend, FHS knobs) join the run's recorded
        configuration, so records made with other settings are never mixed in;
        a larger sample only adds the facts not yet recorded. A dense or hybrid
        ``retriever`` (label coverage off unless ``w_cov`` is given) names its
        own folder (``<method>-<retriever>[-<dense model>]...``, the model named when it
        is not the default) and is recorded with its embedding model; BM25 runs keep their
        folder and configuration.
        """
        experiment = self.experiment(dataset)
        config = retrieval_config(experiment.spec.taxonomy, retriever, w_cov=w_cov)
        searcher = cached_retriever(experiment.taxonomy, config, retriever, self.profile.dense_model)
        facts = self.facts(dataset, llm=llm) if facts is None else facts
        default_wcov = retrieval_config(experiment.spec.taxonomy, retriever).w_cov
        dense_model = self.profile.dense_model if retriever != DEFAULT_RETRIEVER else DEFAULT_MODEL
        name = method + (f"-{retriever}" if retriever != DEFAULT_RETRIEVER else "") \
            + (f"-{dense_model}" if dense_model != DEFAULT_MODEL else "") \
            + (f"-wcov{config.w_cov:g}" if config.w_cov != default_wcov else "") + (f"-{tag}" if tag else "")
        ctx = llm_context or Experiment(experiment.spec, experiment.taxonomy, experiment.facts,
                                        searcher).method_context(options=ctx_options or {}, **context)
        run_config = {"dataset": dataset, "method": method,
                      "retrieval": {"w_cov": config.w_cov, "pool_multiplier": config.pool_multiplier,
                                    "top_k": config.top_k}, **(settings or {})}
        if retriever != DEFAULT_RETRIEVER:
            run_config["retriever"] = {"kind": retriever, **retriever_inputs(searcher)}
        if settings:
            # Model and FHS settings pick the folder: changed settings start a new run (the
            # response cache still replays every unchanged call) instead of mixing records.
            digest = hashlib.sha256(json.dumps(run_config, sort_keys=True, default=str).encode()).hexdigest()
            name += f"-{digest[:8]}"
        path = self.root / self.profile.name / dataset / name
        result = run_method(facts, method, ctx, path, run_config=run_config, progress=self.progress,
                            workers=workers)
        wanted = {fact.id for fact in facts}
        records = [r for r in read_records(path / "records.jsonl") if r["id"] in wanted]
        return Run(dataset, method, path, records, result)



def llm_study(profile: str, runs_dir: str | Path, *, llm_limit: int | None = None, backend: str | None = None,
              model: str | None = None, base_url: str | None = None, cache_dir: str | Path = ".fhs-cache",
              seed: int = 0, max_in_flight: int | None = None, thinking: bool | None = None,
              replay: str | Path | None = None) -> tuple[Study, ModelChoice]:
    """A chapter's study and model from its parameters cell, with the cache chapter 2 uses.

    Chapters that share this cache and sample (``runs_dir``/``cache_dir``) share FHS's calls.
    ``replay`` (an ``fhs archive`` file) answers every call from the archive, with no server.
    """
    study = Study.for_profile(profile, runs_dir, progress=False)
    if llm_limit is not None:
        study.profile = replace(study.profile, llm_facts=int(llm_limit))
    choice = ModelChoice.resolve(profile, backend=backend, model=model,
                                 base_urls=base_url.split(",") if base_url else None,
                                 seed=seed, cache=Path(cache_dir) / "responses.sqlite",
                                 max_in_flight=max_in_flight, thinking=thinking, replay=replay)
    return study, choice
