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

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from fhs.data.domain import Domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.llm.contract import LLM
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext, call_record
from fhs.method.hypotheses import (
    Hypothesis,
    RenderedQuery,
    fallback_hypothesis,
    generate_hypotheses,
    parse_hypothesis,
    queries_for,
)
from fhs.method.selector import select
from fhs.method.verifier import (
    Entry,
    Judged,
    KnownVerdicts,
    Verification,
    Window,
    build_window,
    read_verdicts,
    score_pool,
    verifier_request,
)
from fhs.retrieval.bm25 import Ranking
from fhs.retrieval.fusion import FusedPool, fuse
from fhs.retrieval.kinds import Searcher


def pool_of(rankings: Sequence[Ranking], config: FHSConfig) -> FusedPool:
    """Eq. 4: the rankings fused into the candidate pool under the run's fusion settings (FHS and its variants)."""
    return fuse(
        rankings,
        kappa=config.kappa,
        k=config.k,
        method=config.fusion,
        normalize=config.normalize,
        normalize_over=config.normalize_over,
    )


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
    ledger: KnownVerdicts | None = None,
) -> dict[str, Any]:
    """Window, one verifier call per hypothesis (one batch), then Eq. 2 and Eq. 3 (``score_pool``).

    Under ``paper`` scoring a hypothesis that resolved nothing cannot support
    or contradict anything, so its call is skipped (its v_j is the fill, 0).
    A ``ledger`` (the run layer's verdict ledger, ``fhs.run.ledger``) wraps the
    calls: it supplies verdicts already known, so a hypothesis whose window is
    fully known makes no call and one partly known is asked only about the
    rest, and keeps what the calls learned.
    """
    window = build_window(pool, taxonomy, domain, config.k_v, config.scan, config.window)
    asks = tuple(j for j, h in enumerate(hypotheses) if h.resolved or config.scoring != "paper")
    verification = Verification(fact, tuple(hypotheses), window, asks, llm, taxonomy, domain, config)
    judged = ledger.judge(verification, ask_verifier) if ledger is not None else ask_verifier(verification, {})
    names = domain.dimension_names
    verdicts = [judged[j].verdicts(names) if j in judged else {} for j in range(len(hypotheses))]
    scored = score_pool(pool, hypotheses, verdicts, config)
    outside = [cid for cid in pool.ids if cid not in set(window.ids)]
    unasked = Judged(known={})
    return {
        "window": window,
        "ranking": scored.ranking,
        "calls": [judged[j].call for j in asks if judged[j].call is not None],
        "record": {
            "window": window.to_dict(),
            "verdicts": [
                {
                    "asked": j in judged,
                    "parsed": bool(found),
                    "from_ledger": len(judged.get(j, unasked).known),
                    "malformed": judged.get(j, unasked).malformed,
                    "truncated": judged.get(j, unasked).cut,
                    "entries": {cid: v.to_dict() for cid, v in found.items()},
                }
                for j, found in enumerate(verdicts)
            ],
            "support": [{cid: v[cid] for cid in window.ids} for v in scored.support],
            "fill": scored.fills,
            "judged": scored.judged,
            "vbar": {cid: scored.vbar[cid] for cid in window.ids},
            "vbar_outside": scored.vbar[outside[0]] if outside else None,
        },
    }


def ask_verifier(verification: Verification, known: Mapping[int, Mapping[str, Entry]]) -> dict[int, Judged]:
    """One verifier call per asked hypothesis, in one batch, about the window candidates not ``known`` for it.

    A reply cut at ``max_tokens`` keeps its complete entries for this run (the
    authors' salvage) but counts as unparsed (``Judged.learned``).
    """
    v = verification
    names = v.domain.dimension_names
    sub_windows = {j: unjudged_window(v.window, known.get(j, {})) for j in v.asks}
    pending = [j for j in v.asks if sub_windows[j].ids]
    requests = [
        verifier_request(v.fact, v.hypotheses[j], sub_windows[j], v.taxonomy, v.domain, v.config) for j in pending
    ]
    responses = v.llm.complete(requests) if requests else []
    judged = {j: Judged(known=dict(known.get(j, {}))) for j in v.asks}
    for j, request, response in zip(pending, requests, responses):
        fresh, malformed = read_verdicts(response.text, sub_windows[j].ids, names)
        judged[j] = replace(
            judged[j],
            asked=sub_windows[j].ids,
            fresh=fresh,
            malformed=malformed,
            cut=response.cut_short,
            call=call_record(request, response, bool(fresh), v.llm),
        )
    return judged


def unjudged_window(window: Window, known: Mapping[str, Any]) -> Window:
    """The window's candidates never judged under this hypothesis, in the window's order."""
    keep = [i for i, cid in enumerate(window.ids) if cid not in known]
    if len(keep) == len(window.ids):
        return window
    return replace(window, ids=tuple(window.ids[i] for i in keep), profiles=tuple(window.profiles[i] for i in keep))


def run_fhs_fact(
    fact: Fact,
    retriever: Searcher,
    llm: LLM,
    domain: Domain,
    taxonomy: Taxonomy | None,
    config: FHSConfig,
    *,
    hypotheses: Sequence[Hypothesis] | None = None,
    ledger: KnownVerdicts | None = None,
) -> dict[str, Any]:
    """Run FHS (or any configured variant) on one fact and return its JSON-able record.

    ``hypotheses`` replays logged hypotheses instead of generating new ones;
    ``ledger`` supplies verdicts already known (see :func:`verify_pool`).
    ``config.only_hypothesis`` keeps one sampled hypothesis (Table 6's J = 1 rows).
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
        calls += [
            call_record(req, resp, parse_hypothesis(resp.text, names, operators) is not None, llm)
            for req, resp in generated
        ]
    hypotheses = keep_hypothesis(fact, list(hypotheses), config, domain)
    queries = [q for j, h in enumerate(hypotheses) for q in queries_for(fact, h, config, j)]
    rankings = retrieve(fact, queries, retriever)
    pool = pool_of(rankings, config)

    verifier_record = None
    if config.verify and len(pool):
        verified = verify_pool(fact, hypotheses, pool, llm, taxonomy, domain, config, ledger)
        calls += verified["calls"]
        verifier_record = verified["record"]
        final = verified["ranking"]
    else:
        final = pool.as_ranking()

    selection_record, selected_ids = None, list(final.ids)
    if config.selector and final.ids:
        selected_ids, selection, selector_calls = select(fact, final.ids, llm, taxonomy, domain, config)
        calls += [call_record(req, resp, selection is not None, llm) for req, resp in selector_calls]
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


def keep_hypothesis(fact: Fact, hypotheses: list[Hypothesis], config: FHSConfig, domain: Domain) -> list[Hypothesis]:
    """All hypotheses, or only the one sampled as ``config.only_hypothesis`` (the fallback if it failed)."""
    if config.only_hypothesis is None:
        return hypotheses
    kept = [h for h in hypotheses if h.sample_index == config.only_hypothesis and h.source == "model"]
    return kept or [fallback_hypothesis(fact, domain.dimension_names)]


def fhs_as_method(fact: Fact, ctx: MethodContext, config: FHSConfig, method: str) -> dict:
    """``run_fhs_fact`` as a method: the stage record under the names the runner reads."""
    llm, domain = ctx.require_llm(method)
    stages = run_fhs_fact(fact, ctx.retriever, llm, domain, ctx.taxonomy, config, ledger=ctx.ledger)
    for key in ("fact_id", "context_id", "modality"):
        stages.pop(key)
    stages["ranking"] = stages.pop("final_ids")
    selected = stages.pop("selected_ids")
    if selected:
        stages["selected"] = selected[0]
    return stages


def fhs(fact: Fact, ctx: MethodContext) -> dict:
    """Factorized Hypothesis Search: J sampled hypotheses, fusion, verifier, Eq. 3 (+ selector)."""
    return fhs_as_method(fact, ctx, ctx.config, "fhs")
