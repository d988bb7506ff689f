"""BM25 with the paper's label-coverage term (Eq. 6), one index per datatype.

The scorer is a sparse matrix of per-(concept, term) BM25 weights, so a query
is a sum of a few columns. It implements exactly the authors' variant
(the authors' settings): k1 = 1.5, b = 0.75, idf = ln(1 + (N - df + 0.5) / (df + 0.5))
with N and df per index, deduplicated query terms, ties broken by document
order. ``tests/test_retrieval.py`` checks its scores against ``rank_bm25`` on
the same formula.

Eq. 6 then rescores a pool: range-normalised BM25 plus
``w_cov * (|Q∩L|/|L| + |Q∩L|/|Q|)``, where L is the concept label's token
set and Q the query's. The pool is the whole datatype index (the financial
default) or the BM25 top ``top_k * pool_multiplier`` (the CodiEsp setting).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from itertools import chain, repeat
from typing import cast

import numpy as np
from scipy import sparse

from fhs.core.ranges import count_problem, share_problem, switch_problem, weight_problem
from fhs.core.text import token_set, tokenize
from fhs.data.taxonomy import Taxonomy
from fhs.retrieval.index_cache import index_path, read_arrays, write_arrays
from fhs.retrieval.sparse_top_k import (
    DOCUMENT_MASK,
    FIRST_BATCH,
    FIRST_SEARCH,
    LABEL_BIT,
    MAX_LABEL_WORDS,
    Scratch,
    bm25_top_k,
    bm25_top_k_many,
    eq6_top_k,
    eq6_top_k_many,
)


@dataclass(frozen=True)
class RetrievalConfig:
    k1: float = 1.5
    b: float = 0.75
    top_k: int = 200
    w_cov: float = 1.0
    # 0 = rescore the whole (datatype) index with Eq. 6; n > 0 = rescore the BM25 top_k * n
    pool_multiplier: int = 0
    type_filter: bool = True


# What each setting accepts: a spec's ``retrieval:`` is held to the rules its flags are (``--wcov``).
SETTING_RULES = {
    "k1": weight_problem,
    "b": share_problem,
    "top_k": count_problem,
    "w_cov": weight_problem,
    "pool_multiplier": lambda value: count_problem(value, 0),
    "type_filter": switch_problem,
}


class Ranking:
    """An ordered candidate list for one query: concept ids, best first, with scores.

    Immutable. ``scores`` may be given as a numpy row: it becomes a tuple of floats on first
    read, since most lists (an LLM-free run's, every fused one) are read for their ids alone
    and making a Python float of every score was a good share of a batched search.
    """

    __slots__ = ("ids", "_scores")
    ids: tuple[str, ...]
    _scores: tuple[float, ...] | np.ndarray

    def __init__(self, ids: tuple[str, ...], scores: tuple[float, ...] | np.ndarray) -> None:
        object.__setattr__(self, "ids", ids)
        object.__setattr__(self, "_scores", scores)

    @property
    def scores(self) -> tuple[float, ...]:
        held = self._scores
        if not isinstance(held, tuple):
            held = tuple(held.tolist())
            object.__setattr__(self, "_scores", held)
        return held

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Ranking is immutable: cannot set {name!r}")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Ranking):
            return NotImplemented
        return self.ids == other.ids and self.scores == other.scores

    def __hash__(self) -> int:
        return hash((self.ids, self.scores))

    def __repr__(self) -> str:
        return f"Ranking(ids={self.ids!r}, scores={self.scores!r})"

    def __reduce__(self):
        return Ranking, (self.ids, self.scores)

    def rank_of(self, concept_ids: Iterable[str]) -> int | None:
        """1-based rank of the first of ``concept_ids`` in the list, or None."""
        wanted = set(concept_ids)
        for rank, concept_id in enumerate(self.ids, start=1):
            if concept_id in wanted:
                return rank
        return None


class BM25Index:
    """BM25 over pre-tokenized documents, held as a sparse weight matrix.

    ``weights[d, t] = idf(t) * tf (k1 + 1) / (tf + k1 (1 - b + b |d| / avgdl))``,
    so the score of a deduplicated query is the row sum over its term columns.
    """

    def __init__(self, documents: Sequence[Sequence[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.n_docs = len(documents)
        self.vocabulary: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        counts: list[int] = []
        lengths = np.zeros(self.n_docs, dtype=np.float64)
        for doc_id, tokens in enumerate(documents):
            lengths[doc_id] = len(tokens)
            tf: dict[int, int] = {}
            for token in tokens:
                term = self.vocabulary.setdefault(token, len(self.vocabulary))
                tf[term] = tf.get(term, 0) + 1
            rows.extend([doc_id] * len(tf))
            cols.extend(tf.keys())
            counts.extend(tf.values())
        shape = (self.n_docs, len(self.vocabulary))
        tf_matrix = sparse.csr_matrix(
            (
                np.asarray(counts, dtype=np.float64),
                (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)),
            ),
            shape=shape,
        )
        self.doc_lengths = lengths
        self.avgdl = float(lengths.mean()) if self.n_docs else 0.0
        df = np.bincount(tf_matrix.indices, minlength=shape[1]).astype(np.float64)
        self.idf = np.log1p((self.n_docs - df + 0.5) / (df + 0.5))
        norm = k1 * (1.0 - b + b * lengths / (self.avgdl or 1.0))
        tf_values = tf_matrix.data
        doc_of_value = np.repeat(np.arange(self.n_docs), np.diff(tf_matrix.indptr))
        weights = tf_matrix.copy()
        weights.data = self.idf[tf_matrix.indices] * tf_values * (k1 + 1.0) / (tf_values + norm[doc_of_value])
        self.weights = weights.tocsc()

    def term_ids(self, tokens: Iterable[str]) -> np.ndarray:
        """Distinct known term ids of a query, ascending (unknown terms contribute nothing)."""
        if isinstance(tokens, (set, frozenset)):  # distinct already: no set to build
            ids = [i for i in map(self.vocabulary.get, tokens) if i is not None]
            ids.sort()
            return np.array(ids, dtype=np.int64)
        distinct = set(map(self.vocabulary.get, tokens))
        distinct.discard(None)
        return np.fromiter(sorted(cast("set[int]", distinct)), dtype=np.int64, count=len(distinct))  # None gone

    def scores(self, tokens: Iterable[str]) -> np.ndarray:
        """BM25 score of every document for a query (deduplicated tokens)."""
        terms = self.term_ids(tokens)
        if terms.size == 0:
            return np.zeros(self.n_docs)
        return column_sums(self.weights, terms)

    def scratch(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """This thread's scratch arrays for the compiled kernels (``sparse_top_k``)."""
        held = self.__dict__.get("_scratch")  # set lazily: ``_Partition.from_parts`` skips __init__
        if held is None:
            held = self._scratch = Scratch()
        return held.arrays(self.n_docs)

    def top_k(self, tokens: Iterable[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """``top_k_order(self.scores(tokens), k)`` and those scores, from the query's postings alone."""
        w = self.weights
        return bm25_top_k(w.indptr, w.indices, w.data, self.term_ids(tokens), k, *self.scratch())


def column_sums(matrix: sparse.csc_matrix, columns: np.ndarray) -> np.ndarray:
    """Row sums of ``matrix[:, columns]``, bit for bit, without building the slice.

    The values are added per row in column order, as scipy's CSC product with a
    ones vector adds them; slicing first cost a full-test-split run most of its time.
    """
    starts, ends = matrix.indptr[columns], matrix.indptr[np.asarray(columns) + 1]
    lengths = ends - starts
    positions = np.repeat(starts - np.cumsum(lengths) + lengths, lengths) + np.arange(lengths.sum())
    return np.bincount(matrix.indices[positions], weights=matrix.data[positions], minlength=matrix.shape[0])


def top_k_order(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k best scores, descending, ties broken by lower index."""
    k = min(k, scores.size)
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    positive = np.flatnonzero(scores > 0)
    if positive.size >= k:
        # Most documents share no term with the query: select among the rest only.
        kth = np.partition(scores[positive], positive.size - k)[positive.size - k]
        candidates = positive[scores[positive] >= kth]
    elif k < scores.size:
        # Every positive score is in; the zero-score remainder follows in document order.
        zeros = np.flatnonzero(scores <= 0)
        candidates = np.concatenate([positive, zeros[: k - positive.size]]) if (scores >= 0).all() else None
        if candidates is None:  # negative scores cannot come from BM25, but stay exact anyway
            kth = np.partition(scores, scores.size - k)[scores.size - k]
            candidates = np.flatnonzero(scores >= kth)
    else:
        candidates = np.arange(scores.size)
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order[:k]]


_NO_COLUMNS = np.zeros(0, dtype=np.int64)


def query_columns(vocabulary: dict[str, int], token_sets: Sequence[Collection[str]]) -> tuple[np.ndarray, np.ndarray]:
    """Each query's known terms as columns, ascending (the order the kernels add them in), all
    queries end to end, and where each query's end: one sort for the batch, not one a query."""
    lengths = np.fromiter(map(len, token_sets), dtype=np.int64, count=len(token_sets))
    columns = np.fromiter(
        map(vocabulary.get, chain.from_iterable(token_sets), repeat(-1)), dtype=np.int64, count=int(lengths.sum())
    )
    query = np.repeat(np.arange(len(token_sets), dtype=np.int64), lengths)
    known = columns >= 0
    width = max(len(vocabulary), 1)
    keys = np.sort(query[known] * width + columns[known])  # by query, then column
    keys = keys[np.r_[True, keys[1:] != keys[:-1]]] if keys.size else keys  # a term twice counts once
    return keys % width, np.cumsum(np.bincount(keys // width, minlength=len(token_sets)))


def label_postings(
    index: BM25Index, labels: sparse.csc_matrix, label_vocabulary: dict[str, int]
) -> tuple[np.ndarray, sparse.csc_matrix]:
    """Eq. 6's label hits folded into the BM25 postings, so one pass over a query's postings counts
    both: the document number of each posting of ``index.weights`` (uint32) with bit
    ``LABEL_BIT`` set where the term is in the document's label, and the label postings whose
    term the document's own text lacks (``labels``' columns; in the shipped taxonomies none),
    which the kernels add apart."""
    weights, shape = index.weights, index.weights.shape
    if shape[0] > DOCUMENT_MASK:
        raise ValueError(f"{shape[0]:,} documents in one index: the flagged postings hold up to {DOCUMENT_MASK:,}")
    to_index = np.full(len(label_vocabulary), -1, dtype=np.int64)  # label column -> index column
    for term, column in label_vocabulary.items():
        to_index[column] = index.vocabulary.get(term, -1)
    label = labels.tocoo()
    known = np.flatnonzero(to_index[label.col] >= 0)

    def numbered(numbers: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> sparse.csc_matrix:
        """A matrix whose entries carry their number (from 1) through an elementwise product."""
        return sparse.csc_matrix((numbers.astype(np.float64) + 1.0, (rows, columns)), shape=shape)

    label_in_index = numbered(known, label.row[known], to_index[label.col[known]])
    postings = sparse.csc_matrix(
        (np.arange(1, weights.nnz + 1, dtype=np.float64), weights.indices, weights.indptr), shape=shape
    )
    in_label = np.zeros(weights.nnz, dtype=np.uint8)
    in_label[postings.multiply(label_in_index.sign()).tocsc().data.astype(np.int64) - 1] = 1
    missing = np.ones(labels.nnz, dtype=bool)
    missing[label_in_index.multiply(postings.sign()).tocsc().data.astype(np.int64) - 1] = False
    extra = sparse.csc_matrix(
        (np.ones(int(missing.sum())), (label.row[missing], label.col[missing])), shape=labels.shape
    )
    flagged = weights.indices.astype(np.uint32) | (in_label.astype(np.uint32) << np.uint32(LABEL_BIT))
    return flagged, extra


def _ranking(ids: np.ndarray, positions: np.ndarray, scores: np.ndarray) -> Ranking:
    """A Ranking of ``ids[positions]`` (an object array of ids) with ``scores`` (floats on first
    read), the ids taken in bulk without a Python loop over numpy scalars."""
    return Ranking(tuple(ids[positions].tolist()), scores)


@dataclass
class _Partition:
    """One searchable index: a subset of the taxonomy, its BM25 index and its label sets."""

    positions: np.ndarray  # taxonomy positions of the partition's documents
    ids: list[str]
    index: BM25Index
    labels: sparse.csc_matrix  # binary (documents x label vocabulary)
    label_sizes: np.ndarray
    label_vocabulary: dict[str, int]
    id_rank: np.ndarray  # position of each document's id in sorted id order (the last tie-break)

    def __post_init__(self) -> None:
        self.by_id = np.argsort(self.id_rank, kind="stable")  # documents in id order
        self.id_array = np.empty(len(self.ids), dtype=object)  # ids by document, taken many rows at once
        self.id_array[:] = self.ids
        self.postings, self.label_extra = label_postings(self.index, self.labels, self.label_vocabulary)

    def label_columns(self, tokens: Iterable[str]) -> np.ndarray:
        """The query's columns of ``label_extra``: none to look up when no label word is missing from its text."""
        return self.label_term_ids(tokens) if self.label_extra.nnz else _NO_COLUMNS

    def label_term_ids(self, tokens: Iterable[str]) -> np.ndarray:
        """The query's tokens that occur in some label, as label-vocabulary columns."""
        ids = [self.label_vocabulary[t] for t in tokens if t in self.label_vocabulary]
        return np.asarray(ids, dtype=np.int64)

    def to_parts(self) -> tuple[dict[str, np.ndarray], dict]:
        """Numeric arrays and a JSON document that :meth:`from_parts` reads back (``index_cache``)."""
        arrays = {
            "positions": self.positions,
            "id_rank": self.id_rank,
            "label_sizes": self.label_sizes,
            "doc_lengths": self.index.doc_lengths,
            "idf": self.index.idf,
        }
        for name, matrix in (("weights", self.index.weights), ("labels", self.labels)):
            arrays.update(
                {f"{name}_data": matrix.data, f"{name}_indices": matrix.indices, f"{name}_indptr": matrix.indptr}
            )
        meta = {
            "ids": self.ids,
            "vocabulary": list(self.index.vocabulary),
            "label_vocabulary": list(self.label_vocabulary),
            "k1": self.index.k1,
            "b": self.index.b,
            "weights_shape": list(self.index.weights.shape),
            "labels_shape": list(self.labels.shape),
        }
        return arrays, meta

    @classmethod
    def from_parts(cls, arrays: dict[str, np.ndarray], meta: dict) -> _Partition:
        """The partition back; ValueError, KeyError or TypeError when the parts do not fit together."""

        def matrix(name: str) -> sparse.csc_matrix:
            shape = tuple(int(n) for n in meta[f"{name}_shape"])
            built = sparse.csc_matrix(
                (arrays[f"{name}_data"], arrays[f"{name}_indices"], arrays[f"{name}_indptr"]), shape=shape
            )
            built.check_format(full_check=True)
            return built

        ids, vocabulary = [str(i) for i in meta["ids"]], [str(t) for t in meta["vocabulary"]]
        weights, labels = matrix("weights"), matrix("labels")
        n = len(ids)
        sizes = {
            len(arrays["positions"]),
            len(arrays["id_rank"]),
            len(arrays["label_sizes"]),
            len(arrays["doc_lengths"]),
            weights.shape[0],
            labels.shape[0],
        }
        if (
            sizes != {n}
            or weights.shape[1] != len(vocabulary)
            or len(arrays["idf"]) != len(vocabulary)
            or labels.shape[1] != len(meta["label_vocabulary"])
        ):
            raise ValueError("index parts of different sizes")
        index = BM25Index.__new__(BM25Index)
        index.k1, index.b, index.n_docs = float(meta["k1"]), float(meta["b"]), n
        index.vocabulary = {term: i for i, term in enumerate(vocabulary)}
        index.doc_lengths = arrays["doc_lengths"].astype(np.float64)
        index.avgdl = float(index.doc_lengths.mean()) if n else 0.0
        index.idf = arrays["idf"].astype(np.float64)
        index.weights = weights
        return cls(
            positions=arrays["positions"].astype(np.int64),
            ids=ids,
            index=index,
            labels=labels,
            label_sizes=arrays["label_sizes"],
            label_vocabulary={str(t): i for i, t in enumerate(meta["label_vocabulary"])},
            id_rank=arrays["id_rank"].astype(np.int64),
        )


class Retriever:
    """BM25 + label coverage over a taxonomy, searched within the fact's datatype."""

    kind = "bm25"
    fork_safe = True  # pure Python and numpy: a forked copy searches alike (fhs.run.runner.run_processes)

    def __init__(
        self, taxonomy: Taxonomy, config: RetrievalConfig = RetrievalConfig(), cache_key: str | None = None
    ) -> None:
        """``cache_key``: a digest of the taxonomy's content; with it, built indexes are kept on
        disk and read back by later runs (``fhs.retrieval.index_cache``)."""
        self.taxonomy = taxonomy
        self.config = config
        self.cache_key = cache_key
        self._partitions: dict[str | None, _Partition] = {}
        self._building = threading.Lock()  # facts run in threads may ask for the same index at once
        self._groups: dict[str, list[int]] = {}
        for position, concept in enumerate(taxonomy.concepts):
            self._groups.setdefault(concept.datatype, []).append(position)

    def _global_texts(self) -> list[str]:
        """The global index's documents: every concept, its datatype prepended."""
        return [f"{c.datatype}. {c.index_text}" if c.datatype else c.index_text for c in self.taxonomy.concepts]

    def _build(self, positions: list[int], texts: list[str]) -> _Partition:
        concepts = self.taxonomy.concepts
        index = BM25Index([tokenize(text) for text in texts], self.config.k1, self.config.b)
        vocabulary: dict[str, int] = {}
        rows, cols = [], []
        for row, position in enumerate(positions):
            for token in set(tokenize(concepts[position].label_text)):
                rows.append(row)
                cols.append(vocabulary.setdefault(token, len(vocabulary)))
        labels = sparse.csc_matrix(
            (np.ones(len(rows)), (np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64))),
            shape=(len(positions), len(vocabulary)),
        )
        label_sizes = np.asarray(labels.sum(axis=1)).ravel()
        if label_sizes.size and label_sizes.max() > MAX_LABEL_WORDS:
            longest = concepts[positions[int(label_sizes.argmax())]].id
            raise ValueError(
                f"concept {longest!r}: its label has {int(label_sizes.max()):,} distinct words; "
                f"Eq. 6's kernels count label hits up to {MAX_LABEL_WORDS:,} (shorten the label)"
            )
        ids = [concepts[p].id for p in positions]
        id_rank = np.empty(len(ids), dtype=np.int64)
        id_rank[np.argsort(np.asarray(ids, dtype=object).astype(str), kind="stable")] = np.arange(len(ids))
        return _Partition(
            positions=np.asarray(positions, dtype=np.int64),
            ids=ids,
            index=index,
            labels=labels,
            label_sizes=label_sizes,
            label_vocabulary=vocabulary,
            id_rank=id_rank,
        )

    def partition_for(self, datatype: str | None) -> _Partition:
        """The fact's own datatype index, or the global one when the datatype is unknown.

        Indexes are built on first use, so a taxonomy searched only within its
        datatypes never pays for the global index.
        """
        key = datatype if (self.config.type_filter and datatype in self._groups) else None
        if key in self._partitions:
            return self._partitions[key]
        with self._building:
            if key in self._partitions:
                return self._partitions[key]
            positions = list(range(len(self.taxonomy))) if key is None else self._groups[key]
            path = None
            if self.cache_key:
                path = index_path(self.cache_key, self.config.k1, self.config.b, key)
                cached = self._read_cached(path, positions)
                if cached is not None:
                    self._partitions[key] = cached
                    return cached
            texts = self._global_texts() if key is None else [self.taxonomy.concepts[p].index_text for p in positions]
            self._partitions[key] = self._build(positions, texts)
            if path is not None:
                write_arrays(path, *self._partitions[key].to_parts())
            return self._partitions[key]

    def _read_cached(self, path, positions: list[int]) -> _Partition | None:
        """The partition on disk, if it reads back whole and covers exactly these concepts."""
        parts = read_arrays(path)
        if parts is None:
            return None
        try:
            cached = _Partition.from_parts(*parts)
        except (KeyError, TypeError, ValueError):
            return None
        expected = [self.taxonomy.concepts[p].id for p in positions]
        return cached if cached.positions.tolist() == positions and cached.ids == expected else None

    def warm_up(self) -> Retriever:
        """Build every datatype index now (for timing, or before forking workers)."""
        for datatype in self._groups if self.config.type_filter else [None]:
            self.partition_for(datatype)
        return self

    def search(self, query: str, datatype: str | None = None, top_k: int | None = None) -> Ranking:
        """The top-k concepts for one query string, searched in ``datatype``'s index."""
        return self.search_tokens(token_set(query), datatype, top_k)

    def search_tokens(
        self, tokens: set[str] | frozenset[str], datatype: str | None = None, top_k: int | None = None
    ) -> Ranking:
        """:meth:`search` for an already tokenized query, by the compiled kernels (``sparse_top_k``)."""
        if not FIRST_SEARCH.done:  # the process's first query may compile the kernels: say so
            return FIRST_SEARCH.run(self._search_tokens, tokens, datatype, top_k)
        return self._search_tokens(tokens, datatype, top_k)

    def _search_tokens(self, tokens: set[str] | frozenset[str], datatype: str | None, top_k: int | None) -> Ranking:
        k = self.config.top_k if top_k is None else top_k
        part = self.partition_for(datatype)
        if self.config.w_cov <= 0:
            order, scores = part.index.top_k(tokens, k)
        else:
            weights, extra = part.index.weights, part.label_extra
            order, scores = eq6_top_k(
                weights.indptr,
                part.postings,
                weights.data,
                part.index.term_ids(tokens),
                extra.indptr,
                extra.indices,
                part.label_columns(tokens),
                part.label_sizes,
                part.id_rank,
                part.by_id,
                len(tokens),
                k,
                k * self.config.pool_multiplier,
                float(self.config.w_cov),
                *part.index.scratch(),
            )
        return _ranking(part.id_array, order, scores)

    def search_many(
        self, queries: Sequence[str], datatypes: Sequence[str | None] | None = None, top_k: int | None = None
    ) -> list[Ranking]:
        """:meth:`search` for many queries (an LLM-free run's every fact): one compiled call per
        datatype index instead of one per query, the same rankings."""
        kinds = [None] * len(queries) if datatypes is None else list(datatypes)
        return self.search_tokens_many([token_set(query) for query in queries], kinds, top_k)

    def search_tokens_many(
        self, token_sets: Sequence[set[str] | frozenset[str]], datatypes: Sequence[str | None], top_k: int | None = None
    ) -> list[Ranking]:
        """:meth:`search_tokens` for many tokenized queries, grouped by the index each searches."""
        if not FIRST_BATCH.done:
            return FIRST_BATCH.run(self._search_tokens_many, token_sets, datatypes, top_k)
        return self._search_tokens_many(token_sets, datatypes, top_k)

    def _search_tokens_many(
        self, token_sets: Sequence[set[str] | frozenset[str]], datatypes: Sequence[str | None], top_k: int | None
    ) -> list[Ranking]:
        k = self.config.top_k if top_k is None else top_k
        groups: dict[int, tuple[_Partition, list[int]]] = {}
        for i, datatype in enumerate(datatypes):
            part = self.partition_for(datatype)
            groups.setdefault(id(part), (part, []))[1].append(i)
        out: list[Ranking | None] = [None] * len(token_sets)
        for part, members in groups.values():
            index, mine = part.index, [token_sets[i] for i in members]
            as_array = query_columns(index.vocabulary, mine)
            w = index.weights
            if self.config.w_cov <= 0:
                order, scores = bm25_top_k_many(w.indptr, w.indices, w.data, *as_array, k, *index.scratch())
            else:
                extra = part.label_extra
                sizes = np.fromiter(map(len, mine), dtype=np.int64, count=len(mine))
                no_extra = (_NO_COLUMNS, np.zeros(len(mine), dtype=np.int64))
                order, scores = eq6_top_k_many(
                    w.indptr,
                    part.postings,
                    w.data,
                    *as_array,
                    extra.indptr,
                    extra.indices,
                    *(query_columns(part.label_vocabulary, mine) if extra.nnz else no_extra),
                    part.label_sizes,
                    part.id_rank,
                    part.by_id,
                    sizes,
                    k,
                    k * self.config.pool_multiplier,
                    float(self.config.w_cov),
                    *index.scratch(),
                )
            for i, ids, row in zip(members, part.id_array[order].tolist(), scores):
                out[i] = Ranking(tuple(ids), row)
        return out  # type: ignore[return-value]

    def search_numpy(self, query: str, datatype: str | None = None, top_k: int | None = None) -> Ranking:
        """The same ranking by plain numpy over the whole index: the readable reference that
        ``tests/test_sparse_top_k.py`` holds the kernels to, and the benchmark's earlier scorer."""
        k = self.config.top_k if top_k is None else top_k
        part = self.partition_for(datatype)
        tokens = set(tokenize(query))
        bm25 = part.index.scores(tokens)
        if self.config.w_cov <= 0:
            order = top_k_order(bm25, k)
            return _ranking(part.id_array, order, bm25[order])
        return self._rescore_with_coverage(part, tokens, bm25, k)

    def _rescore_with_coverage(self, part: _Partition, tokens: set[str], bm25: np.ndarray, k: int) -> Ranking:
        if self.config.pool_multiplier > 0:
            pool = top_k_order(bm25, k * self.config.pool_multiplier)
        else:
            pool = np.arange(bm25.size)
        pool_bm25 = bm25[pool]
        low, high = (pool_bm25.min(), pool_bm25.max()) if pool.size else (0.0, 0.0)
        bm25_hat = (pool_bm25 - low) / (high - low) if high > low else np.ones_like(pool_bm25)
        cov_label, cov_query = self.coverage(part, tokens, pool)
        score = bm25_hat + self.config.w_cov * (cov_label + cov_query)
        # Only scores at or above the k-th best can be in the top k; the sort sees just those.
        keep = np.arange(score.size)
        if score.size > k > 0:
            kth = np.partition(score, score.size - k)[score.size - k]
            keep = np.flatnonzero(score >= kth)
        # Sort: score, cov_label, cov_query, raw bm25 (all descending), then id ascending.
        order = keep[
            np.lexsort((part.id_rank[pool[keep]], -pool_bm25[keep], -cov_query[keep], -cov_label[keep], -score[keep]))
        ][:k]
        return _ranking(part.id_array, pool[order], score[order])

    @staticmethod
    def coverage(part: _Partition, tokens: set[str], pool: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Eq. 6's two terms for each pooled concept: |Q∩L|/|L| and |Q∩L|/|Q|."""
        n_query = len(tokens)
        if n_query == 0:
            zeros = np.zeros(pool.size)
            return zeros, zeros
        query_terms = [part.label_vocabulary[t] for t in tokens if t in part.label_vocabulary]
        if not query_terms:
            zeros = np.zeros(pool.size)
            return zeros, zeros
        hits = column_sums(part.labels, np.asarray(query_terms, dtype=np.int64))[pool]
        sizes = part.label_sizes[pool]
        cov_label = np.divide(hits, sizes, out=np.zeros_like(hits), where=sizes > 0)
        return cov_label, hits / n_query
