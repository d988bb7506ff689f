"""Retrieval speed, measured side by side with rank-bm25 on the same queries.

``rank_bm25`` is the slow, readable reference: its ``BM25Okapi`` with the
paper's idf is the same formula as ours, so the two must agree on scores and
on top-200 lists; the benchmark prints our queries per second, theirs, the
ratio, and the share of queries whose top-200 lists agree.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from fhs.core.errors import InputError
from fhs.core.text import tokenize
from fhs.data.evidence import direct_query
from fhs.retrieval.bm25 import BM25Index, top_k_order


def reference_bm25(documents, k1: float = 1.5, b: float = 0.75):
    """rank_bm25's BM25Okapi with the paper's idf, ln(1 + (N - df + 0.5)/(df + 0.5))."""
    from rank_bm25 import BM25Okapi

    class PaperIdfBM25(BM25Okapi):
        def _calc_idf(self, nd):
            for word, freq in nd.items():
                self.idf[word] = math.log1p((self.corpus_size - freq + 0.5) / (freq + 0.5))

    return PaperIdfBM25(documents, k1=k1, b=b)


def reference_top_k(model, query_tokens, k: int) -> list[int]:
    """Top-k document numbers from the reference scorer, ties broken by document order."""
    scores = np.asarray(model.get_scores(sorted(set(query_tokens))))
    return list(top_k_order(scores, k))


def bench_retrieval(dataset: str, *, data: str | Path | None = None, limit: int | None = None,
                    n_queries: int = 2000, n_reference: int = 50) -> dict:
    """Time our BM25 and rank-bm25 on one dataset's direct queries over its largest datatype index."""
    from fhs.run.inputs import load_experiment

    for name, value in (("queries", n_queries), ("reference-queries", n_reference)):
        if value < 1:
            raise InputError(f"must be at least 1, got {value}", field=name, fix="time at least one query")

    experiment = load_experiment(dataset, data=data, limit=limit)
    taxonomy = experiment.taxonomy
    datatype = max(taxonomy.datatypes(), key=lambda t: sum(c.datatype == t for c in taxonomy))
    positions = [i for i, c in enumerate(taxonomy.concepts) if c.datatype == datatype]
    documents = [tokenize(taxonomy.concepts[i].index_text) for i in positions]
    facts = [f for f in experiment.facts if f.datatype == datatype] or experiment.facts
    queries = [tokenize(direct_query(f)) for f in facts]
    k = experiment.retriever.config.top_k

    started = time.perf_counter()
    ours = BM25Index(documents)
    build_ours = time.perf_counter() - started
    started = time.perf_counter()
    reference = reference_bm25(documents)
    build_reference = time.perf_counter() - started

    timed = [queries[i % len(queries)] for i in range(n_queries)]
    started = time.perf_counter()
    our_lists = [top_k_order(ours.scores(set(q)), k) for q in timed]
    our_seconds = time.perf_counter() - started

    ref_queries = queries[:n_reference]
    started = time.perf_counter()
    ref_lists = [reference_top_k(reference, q, k) for q in ref_queries]
    ref_seconds = time.perf_counter() - started
    agree = [list(our_lists[i]) == ref_lists[i] for i in range(len(ref_queries))]

    full = experiment.retriever  # the deployed search: BM25 + Eq. 6
    started = time.perf_counter()
    full.warm_up()  # tokenize and index every datatype partition of the taxonomy
    build_full = time.perf_counter() - started
    started = time.perf_counter()
    for fact in facts[: min(len(facts), 500)]:
        full.search(direct_query(fact), fact.datatype)
    full_seconds = time.perf_counter() - started

    ours_qps = n_queries / our_seconds
    ref_qps = len(ref_queries) / ref_seconds
    return {
        "dataset": dataset,
        "taxonomy": taxonomy.name,
        "index_datatype": datatype,
        "index_documents": len(documents),
        "index_build_seconds": round(build_full, 3),
        "build_seconds_ours": round(build_ours, 3),
        "build_seconds_rank_bm25": round(build_reference, 3),
        "queries_ours": n_queries,
        "queries_rank_bm25": len(ref_queries),
        "qps_ours": round(ours_qps, 1),
        "qps_rank_bm25": round(ref_qps, 2),
        "speedup": round(ours_qps / ref_qps, 1),
        "top200_agreement": sum(agree) / len(agree) if agree else None,
        "qps_with_coverage": round(min(len(facts), 500) / full_seconds, 1),
        "retrieval_config": {"k1": ours.k1, "b": ours.b, "top_k": k,
                             "pool_multiplier": experiment.retriever.config.pool_multiplier,
                             "w_cov": experiment.retriever.config.w_cov},
    }
