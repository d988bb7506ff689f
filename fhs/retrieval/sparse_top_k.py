"""Compiled top-k for BM25 and Eq. 6 that touches only the documents a query shares a term with.

The numpy scorer built a score for every document of the index and sorted by five keys over
the whole pool; most of a query's time went to arrays the size of the index. Here a query
costs its postings: BM25 sums and label hits are added into scratch arrays in the same order
as ``bm25.column_sums`` (so the same bits), the pool's normalisation and Eq. 6 are computed
for the touched documents only, and the documents a query shares no term with -- all tied
at the pool's lowest score, below every touched one -- fill the tail in the order the sort
would give them (document order for BM25, id order for Eq. 6). Rankings are exactly the
numpy scorer's; ``tests/test_sparse_top_k.py`` compares both on the real taxonomies.

No ``fastmath``: numba keeps IEEE order, with no reassociation and no fused multiply-add.
"""

from __future__ import annotations

import threading

import numpy as np
from numba import njit


class Scratch(threading.local):
    """Per-thread scratch arrays for one index size, zero between queries (the kernels restore them)."""

    def arrays(self, n_docs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        held = getattr(self, "held", None)
        if held is None or held[0].size != n_docs:
            held = (np.zeros(n_docs), np.zeros(n_docs), np.zeros(n_docs, dtype=np.uint8),
                    np.zeros(n_docs, dtype=np.int64))
            self.held = held
        return held


@njit(cache=True, nogil=True)
def _accumulate(indptr, indices, data, columns, sums, seen, touched, n_touched, mark):
    """Add the columns' postings into ``sums`` in column order; record each new document once."""
    for c in columns:
        for p in range(indptr[c], indptr[c + 1]):
            d = indices[p]
            if seen[d] == 0:
                seen[d] = mark
                touched[n_touched] = d
                n_touched += 1
            sums[d] += data[p]
    return n_touched


@njit(cache=True, nogil=True)
def _ones(indptr, indices, columns, sums, seen, touched, n_touched, mark):
    """As :func:`_accumulate` for a binary matrix: add 1.0 per posting."""
    for c in columns:
        for p in range(indptr[c], indptr[c + 1]):
            d = indices[p]
            if seen[d] == 0:
                seen[d] = mark
                touched[n_touched] = d
                n_touched += 1
            sums[d] += 1.0
    return n_touched


@njit(cache=True, nogil=True)
def _postings(indptr, columns):
    total = 0
    for c in columns:
        total += indptr[c + 1] - indptr[c]
    return total


@njit(cache=True, nogil=True)
def _gather(w_indptr, w_indices, w_data, terms, l_indptr, l_indices, label_terms, bm25, hits, seen, touched):
    """BM25 sums and label hits of the documents a query touches: ``touched[:n_bm25]`` have a BM25
    score (``seen`` 1), ``touched[n_bm25:n_all]`` label hits only (``seen`` 2). Returns both counts.

    A query with postings for a good share of the index adds them without bookkeeping and finds
    the touched documents in one pass over the index (BM25 weights are positive, so a score
    above 0 means a shared term); a query with few postings records each new document as it goes.
    """
    n_docs = bm25.size
    if 8 * (_postings(w_indptr, terms) + _postings(l_indptr, label_terms)) < n_docs:
        n_bm25 = _accumulate(w_indptr, w_indices, w_data, terms, bm25, seen, touched, 0, 1)
        return n_bm25, _ones(l_indptr, l_indices, label_terms, hits, seen, touched, n_bm25, 2)
    for c in terms:
        for p in range(w_indptr[c], w_indptr[c + 1]):
            bm25[w_indices[p]] += w_data[p]
    for c in label_terms:
        for p in range(l_indptr[c], l_indptr[c + 1]):
            hits[l_indices[p]] += 1.0
    n = 0
    for d in range(n_docs):
        if bm25[d] > 0.0:
            seen[d] = 1
            touched[n] = d
            n += 1
    n_bm25 = n
    for d in range(n_docs):
        if hits[d] > 0.0 and seen[d] == 0:
            seen[d] = 2
            touched[n] = d
            n += 1
    return n_bm25, n


@njit(cache=True, nogil=True)
def _before(keys, last, i, j):
    """Whether row i ranks before row j: ``keys`` descending (row 0 first), then ``last`` ascending."""
    for m in range(keys.shape[0]):
        if keys[m, i] != keys[m, j]:
            return keys[m, i] > keys[m, j]
    return last[i] < last[j]


@njit(cache=True, nogil=True)
def _sift_down(heap, size, at, keys, last):
    """Restore the heap below ``at``; the root is the row that ranks last."""
    while True:
        child = 2 * at + 1
        if child >= size:
            return
        if child + 1 < size and _before(keys, last, heap[child], heap[child + 1]):
            child += 1
        if _before(keys, last, heap[child], heap[at]):
            return
        heap[at], heap[child] = heap[child], heap[at]
        at = child


@njit(cache=True, nogil=True)
def _candidates(first, n, k):
    """Rows whose first key may be among the k largest: those in or above the histogram bin that
    holds the k-th largest (the binning is monotone, so no row of the top k is left out)."""
    bins = 1024
    low = first[0]
    high = low
    for i in range(1, n):
        low = min(low, first[i])
        high = max(high, first[i])
    if not high > low:
        return np.arange(n)
    scale = (bins - 1) / (high - low)
    counts = np.zeros(bins, dtype=np.int64)
    for i in range(n):
        counts[int((first[i] - low) * scale)] += 1
    cut = bins - 1
    above = counts[cut]
    while above < k:
        cut -= 1
        above += counts[cut]
    rows = np.empty(above, dtype=np.int64)
    j = 0
    for i in range(n):
        if int((first[i] - low) * scale) >= cut:
            rows[j] = i
            j += 1
    return rows


@njit(cache=True, nogil=True)
def _top_rows(keys, last, n, k, ordered):
    """The k rows of ``keys[:, :n]`` that rank first (keys descending, ``last`` ascending), through a
    heap of k over the rows a histogram of the first key leaves in; in rank order when ``ordered``.
    The keys end in a strict order, so the k are unique."""
    k = min(k, n)
    if k == 0:
        return np.empty(0, dtype=np.int64)
    rows = _candidates(keys[0], n, k) if n > 2 * k else np.arange(n)
    heap = rows[:k].copy()
    for at in range(k // 2 - 1, -1, -1):
        _sift_down(heap, k, at, keys, last)
    first = keys[0]
    worst = first[heap[0]]  # the first key of the row that ranks last so far
    for j in range(k, rows.size):
        i = rows[j]
        if first[i] < worst:  # most rows: out on the first key alone
            continue
        if _before(keys, last, i, heap[0]):
            heap[0] = i
            _sift_down(heap, k, 0, keys, last)
            worst = first[heap[0]]
    if ordered:  # pop the last-ranked to the end, one at a time
        for size in range(k - 1, 0, -1):
            heap[0], heap[size] = heap[size], heap[0]
            _sift_down(heap, size, 0, keys, last)
    return heap


@njit(cache=True, nogil=True)
def _reset(touched, n_touched, a, b, seen):
    for i in range(n_touched):
        d = touched[i]
        a[d] = 0.0
        b[d] = 0.0
        seen[d] = 0


@njit(cache=True, nogil=True)
def bm25_top_k(indptr, indices, data, terms, k, sums, hits, seen, touched):
    """``bm25.top_k_order(BM25Index.scores(...), k)`` and the scores, from the postings alone."""
    n_docs = sums.size
    k = min(k, n_docs)
    n, _ = _gather(indptr, indices, data, terms, indptr, indices, terms[:0], sums, hits, seen, touched)
    keys = np.empty((1, n))
    for i in range(n):
        keys[0, i] = sums[touched[i]]
    ranked = touched[_top_rows(keys, touched, n, k, True)]
    out = np.empty(k, dtype=np.int64)
    out[: ranked.size] = ranked
    filled = ranked.size
    d = 0
    while filled < k:  # documents without a query term, in document order
        if seen[d] == 0:
            out[filled] = d
            filled += 1
        d += 1
    scores = sums[out]
    _reset(touched, n, sums, hits, seen)
    return out, scores


@njit(cache=True, nogil=True)
def eq6_top_k(w_indptr, w_indices, w_data, terms, l_indptr, l_indices, label_terms, label_sizes,
              id_rank, by_id, n_query, k, pool_size, w_cov, bm25, hits, seen, touched):
    """Eq. 6's top k over the pool, as ``Retriever._rescore_with_coverage`` ranks it.

    ``pool_size`` 0: the pool is the whole index; otherwise the BM25 top ``pool_size`` (ties by
    document order, documents without a query term after in document order). ``by_id``: the
    documents in id order (``argsort(id_rank)``). Returns document numbers and scores.
    """
    n_docs = bm25.size
    n_bm25, n_all = _gather(w_indptr, w_indices, w_data, terms, l_indptr, l_indices, label_terms,
                            bm25, hits, seen, touched)
    positive = touched[:n_bm25]

    rest = np.empty(0, dtype=np.int64)  # pool members without a query term, in id order
    if pool_size == 0:
        n_pool = n_docs
        members = touched[:n_all]  # the untouched members come from by_id when needed
    else:
        n_pool = min(pool_size, n_docs)
        if n_bm25 >= n_pool:
            keys = np.empty((1, n_bm25))
            for i in range(n_bm25):
                keys[0, i] = bm25[positive[i]]
            members = positive[_top_rows(keys, positive, n_bm25, n_pool, False)]
        else:  # every positive, then the first documents without BM25 score in document order
            zeros = np.empty(n_pool - n_bm25, dtype=np.int64)
            filled = 0
            d = 0
            while filled < zeros.size:
                if seen[d] != 1:
                    zeros[filled] = d
                    filled += 1
                d += 1
            members = np.concatenate((positive, zeros[seen[zeros] == 2]))
            rest = zeros[seen[zeros] == 0]
            rest = rest[np.argsort(id_rank[rest], kind="mergesort")]

    n = members.size
    low = 0.0
    high = 0.0
    if n > 0:
        low = bm25[members[0]]
        high = low
        for i in range(1, n):
            value = bm25[members[i]]
            low = min(low, value)
            high = max(high, value)
    if n < n_pool:  # the pool holds documents of BM25 score 0
        low = min(low, 0.0)
        high = max(high, 0.0)
    with_cov = n_query > 0 and label_terms.size > 0
    # rows: Eq. 6's score, |Q∩L|/|L|, |Q∩L|/|Q|, raw BM25 -- the sort keys, most significant first
    keys = np.empty((4, n))
    last = np.empty(n, dtype=np.int64)
    for i in range(n):
        d = members[i]
        raw = bm25[d]
        cov_label = hits[d] / label_sizes[d] if label_sizes[d] > 0 else 0.0
        cov_query = hits[d] / n_query if with_cov else 0.0
        bm25_hat = (raw - low) / (high - low) if high > low else 1.0
        keys[0, i] = bm25_hat + w_cov * (cov_label + cov_query)
        keys[1, i] = cov_label
        keys[2, i] = cov_query
        keys[3, i] = raw
        last[i] = id_rank[d]

    k = min(k, n_pool)
    rows = _top_rows(keys, last, n, k, True)
    out = np.empty(k, dtype=np.int64)
    scores = np.empty(k)
    for i in range(rows.size):
        out[i] = members[rows[i]]
        scores[i] = keys[0, rows[i]]
    filled = rows.size
    if filled < k:
        # Pool members without a query term: BM25 0, coverage 0, all one score below every
        # touched member's, so they follow in id order.
        bm25_hat = (0.0 - low) / (high - low) if high > low else 1.0
        scores[filled:] = bm25_hat + w_cov * (0.0 + 0.0)
        if pool_size == 0:
            i = 0
            while filled < k:
                d = by_id[i]
                if seen[d] == 0:
                    out[filled] = d
                    filled += 1
                i += 1
        else:
            out[filled:] = rest[: k - filled]
    _reset(touched, n_all, bm25, hits, seen)
    return out, scores


@njit(cache=True, nogil=True)
def bm25_top_k_many(indptr, indices, data, terms, term_ends, k, sums, hits, seen, touched):
    """:func:`bm25_top_k` for many queries in one call: query ``q``'s terms are
    ``terms[term_ends[q - 1]:term_ends[q]]``. Rows of documents and of scores, one per query."""
    k = min(k, sums.size)
    out = np.empty((term_ends.size, k), dtype=np.int64)
    scores = np.empty((term_ends.size, k))
    start = 0
    for q in range(term_ends.size):
        out[q], scores[q] = bm25_top_k(indptr, indices, data, terms[start:term_ends[q]], k, sums, hits, seen, touched)
        start = term_ends[q]
    return out, scores


@njit(cache=True, nogil=True)
def eq6_top_k_many(w_indptr, w_indices, w_data, terms, term_ends, l_indptr, l_indices, label_terms, label_ends,
                   label_sizes, id_rank, by_id, n_query, k, pool_size, w_cov, bm25, hits, seen, touched):
    """:func:`eq6_top_k` for many queries in one call (terms and label terms cut as in
    :func:`bm25_top_k_many`; ``n_query`` per query). Rows of documents and of scores."""
    n_pool = bm25.size if pool_size == 0 else min(pool_size, bm25.size)
    k = min(k, n_pool)
    out = np.empty((term_ends.size, k), dtype=np.int64)
    scores = np.empty((term_ends.size, k))
    start = label_start = 0
    for q in range(term_ends.size):
        out[q], scores[q] = eq6_top_k(w_indptr, w_indices, w_data, terms[start:term_ends[q]], l_indptr, l_indices,
                                      label_terms[label_start:label_ends[q]], label_sizes, id_rank, by_id,
                                      n_query[q], k, pool_size, w_cov, bm25, hits, seen, touched)
        start, label_start = term_ends[q], label_ends[q]
    return out, scores
