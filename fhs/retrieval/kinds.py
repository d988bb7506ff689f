"""The three first-stage retrievers by name, and what a run records about the one it used.

``bm25`` is the paper's deployed retriever; ``dense`` and ``hybrid`` are the
swap of Table 17. All three answer ``search(query, datatype, top_k)`` with a
``Ranking`` and carry a ``RetrievalConfig``, which is all a method uses.
"""

from __future__ import annotations

from typing import Protocol

from fhs.core.errors import choose
from fhs.data.taxonomy import Taxonomy
from fhs.retrieval.bm25 import Ranking, RetrievalConfig, Retriever
from fhs.retrieval.dense import DenseRetriever
from fhs.retrieval.encoders import MODELS
from fhs.retrieval.hybrid import HybridRetriever

DEFAULT_RETRIEVER = "bm25"


class Searcher(Protocol):
    """What a method needs from a retriever."""

    taxonomy: Taxonomy
    config: RetrievalConfig

    def search(self, query: str, datatype: str | None = None, top_k: int | None = None) -> Ranking: ...


RETRIEVERS = {
    "bm25": "BM25 + label coverage (Eq. 6), the paper's deployed retriever",
    "dense": "exact cosine over all-MiniLM-L6-v2 embeddings (fhs[dense])",
    "hybrid": "RRF of the BM25 and dense top-200 (fhs[dense])",
}


def make_retriever(kind: str, taxonomy: Taxonomy, config: RetrievalConfig, **options):
    """``bm25`` (the deployed default), ``dense`` or ``hybrid`` over one taxonomy."""
    choose(RETRIEVERS, kind, "retriever")
    if kind == "bm25":
        return Retriever(taxonomy, config, **options)
    if kind == "dense":
        return DenseRetriever(taxonomy, config, **options)
    return HybridRetriever(taxonomy, config, **options)


def retriever_kind(retriever: Searcher) -> str:
    """``bm25``, ``dense`` or ``hybrid`` (an exact view reports its retriever's kind)."""
    return getattr(retriever, "kind", DEFAULT_RETRIEVER)


def retriever_inputs(retriever: Searcher) -> dict[str, str]:
    """The embedding model's identity for a run's input stamp (empty for BM25, which reads only the taxonomy)."""
    exact = getattr(retriever, "exact", False)
    retriever = getattr(retriever, "inner", retriever)  # an ExactSearch view
    dense = retriever if isinstance(retriever, DenseRetriever) else getattr(retriever, "dense", None)
    if dense is None:
        return {}
    spec = MODELS[dense.model]
    return {
        "model": spec.name,
        "weights_sha256": spec.weights.sha256,
        "tokenizer_sha256": spec.tokenizer.sha256,
        "max_length": str(spec.max_length),
        **({"document_max_length": str(spec.document_max_length)} if spec.document_max_length else {}),
        **({"ranking": "exact vectors (fhs.retrieval.exact_dense)"} if exact else {}),
    }
