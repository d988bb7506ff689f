"""Direct retrieval: the raw serialized fact is the query (the paper's first baseline)."""

from __future__ import annotations

from fhs.data.evidence import direct_query
from fhs.data.facts import Fact
from fhs.method.context import MethodContext, with_selector


def direct(fact: Fact, ctx: MethodContext) -> dict:
    """Direct retrieval: the raw serialized fact is the query (0 LLM calls before the selector)."""
    query = direct_query(fact)
    ranking = ctx.retriever.search(query, fact.datatype)
    return with_selector(fact, ctx, {"queries": [query], "ranking": list(ranking.ids)})
