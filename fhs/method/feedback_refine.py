"""Retrieval-feedback refinement (the paper's Section 5 and Appendix C.1).

As self-refinement, but rounds 2-4 also show the previous round's top 10
candidates (those of the fact's datatype first) with their labels and short
definitions, and return ``{assessment, query}``. RRF over the four rounds.
4 greedy LLM calls (the first served by the cache after ``free-text``).
"""

from __future__ import annotations

from fhs.data.facts import Fact
from fhs.llm.contract import Request
from fhs.method.context import MethodContext
from fhs.method.refine import refine
from fhs.method.rewrite import Query, candidate_lines, feedback_candidates, rewrite_request

PURPOSE = "feedback-refine"


def feedback_request(fact: Fact, ctx: MethodContext, previous: str, last: Query) -> tuple[Request, dict]:
    """A later round: the evidence, the previous reading and what its query retrieved."""
    shown = feedback_candidates(fact, last.ranking.ids, ctx.taxonomy)
    lines = candidate_lines(shown, ctx.taxonomy, ctx.config.definition_chars) or "(nothing was retrieved)"
    domain = ctx.require_domain(PURPOSE)
    request = rewrite_request(
        "refine_feedback",
        fact,
        domain,
        ctx.config,
        purpose=PURPOSE,
        fields=("assessment", "query"),
        previous=previous,
        candidate_lines=lines,
    )
    return request, {"shown_candidates": shown}


def feedback_refine(fact: Fact, ctx: MethodContext) -> dict:
    """Four rounds, each later one shown the last round's top 10 candidates, RRF over rounds (4 calls + selector)."""
    return refine(fact, ctx, method=PURPOSE, next_request=feedback_request, note="assessment")
