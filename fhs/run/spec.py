"""One run, specified once: what it runs, where its records live, what its stamp says, how it executes.

``fhs run``, ``Study.run`` and ``Study.run_llm`` all describe a run as a
:class:`RunSpec` and execute it here, so the command line and the chapters
write the same ``run-config.json`` and resume, refuse and name runs alike.

**The stamp** (``run-config.json``, schema ``STAMP_VERSION``), one object:

- ``stamp``: the schema version;
- ``dataset``, ``method``;
- ``retriever``: ``{"kind": bm25 | dense | hybrid}``, plus ``"model"`` (the embedding model) for dense and hybrid;
- ``retrieval``: every field of the retriever's ``RetrievalConfig`` (w_cov, list depth, pool, ...);
- ``model``: ``{"backend", "model", "structured"}``, or null for a run that asks no model;
- ``seed``, ``fhs_configuration`` (the named configuration) and ``fhs`` (every ``FHSConfig``
  field as the run used it): null for a run that asks no model;
- ``inputs``: SHA-256 digests of what the records were made from (``fhs.run.digests``): the
  dataset's facts (all of them, not the sample, so a larger sample adds to the same run), the
  taxonomy, a dense retriever's model files and, with a model, the domain, the prompts and the model;
- ``sources`` (optional): where a user's files were read from; not compared on resume.

A rerun resumes when every field but ``sources`` is equal, and is refused otherwise.

**The folder** (a Study's runs; ``fhs run`` writes to its ``--out``), :meth:`RunSpec.folder_name`::

    <method>[-<retriever>[-<dense model>]][-wcov<w_cov>][-<tag>][-seed<seed>]-<digest>

the retriever when it is not bm25, its model when it is not the default one, w_cov when
it is not the taxonomy's default for that retriever, the tag when there is one, the seed
when the run asks a model; ``digest`` is the first 8 hex digits of the SHA-256 of the
stamp without ``sources``. A changed setting or input therefore starts a new folder (the
response cache still replays every unchanged call) instead of mixing records.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

from fhs.core.errors import InputError, choose
from fhs.data.datasets import DatasetSpec
from fhs.data.facts import Fact
from fhs.method.config import DEFAULT_CONFIG, NAMED_CONFIGS, FHSConfig
from fhs.method.context import MethodContext
from fhs.method.registry import LLM_METHODS, get_method
from fhs.retrieval.encoders import DEFAULT_MODEL
from fhs.retrieval.exact_dense import model_facing
from fhs.retrieval.kinds import DEFAULT_RETRIEVER, Searcher, retriever_kind
from fhs.run.evaluate import MISS, REFUSED
from fhs.run.inputs import Experiment, ModelChoice, cached_retriever, retrieval_config
from fhs.run.runner import RunJob, RunOutcome, run_jobs

STAMP_VERSION = 1
# FHSConfig fields a run takes from elsewhere: the retriever (k, w_cov), the seed, the selector switch
_DERIVED = ("k", "w_cov", "seed", "selector")


@dataclass(frozen=True)
class RunSpec:
    """A run: a method on a dataset, searched by a retriever, asking a model with FHS settings.

    ``configuration`` names an FHS configuration (``NAMED_CONFIGS``) applied
    over the model profile's budgets, then ``overrides`` (``FHSConfig`` fields,
    e.g. the command line's knobs). ``selector`` switches the shared selector
    (None: on for LLM methods, off for direct and oracle). ``w_cov`` None is the
    taxonomy's default for the retriever. ``model`` is needed when the run asks
    one (:attr:`asks_model`). The module docstring has the stamp and folder rules.
    """

    dataset: str
    method: str
    model: ModelChoice | None = None
    seed: int = 0
    retriever: str = DEFAULT_RETRIEVER
    dense_model: str = DEFAULT_MODEL
    w_cov: float | None = None
    configuration: str = DEFAULT_CONFIG
    overrides: Mapping[str, Any] = field(default_factory=dict)
    selector: bool | None = None
    tag: str = ""

    def __post_init__(self) -> None:
        get_method(self.method)  # an unknown method fails here, naming the choices
        choose(NAMED_CONFIGS, self.configuration, "FHS configuration")
        known = {f.name for f in fields(FHSConfig)} - set(_DERIVED)
        unknown = sorted(set(self.overrides) - known)
        if unknown:
            raise InputError(
                f"not an FHS setting a run may override: {', '.join(unknown)}",
                field="fhs",
                fix=f"use fields of FHSConfig other than {', '.join(_DERIVED)}",
            )
        object.__setattr__(self, "overrides", MappingProxyType(dict(self.overrides)))

    @property
    def uses_selector(self) -> bool:
        return self.method in LLM_METHODS if self.selector is None else self.selector

    @property
    def asks_model(self) -> bool:
        """Whether the run needs a model: an LLM method, or any method with the shared selector."""
        return self.method in LLM_METHODS or self.uses_selector

    def with_config(self, config: FHSConfig, base: FHSConfig) -> RunSpec:
        """This spec with a whole ``FHSConfig`` expressed as overrides over ``base`` (a profile's budgets)."""
        wanted, default = config.to_dict(), base.to_dict()
        changed = {
            name: getattr(config, name)
            for name, value in wanted.items()
            if name not in _DERIVED and value != default[name]
        }
        return replace(self, configuration=DEFAULT_CONFIG, overrides=changed, selector=config.selector)

    # ---- what the run reads -----------------------------------------------------------------
    def searcher(self, experiment: Experiment) -> Searcher:
        """The retriever this run searches with: the experiment's own BM25 index when its settings are
        this run's, else the process's index for these settings (``cached_retriever``). A run that asks
        a model ranks dense candidates by exact vectors, so its lists are the same on every CPU."""
        config = retrieval_config(experiment.spec, self.retriever, w_cov=self.w_cov)
        own = experiment.retriever
        if self.retriever == DEFAULT_RETRIEVER and retriever_kind(own) == DEFAULT_RETRIEVER and own.config == config:
            return own
        searcher = cached_retriever(experiment.taxonomy, config, self.retriever, self.dense_model)
        return model_facing(searcher) if self.asks_model else searcher

    def fhs_config(self, searcher: Searcher) -> FHSConfig:
        """The FHS settings of the run: the profile's budgets, the named configuration, the overrides."""
        if self.model is None:
            return FHSConfig()
        try:
            config = self.model.profile.fhs_config().with_named(self.configuration).replace(**self.overrides)
            return config.replace(
                k=searcher.config.top_k, w_cov=searcher.config.w_cov, seed=self.seed, selector=self.uses_selector
            )
        except ValueError as error:
            raise InputError(
                str(error), field=next(iter(self.overrides), "fhs"), fix="see fhs run --help for each knob's range"
            ) from None

    def context(self, experiment: Experiment) -> MethodContext:
        """What the method receives: the experiment's taxonomy, this run's retriever and, when asked, the model."""
        scoped = replace(experiment, retriever=self.searcher(experiment))
        if not self.asks_model:
            return scoped.method_context()
        if self.model is None:
            raise InputError(
                f"method {self.method!r} asks a model (the selector does too)",
                field="backend",
                fix="pass --backend and --model, or a --profile that names them",
            )
        return scoped.llm_context(self.model, self.fhs_config(scoped.retriever), seed=self.seed)

    # ---- the stamp and the folder -----------------------------------------------------------
    def stamp(
        self, experiment: Experiment, ctx: MethodContext, sources: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """``run-config.json`` of this run (the module docstring lists the fields)."""
        scoped = replace(experiment, retriever=ctx.retriever)
        inputs = scoped.fingerprint(llm=self.asks_model)
        retriever: dict[str, Any] = {"kind": retriever_kind(ctx.retriever)}
        if retriever["kind"] != DEFAULT_RETRIEVER:
            retriever["model"] = self.dense_model
        asked, model = self.asks_model, self.model
        if asked:
            if model is None:
                raise ValueError(f"method {self.method!r} asks a model, and the run names none")
            inputs["model"] = model.fingerprint()
        stamp: dict[str, Any] = {
            "stamp": STAMP_VERSION,
            "dataset": self.dataset,
            "method": self.method,
            "retriever": retriever,
            "retrieval": asdict(ctx.retriever.config),
            "model": model.describe() if asked and model is not None else None,
            "seed": self.seed if asked else None,
            "fhs_configuration": self.configuration if asked else None,
            "fhs": ctx.config.to_dict() if asked else None,
            "inputs": inputs,
        }
        if sources:
            stamp["sources"] = dict(sources)
        return json.loads(json.dumps(stamp))  # plain JSON values, as a reread stamp holds them

    def folder_name(self, stamp: Mapping[str, Any], dataset: DatasetSpec | str) -> str:
        """The run's folder under a dataset's folder (the module docstring states the rule); ``dataset``
        is the dataset's spec (or its taxonomy's name), whose retrieval settings give the default w_cov."""
        parts = [self.method]
        if self.retriever != DEFAULT_RETRIEVER:
            parts.append(self.retriever)
            if self.dense_model != DEFAULT_MODEL:
                parts.append(self.dense_model)
        w_cov = stamp["retrieval"]["w_cov"]
        if w_cov != retrieval_config(dataset, self.retriever).w_cov:
            parts.append(f"wcov{w_cov:g}")
        if self.tag:
            parts.append(self.tag)
        if stamp["model"] is not None:
            parts.append(f"seed{self.seed}")
        settled = {key: value for key, value in stamp.items() if key != "sources"}
        parts.append(hashlib.sha256(json.dumps(settled, sort_keys=True).encode("utf-8")).hexdigest()[:8])
        return "-".join(parts)

    # ---- execution --------------------------------------------------------------------------
    def job(
        self,
        experiment: Experiment,
        facts: Sequence[Fact],
        *,
        out_dir: str | Path | None = None,
        root: str | Path | None = None,
        fresh: bool = False,
        refused: str = MISS,
        sources: Mapping[str, Any] | None = None,
        retry_unusable: bool = False,
    ) -> RunJob:
        """The run ready to execute: into ``out_dir``, or into its named folder under ``root``."""
        if (out_dir is None) == (root is None):
            raise ValueError("give a run either out_dir or root")
        choose(REFUSED, refused, "refused-facts policy")
        ctx = self.context(experiment)
        if fresh and getattr(ctx, "ledger", None) is not None:  # a fresh run reuses no verdict, records its own
            from fhs.run.ledger import Ledger, RecordOnly

            assert isinstance(ctx.ledger, Ledger)
            ctx.ledger = RecordOnly(ctx.ledger)
        stamp = self.stamp(experiment, ctx, sources)
        path = Path(out_dir) if out_dir is not None else Path(root or ".") / self.folder_name(stamp, experiment.spec)
        if sources is None and experiment.spec.source is not None:  # a spec file's dataset: where its files are
            stamp["sources"] = spec_sources(experiment.spec, path)  # not part of the folder's name
        return RunJob(
            facts, self.method, ctx, path, stamp=stamp, fresh=fresh, refused=refused, retry_unusable=retry_unusable
        )

    def execute(
        self, experiment: Experiment, facts: Sequence[Fact], *, workers: int = 1, progress: bool = True, **where: Any
    ) -> RunOutcome:
        """Run it (resuming from the records already there); ``where`` as for :meth:`job`."""
        return run_jobs([self.job(experiment, facts, **where)], workers=workers, progress=progress)[0]


def spec_sources(dataset: DatasetSpec, run_dir: Path | None = None) -> dict[str, str]:
    """Where a spec file's dataset was read from (a stamp's ``sources``, so `fhs show` finds its files): relative
    to ``run_dir`` when given, so a run's records name no absolute path (a book's records are published with it)."""
    sources = {
        "facts": str(dataset.facts_file),
        "taxonomy": str(dataset.taxonomy_file or dataset.taxonomy),
        "domain": dataset.domain,
        "spec": str(dataset.source),
    }
    if run_dir is None:
        return sources
    here = Path(run_dir).resolve()
    return {
        key: os.path.relpath(value, here) if value and Path(value).is_absolute() else value
        for key, value in sources.items()
    }


def run_all(
    runs: Sequence[tuple[RunSpec, Experiment, Sequence[Fact]]],
    *,
    root: str | Path,
    workers: int = 1,
    progress: bool = True,
    refused: str = MISS,
) -> list[RunOutcome]:
    """Execute many runs together, each in its named folder under ``root/<dataset>/``; one outcome per run.

    Facts of every run are in flight at once, up to ``workers`` (fact-major:
    ``fhs.run.runner``), so the records are those of running the runs one
    after another in this order, whatever ``workers`` is. A run listed twice
    (same folder, same facts) runs once.
    """
    jobs: dict[Path, RunJob] = {}
    order: list[Path] = []
    for spec, experiment, facts in runs:
        job = spec.job(experiment, facts, root=Path(root) / spec.dataset, refused=refused)
        seen = jobs.get(job.out_dir)
        if seen is not None and [f.id for f in seen.facts] != [f.id for f in facts]:
            raise ValueError(f"two runs write {job.out_dir} with different facts")
        jobs.setdefault(job.out_dir, job)
        order.append(job.out_dir)
    outcomes = dict(zip(jobs, run_jobs(list(jobs.values()), workers=workers, progress=progress)))
    return [outcomes[path] for path in order]
