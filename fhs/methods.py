"""Methods by name. Each is a function ``(fact, context) -> stage record``.

A method returns a plain dict describing what it did for one fact; it must
hold ``ranking`` (the final ordered concept ids, at most K, before the
selector) and, when the shared listwise selector ran, ``selected`` (its top-1).
The runner adds the fact's id, context, modality, gold ids and gold rank.
Methods never read ``fact.gold`` except ``oracle``, whose whole point is the
gold query. ``structured`` and ``fhs`` are two configurations of one pipeline
(``fhs.pipeline.run_fhs_fact``), so they cannot drift apart.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fhs.config import FHSConfig
from fhs.domain import Domain
from fhs.errors import InputError, choose
from fhs.evidence import direct_query, prefixed
from fhs.facts import Fact
from fhs.llm import LLM
from fhs.retrieval import Retriever
from fhs.taxonomy import Taxonomy


@dataclass
class MethodContext:
    """What a method may use: the taxonomy, a retriever, and for LLM methods a model and domain.

    ``config`` holds every FHS knob; ``structured`` derives its own settings
    from it (J 1, greedy, beta 0) so budgets and the selector stay shared.
    """

    taxonomy: Taxonomy
    retriever: Retriever
    llm: LLM | None = None
    domain: Domain | None = None
    config: FHSConfig = field(default_factory=FHSConfig)
    options: dict[str, Any] = field(default_factory=dict)

    def require_llm(self, method: str) -> tuple[LLM, Domain]:
        if self.llm is None or self.domain is None:
            raise InputError(f"method {method!r} needs a language model", field="backend",
                             fix="pass --backend and --model, or --profile smoke|cpu|paper")
        return self.llm, self.domain


Method = Callable[[Fact, MethodContext], dict]


def _with_selector(fact: Fact, ctx: MethodContext, record: dict) -> dict:
    """Run the shared listwise selector on a method's final list when a model is available."""
    from fhs.pipeline import _call_record
    from fhs.selector import select

    if ctx.llm is None or ctx.domain is None or not ctx.config.selector or not record["ranking"]:
        return record
    selected_ids, selection, calls = select(fact, record["ranking"], ctx.llm, ctx.taxonomy, ctx.domain, ctx.config)
    record["selection"] = selection.to_dict() if selection is not None else None
    record["selected"] = selected_ids[0]
    record["llm_calls"] = record.get("llm_calls", []) + [
        _call_record(req, resp, selection is not None) for req, resp in calls]
    return record


def direct(fact: Fact, ctx: MethodContext) -> dict:
    """Direct retrieval: the raw serialized fact is the query (0 LLM calls before the selector)."""
    query = direct_query(fact)
    ranking = ctx.retriever.search(query, fact.datatype)
    return _with_selector(fact, ctx, {"queries": [query], "ranking": list(ranking.ids)})


def oracle(fact: Fact, ctx: MethodContext) -> dict:
    """The gold-query probe: the gold concept's own label and definition, prefixed.

    It measures what the index can do once the query expresses the target
    (the paper's Appendix E.1); a fact whose gold is not in the taxonomy gets
    an empty ranking and counts as a miss. With ``options["oracle_with_id"]``
    the concept's id leads the text, as in the authors' CodiEsp probe.
    """
    gold = next((ctx.taxonomy[g] for g in fact.gold if g in ctx.taxonomy), None)
    if gold is None:
        return {"queries": [], "ranking": [], "note": "gold concept not in the taxonomy"}
    text = gold.index_text if ctx.options.get("oracle_with_id") else f"{gold.label} {gold.definition}"
    query = prefixed(fact, text)
    ranking = ctx.retriever.search(query, fact.datatype)
    return {"queries": [query], "ranking": list(ranking.ids)}


def _pipeline(fact: Fact, ctx: MethodContext, config: FHSConfig, method: str) -> dict:
    from fhs.pipeline import run_fhs_fact

    llm, domain = ctx.require_llm(method)
    stages = run_fhs_fact(fact, ctx.retriever, llm, domain, ctx.taxonomy, config)
    for key in ("fact_id", "context_id", "modality"):
        stages.pop(key)
    stages["ranking"] = stages.pop("final_ids")
    selected = stages.pop("selected_ids")
    if selected:
        stages["selected"] = selected[0]
    return stages


def structured_config(config: FHSConfig) -> FHSConfig:
    """One-pass structured grounding: the FHS path with J 1, greedy decoding and no verifier."""
    return dataclasses.replace(config, num_hypotheses=1, temperature=0.0, top_p=1.0, beta=0.0)


def structured(fact: Fact, ctx: MethodContext) -> dict:
    """One structured hypothesis, dual-rendered, retrieved and fused (1 LLM call + selector)."""
    return _pipeline(fact, ctx, structured_config(ctx.config), "structured")


def fhs(fact: Fact, ctx: MethodContext) -> dict:
    """Factorized Hypothesis Search: J sampled hypotheses, fusion, verifier, Eq. 3 (+ selector)."""
    return _pipeline(fact, ctx, ctx.config, "fhs")


METHODS: dict[str, Method] = {
    "direct": direct,
    "oracle": oracle,
    "structured": structured,
    "fhs": fhs,
}

# Methods that cannot run without a model (direct only uses one for the selector).
LLM_METHODS = frozenset({"structured", "fhs"})


def get_method(name: str) -> Method:
    return choose(METHODS, name, "method")
