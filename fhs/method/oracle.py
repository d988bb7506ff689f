"""The gold-query probe: how far the index alone gets once the query names the target."""

from __future__ import annotations

from fhs.data.evidence import prefixed
from fhs.data.facts import Fact
from fhs.method.context import MethodContext


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
