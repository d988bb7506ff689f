"""Retrieval speed, measured side by side with bm25s and rank-bm25 on the same queries.

``rank_bm25`` is the slow, readable reference: its ``BM25Okapi`` with the paper's idf is the
same formula as ours, so the two must agree on scores and top-200 lists. ``bm25s`` is the
peer a user would pick for speed (numba or numpy backend); its ``lucene`` scores are ours
over (k1 + 1), and its lists differ from ours only in how tied documents are ordered (ours
by document order, as the authors' code). The benchmark prints queries per second for our
BM25 alone, for the deployed search (BM25 + Eq. 6 over the type-filtered pool), for the numpy
scorer the deployed search replaced, and for the peers, with index build times and sizes.
"""

from __future__ import annotations

import functools
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from fhs.core.errors import InputError, warn
from fhs.core.text import tokenize
from fhs.data.evidence import direct_query
from fhs.retrieval.bm25 import BM25Index, Retriever, top_k_order


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


def bm25s_index(documents, backend: str, k1: float = 1.5, b: float = 0.75):
    """bm25s over the same token lists; ``method="lucene"`` has the paper's idf, and its scores are
    ours divided by (k1 + 1), so its lists are ours up to the order of tied documents."""
    import bm25s

    model = bm25s.BM25(k1=k1, b=b, method="lucene", backend=backend)
    model.index(documents, show_progress=False)
    return model


def bm25s_top_k(model, queries: list[list[str]], k: int):
    """bm25s's top k of every query, one thread (its own numba kernels where the backend is numba)."""
    if model.backend == "numba":
        _cache_bm25s_kernels()
    return model.retrieve(queries, k=k, n_threads=1, show_progress=False, return_as="tuple")


@functools.cache
def _cache_bm25s_kernels() -> None:
    """bm25s compiles its kernels in every process (seconds each bench), never caching them: cache the ones a
    one-thread search compiles, in the user's numba folder (fhs.retrieval.jit). Its parallel kernel wraps the
    serial one's Python function, whose cache file it would share: it is left uncached."""
    from bm25s.numba import retrieve_utils, selection
    from numba.core.dispatcher import Dispatcher

    from fhs.retrieval.jit import use_user_cache

    use_user_cache()
    parallel = retrieve_utils._retrieve_internal_jitted_parallel
    for module in (retrieve_utils, selection):
        for value in vars(module).values():
            if isinstance(value, Dispatcher) and value is not parallel:
                value.enable_caching()


def _sparse_bytes(*matrices) -> int:
    return sum(m.data.nbytes + m.indices.nbytes + m.indptr.nbytes for m in matrices)


def _ties_only(
    ours: np.ndarray, our_scores: np.ndarray, theirs: np.ndarray, their_scores: np.ndarray, scale: float
) -> bool:
    """Whether two top-k lists differ only in the order or the cut of tied documents (float32 ties)."""
    if len(ours) != len(theirs):
        return False
    if not np.allclose(our_scores, np.asarray(their_scores, dtype=np.float64) * scale, rtol=1e-5, atol=1e-6):
        return False
    boundary = our_scores[-1] if len(our_scores) else 0.0
    strict_ours = {d for d, s in zip(ours.tolist(), our_scores) if s > boundary * (1 + 1e-5)}
    return strict_ours <= set(np.asarray(theirs).tolist())


def _median_seconds(runs: dict[str, list[float]], name: str) -> float:
    return float(np.median(runs[name]))


def _paired_speedup(runs: dict[str, list[float]], ours: str, theirs: str) -> float:
    """The median over repetitions of their time over ours in the same repetition: a shared machine
    slows whole repetitions at a time, and a ratio within one cancels that."""
    return float(np.median(np.asarray(runs[theirs]) / np.asarray(runs[ours])))


def bench_retrieval(
    dataset: str,
    *,
    data: str | Path | None = None,
    limit: int | None = None,
    n_queries: int = 2000,
    n_reference: int = 50,
    repeats: int = 5,
) -> dict:
    """Our BM25 and deployed Eq. 6 search beside bm25s (numba, numpy) and rank-bm25, one process.

    Every scorer gets the same pre-tokenized queries (``fhs.core.text.tokenize`` of the direct
    queries, deduplicated) over the dataset's largest datatype index; the timed runs are
    interleaved ``repeats`` times and the medians reported. The deployed search is
    ``Retriever.search_tokens`` with the dataset's own retrieval setting (Eq. 6 over the
    type-filtered pool); ``qps_deployed_batched`` the same through ``search_tokens_many`` (an
    LLM-free run's path); ``qps_deployed_numpy`` is the numpy scorer it replaced, and every one
    of its lists must be the deployed search's.
    """
    from fhs.run.inputs import load_experiment

    for name, value in (("queries", n_queries), ("reference-queries", n_reference), ("repeats", repeats)):
        if value < 1:
            raise InputError(f"must be at least 1, got {value}", field=name, fix="time at least one query")

    experiment = load_experiment(dataset, data=data, limit=limit)
    taxonomy = experiment.taxonomy
    datatype = max(taxonomy.datatypes(), key=lambda t: sum(c.datatype == t for c in taxonomy))
    positions = [i for i, c in enumerate(taxonomy.concepts) if c.datatype == datatype]
    documents = [tokenize(taxonomy.concepts[i].index_text) for i in positions]
    facts = [f for f in experiment.facts if f.datatype == datatype] or experiment.facts
    texts = [direct_query(facts[i % len(facts)]) for i in range(n_queries)]
    queries = [sorted(set(tokenize(text))) for text in texts]
    # a list cannot be longer than the index it comes from (a small user taxonomy has fewer concepts than k)
    k = min(experiment.retriever.config.top_k, len(documents))
    if k < experiment.retriever.config.top_k:
        warn(
            f"the {datatype} index has {len(documents):,} documents, fewer than top_k "
            f"{experiment.retriever.config.top_k}: lists of {k} are timed and compared"
        )

    builds: dict[str, list[float]] = {}

    def timed_build(name, make):
        started = time.perf_counter()
        built = make()
        builds.setdefault(name, []).append(time.perf_counter() - started)
        return built

    ours = timed_build("ours", lambda: BM25Index(documents))
    numba_model = timed_build("bm25s", lambda: bm25s_index(documents, "numba"))
    numpy_model = bm25s_index(documents, "numpy")
    reference = timed_build("rank_bm25", lambda: reference_bm25(documents))
    full = experiment.retriever  # the deployed search: BM25 + Eq. 6 over the type-filtered pool
    assert isinstance(full, Retriever)  # load_experiment's default retriever
    timed_build("deployed", full.warm_up)
    part = full.partition_for(datatype)
    bm25s_top_k(numba_model, queries[:2], k)  # compile bm25s's kernels outside the timing
    token_sets = [set(q) for q in queries]
    ours.top_k(queries[0], k), full.search_tokens(token_sets[0], datatype)  # and ours (cached)
    full.search_tokens_many(token_sets[:2], [datatype] * 2)

    runs: dict[str, list[float]] = {}
    results: dict[str, Any] = {}  # each scorer's lists, in its own form

    def timed(name, work):
        started = time.perf_counter()
        results[name] = work()
        runs.setdefault(name, []).append(time.perf_counter() - started)

    ref_queries = queries[:n_reference]
    for _ in range(repeats):  # interleaved, so a noisy neighbour slows every scorer alike
        timed("bm25", lambda: [ours.top_k(q, k) for q in queries])
        timed("deployed", lambda: [full.search_tokens(q, datatype) for q in token_sets])
        timed("deployed_with_tokenizing", lambda: [full.search(t, datatype) for t in texts])
        timed("deployed_batched", lambda: full.search_tokens_many(token_sets, [datatype] * len(token_sets)))
        timed("deployed_batched_with_tokenizing", lambda: full.search_many(texts, [datatype] * len(texts)))
        timed("bm25s_numba", lambda: bm25s_top_k(numba_model, queries, k))
        timed("bm25s_numpy", lambda: bm25s_top_k(numpy_model, queries, k))
        timed("deployed_numpy", lambda: [full.search_numpy(t, datatype) for t in texts])
        timed("bm25_numpy", lambda: [top_k_order(ours.scores(q), k) for q in queries])
    timed("rank_bm25", lambda: [reference_top_k(reference, q, k) for q in ref_queries])

    qps = {name: len(ref_queries if name == "rank_bm25" else queries) / _median_seconds(runs, name) for name in runs}
    our_lists = results["bm25"]
    scale = 1.0 / (ours.k1 + 1.0)
    their = results["bm25s_numba"]
    bm25s_same = [np.array_equal(o, t) for (o, _), t in zip(our_lists, their.documents)]
    bm25s_ties = [
        same or _ties_only(o, s, t, ts, 1.0 / scale)
        for same, (o, s), t, ts in zip(bm25s_same, our_lists, their.documents, their.scores)
    ]
    deployed_same = [
        a == b == c for a, b, c in zip(results["deployed"], results["deployed_numpy"], results["deployed_batched"])
    ]
    rank_same = [list(our_lists[i][0]) == results["rank_bm25"][i] for i in range(len(ref_queries))]
    return {
        "dataset": dataset,
        "taxonomy": taxonomy.name,
        "index_datatype": datatype,
        "index_documents": len(documents),
        "queries": len(queries),
        "queries_rank_bm25": len(ref_queries),
        "repeats": repeats,
        "qps_deployed": round(qps["deployed"], 1),
        "qps_deployed_with_tokenizing": round(qps["deployed_with_tokenizing"], 1),
        "qps_deployed_batched": round(qps["deployed_batched"], 1),
        "qps_deployed_batched_with_tokenizing": round(qps["deployed_batched_with_tokenizing"], 1),
        "qps_deployed_numpy": round(qps["deployed_numpy"], 1),
        "qps_bm25": round(qps["bm25"], 1),
        "qps_bm25_numpy": round(qps["bm25_numpy"], 1),
        "qps_bm25s_numba": round(qps["bm25s_numba"], 1),
        "qps_bm25s_numpy": round(qps["bm25s_numpy"], 1),
        "qps_rank_bm25": round(qps["rank_bm25"], 2),
        "deployed_over_bm25s_numba": round(_paired_speedup(runs, "deployed", "bm25s_numba"), 2),
        "deployed_batched_over_bm25s_numba": round(_paired_speedup(runs, "deployed_batched", "bm25s_numba"), 2),
        "bm25_over_rank_bm25": round(qps["bm25"] / qps["rank_bm25"], 1),
        "build_seconds_ours": round(builds["ours"][0], 3),
        "build_seconds_bm25s": round(builds["bm25s"][0], 3),
        "build_seconds_rank_bm25": round(builds["rank_bm25"][0], 3),
        "build_seconds_deployed_all_datatypes": round(builds["deployed"][0], 3),
        "index_mb_ours_float64": round(_sparse_bytes(ours.weights) / 1e6, 2),
        "index_mb_deployed_with_labels": round(_sparse_bytes(part.index.weights, part.labels) / 1e6, 2),
        "index_mb_bm25s_float32": round(
            sum(numba_model.scores[key].nbytes for key in ("data", "indices", "indptr")) / 1e6, 2
        ),
        "top200_deployed_equal_numpy_scorer": sum(deployed_same) / len(deployed_same),
        "top200_bm25_equal_rank_bm25": sum(rank_same) / len(rank_same),
        "top200_bm25_equal_bm25s": sum(bm25s_same) / len(bm25s_same),
        "top200_bm25_equal_bm25s_up_to_ties": sum(bm25s_ties) / len(bm25s_ties),
        "retrieval_config": {
            "k1": ours.k1,
            "b": ours.b,
            "top_k": k,
            "pool_multiplier": full.config.pool_multiplier,
            "w_cov": full.config.w_cov,
        },
    }


def format_retrieval_bench(result: dict) -> str:
    """The queries/s of :func:`bench_retrieval` side by side, for a reader (the JSON keeps every figure)."""
    rows = [
        ("ours, deployed search (BM25 + Eq. 6 coverage), a call a query", "qps_deployed"),
        ("ours, deployed search, batched (search_many, an LLM-free run's path)", "qps_deployed_batched"),
        ("ours, BM25 alone", "qps_bm25"),
        ("bm25s numba, BM25 alone, 1 thread", "qps_bm25s_numba"),
        ("bm25s numpy, BM25 alone", "qps_bm25s_numpy"),
        ("rank-bm25, BM25 alone", "qps_rank_bm25"),
    ]
    same = (
        "yes" if result[key] == 1.0 else f"{result[key]:.1%}"
        for key in (
            "top200_deployed_equal_numpy_scorer",
            "top200_bm25_equal_rank_bm25",
            "top200_bm25_equal_bm25s_up_to_ties",
        )
    )
    lines = [
        f"queries/s, {result['taxonomy']} ({result['index_datatype']} index, {result['index_documents']:,} "
        f"documents; {result['queries']:,} queries, median of {result['repeats']}):"
    ]
    lines += [f"  {title:<72} {result[key]:>10,.1f}" for title, key in rows]
    lines.append(
        f"deployed / bm25s numba, queries/s, median of the repetitions' ratios: "
        f"{result['deployed_over_bm25s_numba']:.2f} (batched "
        f"{result['deployed_batched_over_bm25s_numba']:.2f}); top-200 lists identical: deployed and the "
        "numpy scorer {}, our BM25 and rank-bm25 {}, ours and bm25s up to float32 ties {}".format(*same)
    )
    return "\n".join(lines)
