"""The plan's stand-in for the dense and hybrid retrievers: BM25's list, reordered per kind."""

from __future__ import annotations

import hashlib
from typing import Any

from fhs.retrieval.bm25 import Ranking


class StandIn:
    """A stand-in for the dense and hybrid retrievers: BM25's list, reordered per kind.

    The plan does not embed 90,000 concepts; what it needs from another retriever is
    that its windows and candidate lists differ from BM25's while sharing some
    candidates, so the verifier and the selector are asked again where a real swap
    would ask them. Each candidate moves by a pseudo-random amount of up to
    ``spread`` places (from a hash of the kind and its id). Figures of those runs are
    estimates.
    """

    def __init__(self, base: Any, kind: str, spread: int = 30) -> None:
        self.base, self.kind, self.spread = base, kind, spread
        self.taxonomy, self.config = base.taxonomy, base.config

    def search(self, query: str, datatype: str | None = None, top_k: int | None = None) -> Ranking:
        ranking = self.base.search(query, datatype, top_k)

        def jitter(concept_id: str) -> int:
            digest = hashlib.sha256(f"{self.kind}:{concept_id}".encode()).digest()
            return digest[0] % self.spread

        order = sorted(range(len(ranking.ids)), key=lambda i: (i + jitter(ranking.ids[i]), i))
        return Ranking(tuple(ranking.ids[i] for i in order), ranking.scores)
