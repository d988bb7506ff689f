"""Direct retrieval: the raw serialized fact is the query (the paper's first baseline).

``direct-located`` is an addition (book/deviations.md): the same single search with
the value's own location as the query, its row and column headers or its sentence
(``fhs.data.evidence.located_query``). It is off by default because the paper
serialises the whole context (Section 3.3, Table 1's raw row).
"""

from __future__ import annotations

from fhs.data.evidence import direct_query, located_query, location
from fhs.data.facts import Fact
from fhs.method.context import MethodContext, with_selector


def direct(fact: Fact, ctx: MethodContext) -> dict:
    """Direct retrieval: the raw serialized fact is the query (0 LLM calls before the selector)."""
    query = direct_query(fact)
    ranking = ctx.retriever.search(query, fact.datatype)
    return with_selector(fact, ctx, {"queries": [query], "ranking": list(ranking.ids)})


def direct_located(fact: Fact, ctx: MethodContext) -> dict:
    """Value, datatype and the value's headers or sentence as the query (0 LLM calls before the selector).

    ``located`` says whether the fact had a location; one without issues the direct query.
    """
    query = located_query(fact)
    ranking = ctx.retriever.search(query, fact.datatype)
    return with_selector(fact, ctx, {"queries": [query], "ranking": list(ranking.ids), "located": bool(location(fact))})
