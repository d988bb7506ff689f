"""Intrinsic self-refinement (the paper's Section 5 and Appendix C.1).

Round 1 is the free-text call; rounds 2-4 ask the model to critique its
previous reading against the evidence alone, without seeing any candidate,
and return ``{critique, query}``. The four rounds' lists are RRF-fused.
4 greedy LLM calls (the first served by the cache after ``free-text``).
"""

from __future__ import annotations

from fhs.data.facts import Fact
from fhs.llm.contract import Request
from fhs.method.context import MethodContext
from fhs.method.refine import refine
from fhs.method.rewrite import Query, rewrite_request

PURPOSE = "self-refine"


def critique_request(fact: Fact, ctx: MethodContext, previous: str, last: Query) -> tuple[Request, dict]:
    """A later round: the evidence and the previous reading, nothing retrieved."""
    domain = ctx.require_domain(PURPOSE)
    return rewrite_request(
        "refine_critique", fact, domain, ctx.config, purpose=PURPOSE, fields=("critique", "query"), previous=previous
    ), {}


def self_refine(fact: Fact, ctx: MethodContext) -> dict:
    """Four rounds of critique-and-rewrite without retrieval feedback, RRF over rounds (4 calls + selector)."""
    return refine(fact, ctx, method=PURPOSE, next_request=critique_request, note="critique")
