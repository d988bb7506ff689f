"""Hybrid first-stage retrieval: BM25 and dense fused by reciprocal rank (Table 17's third row).

The rule (the fusion of Eq. 4 applied to two retrievers, as the authors'
hybrid does): the BM25 top-200 with label coverage off and the dense top-200,

    S(c) = sum over the two lists that contain c of 1 / (60 + rank(c)),

ties broken by concept id, range-normalised over the fused list (``fuse`` with
``ties="id"``, every candidate kept); the optional coverage term (``w_cov > 0``)
is added after fusion.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from fhs.data.taxonomy import Taxonomy
from fhs.retrieval.bm25 import Ranking, RetrievalConfig, Retriever
from fhs.retrieval.dense import DenseRetriever, with_coverage
from fhs.retrieval.fusion import fuse

RRF_KAPPA = 60
HYBRID_DEPTH = 200


class HybridRetriever:
    """RRF (kappa 60) of the BM25 top-200 without coverage and the dense top-200."""

    kind = "hybrid"

    def __init__(
        self,
        taxonomy: Taxonomy,
        config: RetrievalConfig = RetrievalConfig(w_cov=0.0),
        *,
        dense: DenseRetriever | None = None,
        bm25: Retriever | None = None,
        kappa: int = RRF_KAPPA,
        depth: int = HYBRID_DEPTH,
        **dense_options,
    ) -> None:
        self.taxonomy = taxonomy
        self.config = config
        self.kappa, self.depth = kappa, depth
        plain = replace(config, w_cov=0.0)
        self.bm25 = bm25 or Retriever(taxonomy, plain)
        self.dense = dense or DenseRetriever(taxonomy, plain, **dense_options)
        if self.bm25.config.w_cov > 0 or self.dense.config.w_cov > 0:
            raise ValueError("hybrid fuses the lists without coverage; set w_cov on the hybrid config")

    @property
    def fork_safe(self) -> bool:
        """Whether a forked copy searches alike: when both of its retrievers do."""
        return getattr(self.bm25, "fork_safe", False) and getattr(self.dense, "fork_safe", False)

    def warm_up(self) -> HybridRetriever:
        self.bm25.warm_up()
        self.dense.warm_up()
        return self

    def partition_for(self, datatype: str | None):
        return self.dense.partition_for(datatype)

    def search(
        self, query: str, datatype: str | None = None, top_k: int | None = None, *, exact: bool = False
    ) -> Ranking:
        """``exact``: the dense list ranked by CPU-independent vectors (``fhs.retrieval.exact_dense``)."""
        k = self.config.top_k if top_k is None else top_k
        lists = [
            self.bm25.search(query, datatype, self.depth),
            self.dense.search(query, datatype, self.depth, exact=exact),
        ]
        fused = fuse(lists, kappa=self.kappa, k=None, ties="id").as_ranking()
        if self.config.w_cov <= 0:
            return Ranking(tuple(fused.ids[:k]), tuple(fused.scores[:k]))
        part = self.dense.partition_for(datatype)
        row_of = {concept_id: row for row, concept_id in enumerate(part.ids)}
        pool = np.asarray([row_of[c] for c in fused.ids], dtype=np.int64)
        return with_coverage(self.bm25, self.config.w_cov, datatype, query, pool, np.asarray(fused.scores), part.ids, k)
