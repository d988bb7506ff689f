"""Dense first-stage retrieval: exact cosine over cached concept embeddings (Table 17's swap).

Every concept's ``index_text`` (``<id>. <label>. <definition>``, the text BM25
indexes) is embedded once per taxonomy and model; a query is embedded bare
(MiniLM has no query instruction). The score is the exact cosine -- one
matrix-vector product of unit vectors in numpy; no approximate index, which at
17k-73k concepts would save a few milliseconds against the query's own
embedding and would not compose with the datatype filter. The datatype filter
uses the same partitions as BM25. Scores are range-normalised over the
returned list. Label coverage (Eq. 6) is off by default and, when
``w_cov > 0``, added to the range-normalised cosine over the pool (the
"+cov" variant).

Concept embeddings are cached as ``.npy`` under ``cache_dir("dense")``, keyed
by the taxonomy, the model key (name, weights hash, window) and a hash of the
concept texts; the first build shows a progress bar.
"""

from __future__ import annotations

import hashlib
import io
import multiprocessing
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from fhs.core.files import atomic_write, cache_dir
from fhs.core.text import tokenize
from fhs.data.taxonomy import Taxonomy
from fhs.retrieval.bm25 import Ranking, RetrievalConfig, Retriever, top_k_order
from fhs.retrieval.encoders import DEFAULT_MODEL, Encoder, make_encoder, make_exact_encoder

if TYPE_CHECKING:  # imported when first used: an exact search is rare
    from fhs.retrieval.exact_dense import ExactVectors


def concept_texts(taxonomy: Taxonomy) -> list[str]:
    """What is embedded for each concept: the BM25 document text, ``<id>. <label>. <definition>``."""
    return [concept.index_text for concept in taxonomy.concepts]


def texts_hash(texts: Sequence[str]) -> str:
    digest = hashlib.sha256()
    for text in texts:
        digest.update(text.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()


def embedding_cache_path(root: Path, taxonomy_name: str, model_key: str, text_hash: str) -> Path:
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in taxonomy_name)
    return root / "dense" / f"{safe}--{model_key}--{text_hash[:16]}.npy"


def save_npy_atomic(path: Path, array: np.ndarray) -> None:
    """``np.save`` through ``atomic_write``: readers never see half a matrix."""
    buffer = io.BytesIO()
    np.save(buffer, array)
    with atomic_write(path, "wb") as handle:
        handle.write(buffer.getvalue())


CHECKPOINT_EVERY = 4096  # concepts embedded between two saves of a partial build
PROCESSES_ENV = "FHS_DENSE_PROCESSES"  # processes that embed a build's chunks (default: the encoder's threads)
SCORES_KEPT = 8  # queries whose cosines a DenseRetriever keeps (a fact's dense and hybrid searches)


def build_processes(encoder: Encoder, chunks: int) -> int:
    """How many processes embed a build: one per core the encoder would use, at most one per chunk.

    Two one-thread processes embedded 1.19x as fast as one two-thread session on an AVX2-only
    Zen 3 EPYC, 1.09x on an AVX-512 Xeon and 1.02x there under AVX2 kernels (``python -m dev.bench_cpu``,
    rows ``p2``): ONNX Runtime's threads wait on each other at every operator. Where fork is
    missing, or the encoder cannot make a one-thread copy of itself (``single_threaded``),
    the build stays in this process.
    """
    if not hasattr(encoder, "single_threaded") or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    wanted = int(os.environ.get(PROCESSES_ENV, "0")) or int(getattr(encoder, "threads", 1))
    return max(1, min(wanted, chunks))


_CHILD_ENCODER: list = []  # a forked embedding process's own one-thread encoder


class _Forkable(Encoder, Protocol):
    """An encoder that can make a one-thread copy of itself for a forked process (``build_processes``)."""

    def single_threaded(self) -> Encoder: ...


def _start_embedding_child(encoder: _Forkable) -> None:
    _LEFT_BEHIND.append(encoder)  # the parent's session: its threads stayed behind, so never freed here
    _CHILD_ENCODER[:] = [encoder.single_threaded()]


def _embed_in_child(texts: list[str], batch_size: int) -> np.ndarray:
    return _CHILD_ENCODER[0].encode(texts, batch_size=batch_size, documents=True)


def embedded_chunks(
    encoder: Encoder,
    chunks: Sequence[list[str]],
    *,
    batch_size: int = 32,
    processes: int = 1,
    progress: Callable[[int], object] | None = None,
) -> Iterator[np.ndarray]:
    """Each chunk's unit rows, in order: embedded here, or by ``processes`` forked one-thread copies.

    A chunk is always one ``encode`` call, so its batches, and with them its vectors, are the
    same either way (the int8 model quantizes each batch as a whole).
    """
    if processes <= 1:
        for chunk in chunks:
            yield encoder.encode(chunk, batch_size=batch_size, progress=progress, documents=True)
        return
    context = multiprocessing.get_context("fork")
    with context.Pool(processes, initializer=_start_embedding_child, initargs=(encoder,)) as pool:
        for chunk, rows in zip(chunks, pool.imap(partial(_embed_in_child, batch_size=batch_size), chunks)):
            if progress:
                progress(len(chunk))
            yield rows


def _load_rows(path: Path, rows: int | None = None) -> np.ndarray | None:
    """A float32 matrix from ``path`` (with ``rows`` rows when given), or None if unusable."""
    try:
        matrix = np.load(path)
    except (OSError, ValueError, EOFError):
        return None
    ok = matrix.ndim == 2 and matrix.dtype == np.float32 and (rows is None or matrix.shape[0] == rows)
    return matrix if ok else None


def load_or_build_embeddings(
    taxonomy: Taxonomy,
    encoder: Encoder,
    *,
    cache_root: Path | None = None,
    use_cache: bool = True,
    progress: bool = True,
    batch_size: int = 32,
    processes: int | None = None,
) -> tuple[np.ndarray, dict]:
    """The (concepts x dim) unit matrix, from the cache or built once with a progress bar.

    A long build (ICD-10-CM: 72,621 codes) saves its rows every ``CHECKPOINT_EVERY``
    concepts to ``<cache file>.partial.npy``; an interrupted build resumes from there.
    The chunks between two saves are embedded by ``processes`` processes side by side
    (``build_processes`` when None), with the same vectors as in one.
    """
    texts = concept_texts(taxonomy)
    path = embedding_cache_path(cache_dir(root=cache_root), taxonomy.name, encoder.key, texts_hash(texts))
    partial = path.with_name(path.stem + ".partial.npy")
    started = time.perf_counter()
    if use_cache and path.is_file():
        matrix = _load_rows(path, len(texts))
        if matrix is not None:
            return matrix, {"cache": "hit", "path": str(path), "seconds": time.perf_counter() - started}
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # similar lengths batch with less padding
    done = _load_rows(partial) if use_cache and partial.is_file() else None
    if done is not None and done.shape[0] > len(texts):
        done = None
    chunks = [done] if done is not None else []
    resumed = 0 if done is None else done.shape[0]
    bar = None
    if progress:
        from tqdm import tqdm  # plain text: no widget, and no 'IProgress not found' warning in a page

        # one update per ``mininterval``: in an executed notebook each update is a new line of output
        bar = tqdm(
            total=len(texts),
            initial=resumed,
            desc=f"embedding {taxonomy.name} ({encoder.key})",
            unit="concept",
            mininterval=30,
        )
    starts = range(resumed, len(texts), CHECKPOINT_EVERY)
    todo = [[texts[i] for i in order[start : start + CHECKPOINT_EVERY]] for start in starts]
    processes = build_processes(encoder, len(todo)) if processes is None else max(1, min(processes, len(todo)))
    try:
        for start, rows in zip(
            starts,
            embedded_chunks(
                encoder, todo, batch_size=batch_size, processes=processes, progress=bar.update if bar else None
            ),
        ):
            chunks.append(rows)
            if use_cache and start + CHECKPOINT_EVERY < len(texts):
                save_npy_atomic(partial, np.concatenate(chunks))
    finally:
        if bar:
            bar.close()
    rows = np.concatenate(chunks) if chunks else np.zeros((0, 0), dtype=np.float32)
    matrix = np.zeros_like(rows)
    matrix[np.asarray(order, dtype=np.int64)] = rows
    seconds = time.perf_counter() - started
    if use_cache:
        save_npy_atomic(path, matrix)
        partial.unlink(missing_ok=True)
    built = len(texts) - resumed
    return matrix, {
        "cache": "built",
        "path": str(path),
        "seconds": seconds,
        "resumed_from": resumed,
        "concepts_per_second": built / seconds if seconds else None,
        "processes": processes,
    }


def _range(values: np.ndarray) -> np.ndarray:
    if values.size == 0:
        return values
    low, high = values.min(), values.max()
    return (values - low) / (high - low) if high > low else np.zeros_like(values)


@dataclass
class _DensePartition:
    positions: np.ndarray
    ids: list[str]
    rows: np.ndarray | None = None  # the partition's embeddings, contiguous (copied once, not per query)


class DenseRetriever:
    """Exact-cosine search over cached concept embeddings; same interface as the BM25 ``Retriever``.

    Query vectors are memoised (``query_cache_size``, least recently used out): chapter 5
    asks CodiEsp's 4,992 raw and gold queries under dense and again under hybrid, and a
    memo smaller than one pass would evict each query just before it is asked again.
    The cosines of the last ``SCORES_KEPT`` queries are kept too: a fact's hybrid search
    follows its dense one within a few queries (chapter 5 runs a dataset's retrievers fact
    by fact), and one product over ICD-10-CM's 72,621 rows reads 111 MB.
    """

    kind = "dense"

    def __init__(
        self,
        taxonomy: Taxonomy,
        config: RetrievalConfig = RetrievalConfig(w_cov=0.0),
        *,
        model: str = DEFAULT_MODEL,
        encoder: Encoder | None = None,
        cache_root: Path | None = None,
        use_cache: bool = True,
        progress: bool = True,
        query_cache_size: int = 16384,
    ) -> None:
        self.taxonomy = taxonomy
        self.config = config
        self.model = model
        self._encoder = encoder
        self.cache_root = cache_root
        self.use_cache = use_cache
        self.progress = progress
        self.build_info: dict = {}
        self._matrix: np.ndarray | None = None
        self._lock = threading.Lock()
        self._partitions: dict[str | None, _DensePartition] = {}
        self._groups: dict[str, list[int]] = {}
        for position, concept in enumerate(taxonomy.concepts):
            self._groups.setdefault(concept.datatype, []).append(position)
        self._lexical: Retriever | None = None  # only for label coverage (w_cov > 0)
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._exact_queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._exact: ExactVectors | None = None  # made on the first exact search
        self._scores: OrderedDict[tuple[str, str | None], np.ndarray] = OrderedDict()
        self.scored = {"computed": 0, "reused": 0}
        self._query_cache_size = query_cache_size
        self._query_lock = threading.Lock()
        self._encoder_threads: int | None = None  # None: every core (fhs.retrieval.encoders)
        self._makes_encoder = encoder is None
        if self._makes_encoder:
            os.register_at_fork(after_in_child=partial(_remake_encoder_after_fork, weakref.ref(self)))

    @property
    def fork_safe(self) -> bool:
        """Whether a forked copy searches alike (``fhs.run.runner.run_processes``): it does when it
        makes its own encoder, since a session's threads do not survive a fork; an encoder handed
        in cannot be remade, so runs with one stay in one process."""
        return self._makes_encoder

    @property
    def encoder(self) -> Encoder:
        if self._encoder is None:
            with self._lock:
                if self._encoder is None:
                    self._encoder = make_encoder(self.model, threads=self._encoder_threads)
        return self._encoder

    def is_built(self) -> bool:
        """Whether the concept embeddings are in memory or in the cache (reading them takes
        seconds; building them, minutes to hours on a CPU)."""
        if self._matrix is not None:
            return True
        if not self.use_cache:
            return False
        path = embedding_cache_path(
            cache_dir(root=self.cache_root),
            self.taxonomy.name,
            self.encoder.key,
            texts_hash(concept_texts(self.taxonomy)),
        )
        return path.is_file()

    @property
    def matrix(self) -> np.ndarray:
        """The unit embedding of every concept, in taxonomy order (built or read once)."""
        if self._matrix is None:
            encoder = self.encoder
            with self._lock:
                if self._matrix is None:
                    self._matrix, self.build_info = load_or_build_embeddings(
                        self.taxonomy,
                        encoder,
                        cache_root=self.cache_root,
                        use_cache=self.use_cache,
                        progress=self.progress,
                    )
        return self._matrix

    def _partition_key(self, datatype: str | None) -> str | None:
        return datatype if (self.config.type_filter and datatype in self._groups) else None

    def partition_for(self, datatype: str | None) -> _DensePartition:
        """The same partitions as BM25: the fact's datatype, or every concept when it is unknown."""
        key = self._partition_key(datatype)
        part = self._partitions.get(key)
        if part is None:
            positions = np.arange(len(self.taxonomy)) if key is None else np.asarray(self._groups[key])
            part = _DensePartition(positions, [self.taxonomy.concepts[p].id for p in positions])
            self._partitions[key] = part
        return part

    def warm_up(self) -> DenseRetriever:
        _ = self.matrix  # built or read now, not on the first query
        for datatype in self._groups if self.config.type_filter else [None]:
            self.partition_for(datatype)
        return self

    def query_vector(self, query: str) -> np.ndarray:
        vector = self._queries.get(query)
        if vector is None:
            vector = self.encoder.encode([query])[0]  # onnxruntime sessions are thread-safe
            with self._query_lock:  # facts run in threads share the memo
                self._queries[query] = vector
                while len(self._queries) > self._query_cache_size:
                    self._queries.popitem(last=False)
        return vector

    def scores(self, query: str, datatype: str | None = None) -> tuple[_DensePartition, np.ndarray]:
        """The partition and the cosine of each of its rows (read-only: it may be handed out again)."""
        part = self.partition_for(datatype)
        key = (query, self._partition_key(datatype))
        with self._query_lock:
            cosine = self._scores.get(key)
            self.scored["reused" if cosine is not None else "computed"] += 1
        if cosine is not None:
            return part, cosine
        if part.rows is None:
            matrix = self.matrix
            whole = part.positions.size == matrix.shape[0]
            part.rows = matrix if whole else np.ascontiguousarray(matrix[part.positions])
        cosine = part.rows @ self.query_vector(query)
        cosine.flags.writeable = False
        with self._query_lock:
            self._scores[key] = cosine
            while len(self._scores) > SCORES_KEPT:
                self._scores.popitem(last=False)
        return part, cosine

    def search(
        self, query: str, datatype: str | None = None, top_k: int | None = None, *, exact: bool = False
    ) -> Ranking:
        """The top ``top_k`` concepts by cosine; ``exact`` ranks by CPU-independent vectors
        (``fhs.retrieval.exact_dense``: for lists a model reads), else by the fast ones."""
        k = self.config.top_k if top_k is None else top_k
        part, cosine = self.scores(query, datatype)
        covered = self.config.w_cov > 0
        multiplier = self.config.pool_multiplier
        want = k if not covered else k * multiplier if multiplier > 0 else cosine.size
        if exact:
            rows, values = self._exact_top(query, part, cosine, want)
        else:
            rows = top_k_order(cosine, want) if want < cosine.size or not covered else np.arange(cosine.size)
            values = cosine[rows]
        if not covered:
            return Ranking(tuple(part.ids[i] for i in rows), tuple(float(s) for s in _range(values)))
        return with_coverage(self.lexical(), self.config.w_cov, datatype, query, rows, _range(values), part.ids, k)

    def _exact_top(
        self, query: str, part: _DensePartition, cosine: np.ndarray, want: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """The ``want`` best partition rows by exact cosine (ties by taxonomy order), and those cosines."""
        from fhs.retrieval import exact_dense

        exact_query = self.exact_query_vector(query)
        slack = exact_dense.margin(self.query_vector(query), exact_query)
        rows = exact_dense.candidate_rows(cosine, want, slack)
        positions = part.positions[rows]
        vectors = self.exact_vectors().rows(positions, self.matrix[positions])
        scores = exact_dense.exact_scores(vectors, exact_query)
        order = np.lexsort((positions, -scores))[:want]
        return rows[order], scores[order]

    def exact_vectors(self):
        """The taxonomy's exact concept vectors (``fhs.retrieval.exact_dense.ExactVectors``), made once."""
        if self._exact is None:
            from fhs.retrieval.exact_dense import ExactVectors

            matrix = self.matrix
            with self._lock:
                if self._exact is None:
                    encoder = make_exact_encoder(self.model)
                    texts = concept_texts(self.taxonomy)
                    path = (
                        embedding_cache_path(
                            cache_dir(root=self.cache_root), self.taxonomy.name, encoder.key, texts_hash(texts)
                        ).with_suffix(".sqlite")
                        if self.use_cache
                        else None
                    )
                    self._exact = ExactVectors(texts, encoder, path, matrix.shape[1])
        return self._exact

    def exact_query_vector(self, query: str) -> np.ndarray:
        vector = self._exact_queries.get(query)
        if vector is None:
            vector = self.exact_vectors().encoder.encode([query])[0]
            with self._query_lock:
                self._exact_queries[query] = vector
                while len(self._exact_queries) > self._query_cache_size:
                    self._exact_queries.popitem(last=False)
        return vector

    def lexical(self) -> Retriever:
        if self._lexical is None:
            self._lexical = Retriever(self.taxonomy, replace(self.config, w_cov=0.0))
        return self._lexical


_LEFT_BEHIND: list = []  # a forked child's copies of its parent's encoders


def _remake_encoder_after_fork(ref: weakref.ref[DenseRetriever]) -> None:
    """In a forked child: drop the parent's encoder session (its threads stayed behind) and make a
    one-thread one on first use, since the child is one of several processes sharing the cores.
    Vectors do not depend on the thread count, so the child's rankings are the parent's."""
    retriever = ref()
    if retriever is not None and retriever._makes_encoder:
        # Kept, never freed: destroying the parent's session waits on its threads, which a child lacks.
        _LEFT_BEHIND.append(retriever._encoder)
        retriever._encoder = None
        retriever._encoder_threads = 1
        retriever._lock = threading.Lock()
        retriever._query_lock = threading.Lock()


def with_coverage(
    lexical: Retriever,
    w_cov: float,
    datatype: str | None,
    query: str,
    pool: np.ndarray,
    base: np.ndarray,
    ids: Sequence[str],
    k: int,
) -> Ranking:
    """``base + w_cov (|Q∩L|/|L| + |Q∩L|/|Q|)`` over a pool of partition rows (Eq. 6's second term)."""
    part = lexical.partition_for(datatype)  # same rows, same order as the dense partition
    cov_label, cov_query = Retriever.coverage(part, set(tokenize(query)), pool)
    score = base + w_cov * (cov_label + cov_query)
    id_rank = part.id_rank[pool]
    order = np.lexsort((id_rank, -cov_query, -cov_label, -score))[:k]
    return Ranking(tuple(ids[pool[i]] for i in order), tuple(float(score[i]) for i in order))
