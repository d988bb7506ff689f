"""``fhs bench retrieval --retriever dense|hybrid``: the dense index measured beside BM25 in one run.

``fhs/bench/retrieval.py`` compares our BM25 with rank-bm25; this one prints, for BM25 and for the chosen
retriever: index build time,
query latency (median and p95 over the dataset's direct queries, datatype
filter on), resident memory added, and for dense the embedding throughput of
a cold build (concepts/s over the whole taxonomy, in a throw-away cache so
the user's cache is neither read nor touched) and the time to reload the
cached matrix.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from fhs.data.evidence import direct_query
from fhs.data.taxonomy import Taxonomy
from fhs.retrieval.bm25 import Retriever
from fhs.retrieval.dense import DenseRetriever, load_or_build_embeddings
from fhs.retrieval.encoders import DEFAULT_MODEL, THREADS_ENV, make_encoder
from fhs.retrieval.hybrid import HybridRetriever
from fhs.run.cpu_info import cpu_record
from fhs.run.inputs import load_experiment


def _rss_mb() -> float:
    """Current resident set size (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as handle:
            pages = int(handle.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


def _latency(retriever, facts, queries) -> dict:
    times = []
    for fact, query in zip(facts, queries):
        started = time.perf_counter()
        retriever.search(query, fact.datatype)
        times.append(time.perf_counter() - started)
    ordered = sorted(times)
    return {
        "queries": len(times),
        "median_ms": round(1000 * statistics.median(ordered), 2),
        "p95_ms": round(1000 * ordered[int(0.95 * (len(ordered) - 1))], 2),
        "qps": round(len(times) / sum(times), 1),
    }


def bench_dense(
    dataset: str,
    *,
    retriever: str = "dense",
    model: str | None = None,
    data: str | Path | None = None,
    limit: int | None = None,
    n_queries: int = 200,
    embed_limit: int | None = None,
    cache_root: Path | None = None,
) -> dict:
    """BM25 and ``retriever`` on one dataset's direct queries, in one process.

    ``embed_limit`` times the cold build on the first N concepts only (a quick look); by
    default the whole taxonomy is embedded, which is the first-build cost a user pays.
    With ``embed_limit`` the latency part uses the user's cache (``cache_root``, default
    ``$FHS_CACHE``), building it there with a progress bar if it is missing.
    """
    experiment = load_experiment(dataset, data=data, limit=limit, progress=False)
    taxonomy, facts = experiment.taxonomy, experiment.facts[:n_queries]
    queries = [direct_query(fact) for fact in facts]
    config = experiment.retriever.config
    result: dict = {
        "dataset": dataset,
        "taxonomy": taxonomy.name,
        "concepts": len(taxonomy),
        "retriever": retriever,
        "model": model or DEFAULT_MODEL,
    }

    result["threads"] = int(os.environ.get(THREADS_ENV, "0")) or os.cpu_count() or 1  # the encoder's default
    result["cpu"] = cpu_record()  # concepts/s depend on the kernels the CPU offers (python -m dev.bench_cpu)
    # BM25 (the deployed retriever) first, from scratch.
    rss = _rss_mb()
    started = time.perf_counter()
    bm25 = Retriever(taxonomy, config).warm_up()
    result["bm25"] = {
        "index_build_s": round(time.perf_counter() - started, 2),
        "memory_mb": round(_rss_mb() - rss, 1),
        **_latency(bm25, facts, queries),
    }

    # Dense: model load, cold embedding of the taxonomy (throughput), cached reload.
    rss = _rss_mb()
    started = time.perf_counter()
    encoder = make_encoder(model or DEFAULT_MODEL)
    load_s = time.perf_counter() - started
    sample = taxonomy if embed_limit is None else Taxonomy.from_concepts(taxonomy.name, taxonomy.concepts[:embed_limit])
    with tempfile.TemporaryDirectory(prefix="fhs-bench-dense-") as scratch:
        _, info = load_or_build_embeddings(sample, encoder, cache_root=Path(scratch), progress=True)
        cold = info["seconds"]
        started = time.perf_counter()
        load_or_build_embeddings(sample, encoder, cache_root=Path(scratch), progress=False)
        reload_s = time.perf_counter() - started
        dense = DenseRetriever(
            taxonomy,
            replace(config, w_cov=0.0),
            encoder=encoder,
            progress=True,
            cache_root=Path(scratch) if embed_limit is None else cache_root,
        )
        started = time.perf_counter()
        dense.warm_up()  # the whole taxonomy: a cache hit unless embed_limit cut the sample
        build_s = time.perf_counter() - started
        if embed_limit is None:
            build_s = cold + build_s  # first build = embedding + the (cheap) partitioning
        result["index_cache"] = dense.build_info.get("cache")
        chosen: DenseRetriever | HybridRetriever = dense
        if retriever == "hybrid":
            chosen = HybridRetriever(taxonomy, replace(config, w_cov=0.0), dense=dense, bm25=None)
            chosen.bm25.warm_up()
        dense_latency = _latency(chosen, facts, queries)  # includes embedding each query (one at a time)
        result[retriever] = {
            "model_load_s": round(load_s, 2),
            "embedded_concepts": len(sample),
            "embedding_s": round(cold, 2),
            "concepts_per_s": round(len(sample) / cold, 1),
            "index_build_s": round(build_s, 2),
            "cached_reload_s": round(reload_s, 3),
            "embeddings_mb": round(dense.matrix.nbytes / 2**20, 1),
            "memory_mb": round(_rss_mb() - rss, 1),
            **dense_latency,
        }
    result["latency_ratio"] = round(result[retriever]["median_ms"] / max(result["bm25"]["median_ms"], 1e-9), 1)
    return result
