"""BM25 with the paper's label-coverage term (Eq. 6), one index per datatype.

(Implementation in progress: the public names below are the contract.)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetrievalConfig:
    k1: float = 1.5
    b: float = 0.75
    top_k: int = 200
    w_cov: float = 1.0
    # 0 = rescore the whole (datatype) index with Eq. 6; n > 0 = rescore the BM25 top_k * n
    pool_multiplier: int = 0
    type_filter: bool = True


@dataclass(frozen=True)
class Ranking:
    """An ordered candidate list for one query: concept ids, best first, with scores."""

    ids: tuple[str, ...]
    scores: tuple[float, ...]

    def rank_of(self, concept_ids) -> int | None:
        """1-based rank of the first of ``concept_ids`` in the list, or None."""
        wanted = set(concept_ids)
        for rank, concept_id in enumerate(self.ids, start=1):
            if concept_id in wanted:
                return rank
        return None
