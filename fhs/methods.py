"""Methods by name. Each is a function ``(fact, context) -> stage record``.

A method returns a plain dict describing what it did for one fact; it must
hold ``ranking`` (the final ordered concept ids, at most K). The runner adds
the fact's id, context, modality, gold ids and gold rank. Methods never read
``fact.gold`` except ``oracle``, whose whole point is the gold query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fhs.errors import InputError
from fhs.evidence import direct_query, prefixed
from fhs.facts import Fact
from fhs.llm import LLM, CallStats
from fhs.retrieval import Retriever
from fhs.taxonomy import Taxonomy


@dataclass
class MethodContext:
    """What a method may use: the taxonomy, a retriever, and (for LLM methods) a model."""

    taxonomy: Taxonomy
    retriever: Retriever
    llm: LLM | None = None
    options: dict[str, Any] = field(default_factory=dict)
    stats: CallStats = field(default_factory=CallStats)


Method = Callable[[Fact, MethodContext], dict]


def direct(fact: Fact, ctx: MethodContext) -> dict:
    """Direct retrieval: the raw serialized fact is the query (0 LLM calls)."""
    query = direct_query(fact)
    ranking = ctx.retriever.search(query, fact.datatype)
    return {"queries": [query], "ranking": list(ranking.ids)}


def oracle(fact: Fact, ctx: MethodContext) -> dict:
    """The gold-query probe: the gold concept's own label and definition, prefixed.

    It measures what the index can do once the query expresses the target
    (the paper's Appendix E.1); a fact whose gold is not in the taxonomy gets
    an empty ranking and counts as a miss.
    """
    gold = next((ctx.taxonomy[g] for g in fact.gold if g in ctx.taxonomy), None)
    if gold is None:
        return {"queries": [], "ranking": [], "note": "gold concept not in the taxonomy"}
    query = prefixed(fact, f"{gold.label} {gold.definition}")
    ranking = ctx.retriever.search(query, fact.datatype)
    return {"queries": [query], "ranking": list(ranking.ids)}


METHODS: dict[str, Method] = {
    "direct": direct,
    "oracle": oracle,
}

LLM_METHODS: set[str] = set()


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except KeyError:
        raise InputError(f"unknown method {name!r}", field="method",
                         fix=f"choose one of {', '.join(METHODS)}") from None
