"""Decomposed retrieval (the paper's Section 5 and Appendix C.1).

One greedy call splits the search into four aspect sub-queries: the entity's
kind and family, its temporal scope, its measurement and qualifiers, and its
place in the structure (aggregation). Each is prefixed and retrieved, and the
four lists are fused with summed RRF. A slot the model leaves empty, or every
slot when the reply is unreadable, takes the direct query (the authors' fill).
"""

from __future__ import annotations

from fhs.data.facts import Fact
from fhs.method.context import MethodContext, with_selector
from fhs.method.rewrite import Calls, final_record, fuse_rankings, rewrite_request, search_query

PURPOSE = "decomposed"
SLOTS = ("entity_family", "temporal_scope", "measurement", "aggregation")


def decomposed(fact: Fact, ctx: MethodContext) -> dict:
    """Four aspect sub-queries from one call, each retrieved, RRF-fused (1 LLM call, 4 retrievals + selector)."""
    llm, domain = ctx.require_llm("decomposed")
    calls = Calls()
    request = rewrite_request("decomposed", fact, domain, ctx.config, purpose=PURPOSE, fields=SLOTS)
    (values,) = calls.ask(llm, [request], SLOTS)
    if values is not None and not any(values.values()):
        values = None  # four empty slots: nothing the model said can be searched
        calls.parse_failures += 1
        calls.records[-1]["parsed"] = False
    queries = {slot: search_query(fact, (values or {}).get(slot, ""), ctx.retriever) for slot in SLOTS}
    pool = fuse_rankings([q.ranking for q in queries.values()], ctx.config)
    rounds = [{"slot": slot, "reading": (values or {}).get(slot, ""), **q.to_dict()} for slot, q in queries.items()]
    return with_selector(fact, ctx, final_record(pool, calls, rounds=rounds))
