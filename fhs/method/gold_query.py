"""The gold-query probe: how far the index alone gets once the query names the target."""

from __future__ import annotations

import re
from collections.abc import Sequence

from fhs.data.evidence import prefixed
from fhs.data.facts import Fact, gold_match_of
from fhs.data.taxonomy import Concept
from fhs.method.context import MethodContext

_WORD = re.compile(r"\S+")
_EDGE = "()[]{}.,;:!?\"'"


def shared_words(texts: Sequence[str]) -> str:
    """The words every text holds, in the order of the first text (case and edge punctuation ignored)."""
    if not texts:
        return ""
    later = [{w.strip(_EDGE).lower() for w in _WORD.findall(text)} for text in texts[1:]]
    kept = [w for w in _WORD.findall(texts[0]) if all(w.strip(_EDGE).lower() in words for words in later)]
    return " ".join(kept)


def prefix_text(concepts: Sequence[Concept]) -> str:
    """The oracle query text for a prefix gold: what all the codes under the prefix say in common.

    Labels and definitions are reduced separately to their shared words, so an
    ICD-10-PCS ``0DT6`` (every "Resection of Stomach" code) keeps the section,
    body system, root operation and body part and drops the approach, device
    and qualifier the codes below it differ in.
    """
    label = shared_words([c.label for c in concepts])
    definition = shared_words([c.definition for c in concepts])
    return " ".join(part for part in (label, definition) if part)


def oracle(fact: Fact, ctx: MethodContext) -> dict:
    """The gold-query probe: the gold concept's own label and definition, prefixed.

    It measures what the index can do once the query expresses the target
    (the paper's Appendix E.1); a fact whose gold is not in the taxonomy gets
    an empty ranking and counts as a miss. With ``options["oracle_with_id"]``
    the concept's id leads the text, as in the authors' CodiEsp probe.

    A prefix gold (``metadata["gold_match"] == "prefix"``, see
    ``fhs.data.facts.GOLD_MATCHES``) that is not itself a concept has no text to
    quote; its query is ``prefix_text`` of the concepts under it (the prefix
    leads it when ``oracle_with_id`` is set), so the probe still states exactly
    what the gold says and nothing more.
    """
    gold = next((ctx.taxonomy[g] for g in fact.gold if g in ctx.taxonomy), None)
    if gold is not None:
        text = gold.index_text if ctx.options.get("oracle_with_id") else f"{gold.label} {gold.definition}"
    elif gold_match_of(fact) == "prefix":
        node = next(((g, ctx.taxonomy.under(g)) for g in fact.gold if ctx.taxonomy.under(g)), None)
        if node is None:
            return {"queries": [], "ranking": [], "note": "no taxonomy concept under the gold prefix"}
        text = prefix_text(node[1])
        if ctx.options.get("oracle_with_id"):
            text = f"{node[0]}. {text}"
    else:
        return {"queries": [], "ranking": [], "note": "gold concept not in the taxonomy"}
    query = prefixed(fact, text)
    ranking = ctx.retriever.search(query, fact.datatype)
    return {"queries": [query], "ranking": list(ranking.ids)}
