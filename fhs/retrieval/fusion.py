"""Reciprocal rank fusion of the per-hypothesis rankings (Eq. 4) and range normalisation.

Summed RRF (Cormack et al., 2009) as FHS deploys it:

    S(c) = sum over rankings r that contain c of 1 / (kappa + rank_r(c)),   kappa = 60

so a candidate found by several hypotheses accrues a term from each. The
``mean`` variant divides by the number of rankings that contain c (the
ablation row "mean-RRF instead of sum"). The pool is truncated to K -- ties
broken by the best single-list rank, then by id -- and range-normalised,

    S~(c) = (S(c) - min S) / (max S - min S),   0 for all when max = min,

which keeps beta of Eq. 3 on the same scale whatever the number of rankings.
The authors' hybrid retriever (Table 17) fuses its two lists with the same rule
but breaks ties by concept id alone (``ties="id"``); both are this one routine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fhs.retrieval.bm25 import Ranking

FUSIONS = ("sum", "mean")  # summed RRF (Eq. 4) or its mean over the rankings that contain a candidate
NORMALIZE_OVER = ("union", "kept")  # min/max over the whole pool U (the paper) or the K kept (the authors' code)
# equal fused scores: by the best single-list rank, then id (the authors' fusion); by id (their hybrid)
TIE_BREAKS = ("best-rank", "id")


@dataclass(frozen=True)
class FusedPool:
    """The consolidated candidate list, best first.

    ``scores`` are the raw fused scores S, ``normalized`` the S~ used by
    Eq. 3 (equal to ``scores`` when normalisation is off), ``contributions``
    for each candidate the ``(ranking index, 1-based rank)`` pairs it came from.
    ``union_size`` is |U| before truncation (search coverage is measured on U).
    """

    ids: tuple[str, ...]
    scores: tuple[float, ...]
    normalized: tuple[float, ...]
    contributions: tuple[tuple[tuple[int, int], ...], ...]
    union_size: int = 0

    def __len__(self) -> int:
        return len(self.ids)

    def normalized_by_id(self) -> dict[str, float]:
        return dict(zip(self.ids, self.normalized))

    def best_rank(self, position: int) -> int:
        return min(rank for _, rank in self.contributions[position])

    def as_ranking(self) -> Ranking:
        """The fused order as a Ranking (scores = S~)."""
        return Ranking(ids=self.ids, scores=self.normalized)

    def to_dict(self, limit: int | None = None) -> dict[str, Any]:
        end = len(self.ids) if limit is None else limit
        return {
            "ids": list(self.ids[:end]),
            "scores": list(self.scores[:end]),
            "normalized": list(self.normalized[:end]),
            "contributions": [[list(pair) for pair in c] for c in self.contributions[:end]],
            "union_size": self.union_size,
        }


def rrf_terms(rankings: Sequence[Ranking], kappa: int = 60) -> dict[str, list[tuple[int, int]]]:
    """For every candidate, the (ranking index, rank) pairs of the rankings that contain it."""
    terms: dict[str, list[tuple[int, int]]] = {}
    for index, ranking in enumerate(rankings):
        seen: set[str] = set()
        for rank, concept_id in enumerate(ranking.ids, start=1):
            if concept_id in seen:  # a ranking lists a concept once; keep its best rank
                continue
            seen.add(concept_id)
            terms.setdefault(concept_id, []).append((index, rank))
    return terms


def range_normalize(scores: Sequence[float]) -> list[float]:
    """(s - min) / (max - min); all zeros when every score ties (or the list is empty)."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high == low:
        return [0.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def fuse(
    rankings: Sequence[Ranking],
    *,
    kappa: int = 60,
    k: int | None = 200,
    method: str = "sum",
    normalize: bool = True,
    normalize_over: str = "union",
    ties: str = "best-rank",
) -> FusedPool:
    """Fuse rankings into the top-``k`` pool (see the module docstring for the formulas).

    ``normalize_over="union"`` takes min/max over every fused candidate (the
    paper's "over the pool U"); ``"kept"`` over the ``k`` kept (the authors' code).
    ``k`` None keeps every candidate; ``ties`` is one of ``TIE_BREAKS``.
    """
    for name, value, choices in (
        ("fusion method", method, FUSIONS),
        ("normalize_over", normalize_over, NORMALIZE_OVER),
        ("ties", ties, TIE_BREAKS),
    ):
        if value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")
    terms = rrf_terms(rankings, kappa)
    fused: list[tuple[float, int, str]] = []
    for concept_id, pairs in terms.items():
        total = sum(1.0 / (kappa + rank) for _, rank in pairs)
        score = total / len(pairs) if method == "mean" else total
        fused.append((score, min(rank for _, rank in pairs) if ties == "best-rank" else 0, concept_id))
    fused.sort(key=lambda item: (-item[0], item[1], item[2]))
    kept = fused if k is None else fused[:k]
    raw = [score for score, _, _ in kept]
    if not normalize:
        normalized = list(raw)
    elif normalize_over == "kept" or not fused:
        normalized = range_normalize(raw)
    else:
        low, high = fused[-1][0], fused[0][0]  # fused is sorted by score
        normalized = [0.0] * len(raw) if high == low else [(s - low) / (high - low) for s in raw]
    return FusedPool(
        ids=tuple(concept_id for _, _, concept_id in kept),
        scores=tuple(raw),
        normalized=tuple(normalized),
        contributions=tuple(tuple(terms[concept_id]) for _, _, concept_id in kept),
        union_size=len(fused),
    )
