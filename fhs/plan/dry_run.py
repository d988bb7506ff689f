"""Sizing a GPU run before any model is asked: requests and tokens per chapter, dataset and method.

``fhs plan`` runs the real method code on a small context-level sample of each
dataset with the simulated model (``fhs.plan.simulated``): every stage renders its
real prompts from real facts, and the served model's tokenizer counts them. All
runs of the plan share one in-memory response cache and one verdict ledger, so a
call that a chapter replays from another run (chapter 3's variants replay FHS,
FHS replays FHS-Seq's first round, the ablations replay verdicts) is counted once,
as on a real box. The counts of the sample are then scaled per dataset to the
profile's number of facts.

Which figures are exact: the number of facts, and the requests of methods whose
number of calls does not depend on the answers, when every sampled fact made the
same number of requests. Everything else is estimated from the sample: prompt
tokens, output tokens (the simulator writes schema-shaped answers; where the
authors measured a stage's output, that figure is used instead, see
:data:`MEASURED_OUTPUT`), and the variable rounds of FHS-Seq and the verifier.
Wall time divides the tokens by a server throughput (:mod:`fhs.plan.totals`).
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from fhs.data.facts import Fact
from fhs.data.sampling import sample_by_context
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.tokens import TokenCounter, default_counter
from fhs.method.config import DEFAULT_CONFIG, FHSConfig
from fhs.method.registry import LLM_METHODS, get_method
from fhs.plan.meter import LineMemo, Meter
from fhs.plan.simulated import SimulatedBackend
from fhs.plan.stand_in import StandIn
from fhs.retrieval.bm25 import Retriever
from fhs.retrieval.kinds import DEFAULT_RETRIEVER, Searcher
from fhs.run.inputs import Experiment, ModelChoice, cached_retriever, retrieval_config
from fhs.run.ledger import MemoryLedger
from fhs.run.profiles import RunProfile

RELOCATOR = "llm-relocator"  # chapter 2's LLM relocator: one request per CodiEsp mention of a few documents

# Methods whose number of requests per fact does not depend on what the model answers
# (chapter 2's table of calls): their request counts scale exactly. The refinements are not
# among them: a round whose reading repeats an earlier one sends the same request again,
# which the cache answers.
FIXED_CALLS = frozenset(
    {
        "direct",
        "direct-located",
        "oracle",
        "free-text",
        "structured",
        "parallel",
        "parallel-instructed",
        "parallel-diverse",
        "decomposed",
        RELOCATOR,
    }
)

# Output tokens the authors measured, used instead of the simulator's where they apply:
# the verifier's verbose JSON (an object with the tag and six words per candidate)
# averaged 887-891 completion tokens a call on Qwen3-32B (their verifier logs).
MEASURED_OUTPUT: dict[str, tuple[int, str]] = {
    "verifier-verbose": (889, "the authors' measured mean, 887-891 tokens a call (verbose verdict JSON)"),
}
SIMULATED_OUTPUT = "simulated schema-shaped answers (estimated)"


@dataclass(frozen=True)
class PlannedRun:
    """One run a chapter makes; the fields are named as a run specification's.

    ``configuration`` is a named FHS configuration (``fhs.method.config.NAMED_CONFIGS``) and
    ``changes`` the FHSConfig fields a variant changes on top of it. ``facts``: ``llm`` (the
    profile's LLM sample of the dataset), ``retrieval`` (its sample for LLM-free runs) or
    ``all``. The relocator run (``method`` = ``RELOCATOR``) relocates the mentions of
    ``documents`` CodiEsp test documents, drawn as chapter 2 draws them with ``seed``.
    """

    chapter: str
    dataset: str
    method: str
    retriever: str = DEFAULT_RETRIEVER
    configuration: str = DEFAULT_CONFIG
    changes: Mapping[str, Any] = field(default_factory=dict)
    seed: int = 0
    w_cov: float | None = None
    selector: bool = True
    tag: str = ""
    facts: str = "llm"
    documents: int | None = None

    @property
    def asks_model(self) -> bool:
        return self.method in LLM_METHODS or self.method == RELOCATOR or self.selector

    @property
    def label(self) -> str:
        """The method as the plan's table names it: ``fhs [no_verifier]``, ``structured (dense)``."""
        text = self.method + (f" [{self.tag}]" if self.tag else "")
        return text + (f" ({self.retriever})" if self.retriever != DEFAULT_RETRIEVER else "")


def codiesp_documents(root: Any, split: str = "test") -> list[str]:
    """The CodiEsp documents with a diagnosis mention, from the split's annotation file alone."""
    from fhs.data.datasets.codiesp import codiesp_dir, read_mentions

    folder = codiesp_dir(root, split)
    return sorted({m.document_id for m in read_mentions(folder / f"{split}X.tsv") if m.label == "DIAGNOSTICO"})


def relocation_documents(documents: Sequence[str], n: int, seed: int) -> list[str]:
    """The ``n`` CodiEsp documents chapter 2 relocates with the LLM: sorted ids, shuffled by ``seed``."""
    order = sorted(documents)
    random.Random(seed).shuffle(order)
    return order[:n]


def fhs_config(profile: RunProfile, run: PlannedRun) -> FHSConfig:
    """The FHS settings of a run, as a chapter builds them: profile budgets, named configuration, changes."""
    config = profile.fhs_config()
    if run.configuration != DEFAULT_CONFIG:
        config = config.with_named(run.configuration)
    return config.replace(**dict(run.changes), selector=run.selector)


@dataclass
class Tally:
    """What one run asked on the plan's sample, per purpose, with the requests of each fact."""

    by_purpose: dict[str, list[int]] = field(default_factory=dict)  # purpose -> [requests, prompt, output]
    per_fact: list[int] = field(default_factory=list)

    def add(self, calls: Sequence[tuple[str, int, int]]) -> None:
        self.per_fact.append(len(calls))
        for purpose, prompt, output in calls:
            row = self.by_purpose.setdefault(purpose, [0, 0, 0])
            row[0] += 1
            row[1] += prompt
            row[2] += output


@dataclass(frozen=True)
class Row:
    """A run's figures at the profile's scale."""

    run: PlannedRun
    facts: int  # the profile's facts (exact)
    sampled: int  # facts the plan ran
    requests: int
    prompt_tokens: int
    output_tokens: int
    requests_exact: bool
    by_purpose: Mapping[str, Mapping[str, Any]]  # counts, and where the output count came from
    stand_in: bool = False  # BM25 stood in for the run's dense or hybrid retriever (fhs.plan.stand_in.StandIn)

    def to_dict(self) -> dict[str, Any]:
        run = self.run
        return {
            "chapter": run.chapter,
            "dataset": run.dataset,
            "method": run.method,
            "tag": run.tag,
            "retriever": run.retriever,
            "configuration": run.configuration,
            "changes": dict(run.changes),
            "seed": run.seed,
            "w_cov": run.w_cov,
            "selector": run.selector,
            "sample": run.facts,
            "asks_model": run.asks_model,
            "facts": self.facts,
            "sampled": self.sampled,
            "requests": self.requests,
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "requests_exact": self.requests_exact,
            "stand_in_retriever": self.stand_in,
            "by_purpose": {k: dict(v) for k, v in self.by_purpose.items()},
        }


def _scaled(
    tally: Tally, run: PlannedRun, config: FHSConfig | None, facts: int, sampled: int, stand_in: bool = False
) -> Row:
    scale = facts / sampled if sampled else 0.0
    by_purpose: dict[str, dict[str, Any]] = {}
    for purpose, (requests, prompt, output) in tally.by_purpose.items():
        source = SIMULATED_OUTPUT
        if purpose == "verifier" and config is not None and not config.compact_outputs:
            per_call, source = MEASURED_OUTPUT["verifier-verbose"]
            output = per_call * requests
        by_purpose[purpose] = {
            "requests": round(requests * scale),
            "prompt_tokens": round(prompt * scale),
            "output_tokens": round(output * scale),
            "output_source": source,
        }
    constant = len(set(tally.per_fact)) <= 1
    return Row(
        run,
        facts,
        sampled,
        requests=sum(int(p["requests"]) for p in by_purpose.values()),
        prompt_tokens=sum(int(p["prompt_tokens"]) for p in by_purpose.values()),
        output_tokens=sum(int(p["output_tokens"]) for p in by_purpose.values()),
        requests_exact=run.method in FIXED_CALLS and constant and not stand_in,
        by_purpose=by_purpose,
        stand_in=stand_in,
    )


@dataclass
class DryRun:
    """The plan's machinery: one simulated model, one cache, one ledger, the datasets' samples."""

    profile: RunProfile
    inputs: Callable[[str], Experiment]
    sample: int
    counter: TokenCounter | None = None
    data: Any = None
    build_dense: bool = False  # embed the taxonomies the dense and hybrid runs need, instead of standing in
    meter: Meter = field(init=False)
    llm: CachedLLM = field(init=False)
    ledger: MemoryLedger = field(init=False)
    _experiments: dict[str, Experiment] = field(default_factory=dict, init=False)
    _facts: dict[tuple[str, str], tuple[list[Fact], list[Fact]]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.counter = LineMemo(self.counter or default_counter())
        self.meter = Meter(SimulatedBackend(self.profile.model, self.counter))
        self.llm = CachedLLM(self.meter, ResponseCache(":memory:"))
        self.ledger = MemoryLedger()

    def experiment(self, dataset: str) -> Experiment:
        if dataset not in self._experiments:
            self._experiments[dataset] = self.inputs(dataset)
        return self._experiments[dataset]

    def facts(self, dataset: str, which: str) -> tuple[list[Fact], list[Fact]]:
        """(the profile's facts, the plan's context-level sample of them) for a dataset."""
        key = (dataset, which)
        if key not in self._facts:
            every = self.experiment(dataset).facts
            target = {
                "llm": self.profile.llm_sample_size(self.experiment(dataset).spec.name, len(every)),
                "retrieval": self.profile.retrieval_facts,
                "all": None,
            }[which]
            used = sample_by_context(every, target)
            self._facts[key] = (used, sample_by_context(used, self.sample))
        return self._facts[key]

    def searcher(self, experiment: Experiment, run: PlannedRun) -> Any:
        """The run's retriever; BM25 variants share the dataset's built index (it does not depend on
        w_cov, the pool or the depth), so the plan builds each taxonomy's index once. A dense or
        hybrid retriever is the real one when its concept embeddings are built (by a chapter, or by
        ``fhs plan --build-dense``), else BM25 stands in for it (:class:`StandIn`)."""
        config = retrieval_config(experiment.spec, run.retriever, w_cov=run.w_cov)
        if run.retriever != DEFAULT_RETRIEVER:
            model = self.profile.dense_model_for(experiment.taxonomy.name)
            real = cached_retriever(experiment.taxonomy, config, run.retriever, model)
            dense: Any = getattr(real, "dense", real)  # a hybrid's dense half, or the dense retriever itself
            if self.build_dense or dense.is_built():
                return real
        base = experiment.retriever
        if isinstance(base, Retriever) and (base.config.k1, base.config.b, base.config.type_filter) == (
            config.k1,
            config.b,
            config.type_filter,
        ):
            bm25: Searcher = copy.copy(base)
            bm25.config = config
        else:
            bm25 = cached_retriever(experiment.taxonomy, config)
        return bm25 if run.retriever == DEFAULT_RETRIEVER else StandIn(bm25, run.retriever)

    def context(self, run: PlannedRun):
        experiment = self.experiment(run.dataset)
        config = fhs_config(self.profile, run)
        model = ModelChoice(profile=self.profile, backend="simulated", model=self.profile.model, seed=run.seed)
        model._llm, model._ledger = self.llm, self.ledger
        scoped = Experiment(
            experiment.spec, experiment.taxonomy, experiment.facts, self.searcher(experiment, run), experiment.domain
        )
        ctx = scoped.llm_context(model, config)
        return ctx, config

    def relocate(self, run: PlannedRun, bar: tqdm) -> Row:
        """Chapter 2's LLM relocator on its documents: one request per mention, counted exactly."""
        from fhs.data.datadir import data_dir
        from fhs.data.datasets.codiesp import load_split
        from fhs.run.relocation import LLMRelocator

        taxonomy = self.experiment(run.dataset).taxonomy
        root = data_dir(self.data)
        chosen = set(relocation_documents(codiesp_documents(root), run.documents or 0, run.seed))
        before = len(self.meter.calls)
        split = load_split(root, taxonomy, documents=chosen, relocator=LLMRelocator(self.llm), cache=False)
        tally = Tally()
        tally.add(self.meter.calls[before:])
        bar.update(len(chosen))
        mentions = int(split.stats["facts"])
        return _scaled(tally, run, None, mentions, mentions)

    def run(self, run: PlannedRun, bar: tqdm) -> Row:
        if run.method == RELOCATOR:
            return self.relocate(run, bar)
        used, sampled = self.facts(run.dataset, run.facts)
        if not run.asks_model:
            bar.update(len(sampled))
            return _scaled(Tally(), run, None, len(used), len(sampled))
        ctx, config = self.context(run)
        method = get_method(run.method)
        tally = Tally()
        for fact in sampled:
            before = len(self.meter.calls)
            method(fact, ctx)
            tally.add(self.meter.calls[before:])
            bar.update()
        return _scaled(tally, run, config, len(used), len(sampled), stand_in=isinstance(ctx.retriever, StandIn))

    def work(self, run: PlannedRun) -> int:
        """Facts the plan will run for ``run`` (for the progress bar); loads the dataset."""
        if run.method == RELOCATOR:
            return run.documents or 0
        return len(self.facts(run.dataset, run.facts)[1])


def dry_run(
    runs: Sequence[PlannedRun],
    profile: RunProfile,
    inputs: Callable[[str], Experiment],
    *,
    sample: int = 20,
    counter: TokenCounter | None = None,
    data: Any = None,
    progress: bool = True,
    build_dense: bool = False,
    stats: dict | None = None,
) -> list[Row]:
    """Every run on the plan's sample, in order, through one cache and ledger; figures at the profile's scale.

    ``build_dense``: embed the taxonomies of the dense and hybrid runs (once; the chapters reuse
    them) rather than let BM25 stand in where they are not built yet. ``stats``, when given, gets
    ``prefix_share``: the share of prompt text a prefix cache could serve (``meter.PrefixShare``)."""
    machine = DryRun(profile, inputs, sample, counter=counter, data=data, build_dense=build_dense)
    loading = tqdm(runs, desc="loading datasets", unit="run", disable=not progress, leave=False)
    total = sum(machine.work(run) for run in loading)
    loading.close()
    rows = []
    with tqdm(total=total, desc="dry run (simulated model)", unit="fact", disable=not progress, leave=False) as bar:
        for run in runs:
            bar.set_postfix_str(f"{run.chapter} {run.dataset} {run.label} seed {run.seed}", refresh=False)
            rows.append(machine.run(run, bar))
    machine.llm.cache.close()
    if stats is not None:
        stats["prefix_share"] = machine.meter.prefix.share
    return rows
