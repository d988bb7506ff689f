"""FHS on one fact, stage by stage, with a plain record of everything each stage saw and produced.

    hypotheses -> queries -> rankings -> fused pool -> window -> verdicts
    -> support / fill / consensus -> final order (Eq. 3) -> selector

The same function runs the one-pass structured baseline
(``FHSConfig.structured()``: J=1, greedy, beta=0, so no verifier calls) and
every ablation; only the configuration changes. The record is JSON-able and
keeps the full rankings, the pool's normalised scores and v̄, so beta sweeps,
fusion variants and fill variants can be recomputed offline without new calls.
The record never contains the fact's gold ids.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from fhs.data.domain import Domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.llm.contract import LLM
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext, call_record
from fhs.method.hypotheses import Hypothesis, RenderedQuery, generate_hypotheses, parse_hypothesis, queries_for
from fhs.method.selector import select
from fhs.retrieval.bm25 import Ranking
from fhs.retrieval.fusion import FusedPool, fuse
from fhs.method.verifier import (build_window, consensus, fill_support, fill_value, final_scores,
                          read_verdicts, support, verifier_request)


class Searcher(Protocol):
    """What the pipeline needs from retrieval: one query (and the fact's datatype) in, a ranking out."""

    def search(self, query: str, datatype: str | None) -> Ranking: ...


def retrieve(fact: Fact, queries: Sequence[RenderedQuery], retriever: Searcher) -> list[Ranking]:
    return [retriever.search(q.text, fact.datatype) for q in queries]


def verify_pool(
    fact: Fact,
    hypotheses: Sequence[Hypothesis],
    pool: FusedPool,
    llm: LLM,
    taxonomy: Taxonomy | None,
    domain: Domain,
    config: FHSConfig,
) -> dict[str, Any]:
    """Window, one verifier call per hypothesis (one batch), support, fill, consensus, Eq. 3.

    Under ``paper`` scoring a hypothesis that resolved nothing cannot support
    or contradict anything, so its call is skipped (its v_j is the fill, 0).
    """
    window = build_window(pool, taxonomy, domain, config.k_v, config.scan, config.window)
    asks = [j for j, h in enumerate(hypotheses) if h.resolved or config.scoring != "paper"]
    requests = [verifier_request(fact, hypotheses[j], window, taxonomy, domain, config) for j in asks]
    responses = llm.complete(requests) if requests else []
    by_hypothesis = dict(zip(asks, responses))
    names = domain.dimension_names
    calls, verdict_records, per_hypothesis, fills, judged_counts = [], [], [], [], []
    for j, hypothesis in enumerate(hypotheses):
        response = by_hypothesis.get(j)
        verdicts, malformed = read_verdicts(response.text, window.ids, names) if response is not None else ({}, 0)
        if response is not None:
            calls.append(call_record(requests[asks.index(j)], response, bool(verdicts)))
        judged = support(verdicts, hypothesis, config.scoring)
        per_hypothesis.append(fill_support(judged, pool.ids, config.fill))
        fills.append(fill_value(judged, config.fill))
        judged_counts.append(len(judged))
        verdict_records.append({
            "asked": response is not None,
            "parsed": bool(verdicts),
            "malformed": malformed,  # codes that named no verdict per dimension: their candidates take the fill
            "entries": {cid: v.to_dict() for cid, v in verdicts.items()},
        })
    vbar = consensus(per_hypothesis, pool.ids)
    ranking = final_scores(pool, vbar, config.beta)
    outside = [cid for cid in pool.ids if cid not in set(window.ids)]
    return {
        "window": window,
        "ranking": ranking,
        "calls": calls,
        "record": {
            "window": window.to_dict(),
            "verdicts": verdict_records,
            "support": [{cid: v[cid] for cid in window.ids} for v in per_hypothesis],
            "fill": fills,
            "judged": judged_counts,
            "vbar": {cid: vbar[cid] for cid in window.ids},
            "vbar_outside": vbar[outside[0]] if outside else None,
        },
    }


def run_fhs_fact(
    fact: Fact,
    retriever: Searcher,
    llm: LLM,
    domain: Domain,
    taxonomy: Taxonomy | None,
    config: FHSConfig,
    *,
    hypotheses: Sequence[Hypothesis] | None = None,
) -> dict[str, Any]:
    """Run FHS (or any configured variant) on one fact and return its JSON-able record.

    ``hypotheses`` replays logged hypotheses instead of generating new ones.
    Record keys: fact_id, context_id, modality, hypotheses, queries, rankings
    (full id lists, one per query), pool (ids, scores, normalized,
    contributions, union_size), verifier (window, verdicts, support, fill,
    judged, vbar, vbar_outside; null when beta = 0), final_ids, final_scores
    (top-K after Eq. 3, before the selector), selection, selected_ids,
    llm_calls (purpose, tokens, seconds, cached, parsed).
    """
    calls: list[dict[str, Any]] = []
    if hypotheses is None:
        hypotheses, generated = generate_hypotheses(fact, llm, config, domain)
        names, operators = domain.dimension_names, domain.operator_names
        calls += [call_record(req, resp, parse_hypothesis(resp.text, names, operators) is not None)
                  for req, resp in generated]
    hypotheses = list(hypotheses)
    queries = [q for j, h in enumerate(hypotheses) for q in queries_for(fact, h, config, j)]
    rankings = retrieve(fact, queries, retriever)
    pool = fuse(rankings, kappa=config.kappa, k=config.k, method=config.fusion,
                normalize=config.normalize, normalize_over=config.normalize_over)

    verifier_record = None
    if config.verify and len(pool):
        verified = verify_pool(fact, hypotheses, pool, llm, taxonomy, domain, config)
        calls += verified["calls"]
        verifier_record = verified["record"]
        final = verified["ranking"]
    else:
        final = pool.as_ranking()

    selection_record, selected_ids = None, list(final.ids)
    if config.selector and final.ids:
        selected_ids, selection, selector_calls = select(fact, final.ids, llm, taxonomy, domain, config)
        calls += [call_record(req, resp, selection is not None) for req, resp in selector_calls]
        selection_record = selection.to_dict() if selection is not None else None

    return {
        "fact_id": fact.id,
        "context_id": fact.context_id,
        "modality": fact.modality,
        "hypotheses": [h.to_dict() for h in hypotheses],
        "queries": [q.to_dict() for q in queries],
        "rankings": [list(r.ids) for r in rankings],
        "pool": pool.to_dict(),
        "verifier": verifier_record,
        "final_ids": list(final.ids),
        "final_scores": list(final.scores),
        "selection": selection_record,
        "selected_ids": selected_ids if config.selector else None,
        "llm_calls": calls,
    }


def run_method(fact: Fact, ctx: MethodContext, config: FHSConfig, method: str) -> dict:
    """``run_fhs_fact`` as a method: the stage record under the names the runner reads."""
    llm, domain = ctx.require_llm(method)
    stages = run_fhs_fact(fact, ctx.retriever, llm, domain, ctx.taxonomy, config)
    for key in ("fact_id", "context_id", "modality"):
        stages.pop(key)
    stages["ranking"] = stages.pop("final_ids")
    selected = stages.pop("selected_ids")
    if selected:
        stages["selected"] = selected[0]
    return stages


def fhs(fact: Fact, ctx: MethodContext) -> dict:
    """Factorized Hypothesis Search: J sampled hypotheses, fusion, verifier, Eq. 3 (+ selector)."""
    return run_method(fact, ctx, ctx.config, "fhs")
