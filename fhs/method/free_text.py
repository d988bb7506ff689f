"""One-pass free-text grounding (HyDE-style, the paper's Section 5 and Appendix C.1).

One greedy call writes a description of the concept the located value
reports, worded like the taxonomy's labels and definitions and naming no
concept; it is prefixed with ``<value> <datatype>`` and retrieved once. An
empty or unreadable reply issues the direct query instead (the documented
fallback; the record keeps ``source: fallback`` and the call ``parsed: false``).
"""

from __future__ import annotations

from fhs.data.domain import Domain
from fhs.data.facts import Fact
from fhs.llm.contract import Request
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext, with_selector
from fhs.method.rewrite import Calls, final_record, fuse_rankings, reading, rewrite_request, search_query

PURPOSE = "free-text"
FIELDS = ("query",)


def free_text_request(fact: Fact, domain: Domain, config: FHSConfig, *, purpose: str = PURPOSE) -> Request:
    """The greedy free-text call. Self-refinement's round 1 sends exactly this request,
    so a shared response cache answers it without the model (the purpose is only a label)."""
    return rewrite_request("freetext", fact, domain, config, purpose=purpose, fields=FIELDS, variation="")


def free_text(fact: Fact, ctx: MethodContext) -> dict:
    """One greedy description, prefixed and retrieved (1 LLM call + selector)."""
    llm, domain = ctx.require_llm("free-text")
    calls = Calls()
    (values,) = calls.ask(llm, [free_text_request(fact, domain, ctx.config)], FIELDS, required="query")
    query = search_query(fact, reading(values), ctx.retriever)
    pool = fuse_rankings([query.ranking], ctx.config)
    record = final_record(pool, calls, rounds=[{"round": 1, "reading": reading(values), **query.to_dict()}])
    return with_selector(fact, ctx, record)
