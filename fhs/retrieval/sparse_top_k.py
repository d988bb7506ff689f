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

from fhs.retrieval.jit import FirstCompile, kernel


def _kernel(**options):
    """Compiled once and cached on disk (``fhs.retrieval.jit``). Division by zero is IEEE's (numpy's error
    model): every division here is guarded, and without Python's zero check the compiler vectorizes the loops."""
    return kernel(nogil=True, error_model="numpy", **options)


FIRST_SEARCH = FirstCompile("the search kernels", __name__)  # a query's path: one query at a time
FIRST_BATCH = FirstCompile("the batched search kernels", __name__)  # many queries in one call


MAX_LABEL_WORDS = np.iinfo(np.uint16).max  # label hits count in uint16: a document's hits <= its label's words
LABEL_BIT = 31  # a posting's document number fills the bits below; the top bit flags a label word
DOCUMENT_MASK = (1 << LABEL_BIT) - 1


class Scratch(threading.local):
    """Per-thread scratch arrays for one index size, zero between queries (the kernels restore them):
    BM25 sums, label hits (uint16: a fifth of the float array's cache lines) and the touched documents.
    A document is touched when its BM25 sum or its hits are above zero (BM25 weights are positive)."""

    def arrays(self, n_docs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        held = getattr(self, "held", None)
        if held is None or held[0].size != n_docs:
            held = (np.zeros(n_docs), np.zeros(n_docs, dtype=np.uint16), np.zeros(n_docs, dtype=np.uint32))
            self.held = held
        return held


@_kernel()
def _label_only(indptr, indices, columns, bm25, hits, touched, n_touched):
    """Add a hit per label posting of the columns; record each document not touched before."""
    for c in columns:
        for d in indices[indptr[c] : indptr[c + 1]]:
            if bm25[d] == 0.0 and hits[d] == 0:
                touched[n_touched] = d
                n_touched += 1
            hits[d] += 1
    return n_touched


@_kernel()
def _postings(indptr, columns):
    total = 0
    for c in columns:
        total += indptr[c + 1] - indptr[c]
    return total


@_kernel()
def _add_postings(w_indptr, w_postings, w_data, terms, bm25, hits):
    """BM25 sums and label hits of the terms' flagged postings (see :func:`_gather`): the flag in
    the document number's top bit, rather than in an array beside it, spares the pass a second
    stream of reads (``fhs bench retrieval`` times it). Each column is read through slices: an
    index that counts up from 0 needs no check for a negative position, which an index starting
    at ``w_indptr[c]`` pays on every read."""
    for c in terms:
        postings, weights = w_postings[w_indptr[c] : w_indptr[c + 1]], w_data[w_indptr[c] : w_indptr[c + 1]]
        for i in range(postings.size):
            posting = postings[i]
            d = posting & DOCUMENT_MASK
            bm25[d] += weights[i]
            hits[d] += posting >> LABEL_BIT


@_kernel()
def _gather(w_indptr, w_postings, w_data, terms, x_indptr, x_indices, x_terms, with_labels, bm25, hits, touched):
    """BM25 sums and label hits of the documents a query touches: ``touched[:n_bm25]`` have a BM25
    score, ``touched[n_bm25:n_all]`` label hits only. Returns both counts.

    Label hits come with the BM25 postings: ``w_postings[p]`` is posting p's document number with
    bit ``LABEL_BIT`` set where its term is in the document's label (``with_labels``; plain document
    numbers otherwise), so one pass over the postings gives both sums; ``x_*``
    holds the label terms a document's own text lacks (usually none). A query with postings for a
    good share of the index adds them without bookkeeping and finds the touched documents in one
    pass over the index (BM25 weights are positive, so a score above 0 means a shared term); a
    query with few postings records each new document as it goes.
    """
    n_docs = bm25.size
    if 1 * (_postings(w_indptr, terms) + _postings(x_indptr, x_terms)) < n_docs:
        n = 0
        for c in terms:  # by slices, as in :func:`_add_postings`
            postings, weights = w_postings[w_indptr[c] : w_indptr[c + 1]], w_data[w_indptr[c] : w_indptr[c + 1]]
            for i in range(postings.size):
                posting = postings[i]
                d = posting & DOCUMENT_MASK
                if bm25[d] == 0.0:
                    touched[n] = d
                    n += 1
                bm25[d] += weights[i]
                if with_labels:
                    hits[d] += posting >> LABEL_BIT
        return n, _label_only(x_indptr, x_indices, x_terms, bm25, hits, touched, n)
    if with_labels:
        _add_postings(w_indptr, w_postings, w_data, terms, bm25, hits)
    else:
        for c in terms:
            postings, weights = w_postings[w_indptr[c] : w_indptr[c + 1]], w_data[w_indptr[c] : w_indptr[c + 1]]
            for i in range(postings.size):
                bm25[postings[i] & DOCUMENT_MASK] += weights[i]
    for c in x_terms:
        for d in x_indices[x_indptr[c] : x_indptr[c + 1]]:
            hits[d] += 1
    n = 0
    for d in range(n_docs):  # branch-free: a document about half the queries touch is no guess
        touched[n] = d  # n <= d, so always in bounds; kept only if touched
        n += bm25[d] > 0.0
    n_bm25 = n
    if x_terms.size:  # only label words the text lacks give hits without a BM25 score
        for d in range(n_docs):
            if hits[d] > 0 and bm25[d] == 0.0:
                touched[n] = d
                n += 1
    return n_bm25, n


@_kernel()
def _before(keys, last, i, j):
    """Whether row i ranks before row j: ``keys`` descending (row 0 first), then ``last`` ascending."""
    for m in range(keys.shape[0]):
        if keys[m, i] != keys[m, j]:
            return keys[m, i] > keys[m, j]
    return last[i] < last[j]


@_kernel()
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


@_kernel()
def _low_high(values, n):
    """The smallest and the largest of ``values[:n]`` (n at least 1)."""
    low = values[0]
    high = low
    for i in range(1, n):
        low = min(low, values[i])
        high = max(high, values[i])
    return low, high


@_kernel()
def _low_high_nonnegative(values, n):
    """:func:`_low_high` of values that are all +0.0 or above (BM25 sums): their bit patterns order
    as integers do, and an integer minimum and maximum vectorize where a float one does not."""
    bits = values[:n].view(np.int64)
    low = bits[0]
    high = low
    for i in range(1, n):
        b = bits[i]
        low = b if b < low else low
        high = b if b > high else high
    pair = np.array([low, high]).view(np.float64)
    return pair[0], pair[1]


@_kernel()
def _candidates(first, n, k):
    """Rows whose first key may be among the k largest: those in or above the histogram bin that
    holds the k-th largest (the binning is monotone, so no row of the top k is left out)."""
    bins = 1024
    low, high = _low_high(first, n)
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


@_kernel()
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


@_kernel()
def _reset(touched, n_touched, bm25, hits):
    for i in range(n_touched):
        d = touched[i]
        bm25[d] = 0.0
        hits[d] = 0


@_kernel()
def bm25_top_k(indptr, indices, data, terms, k, sums, hits, touched):
    """``bm25.top_k_order(BM25Index.scores(...), k)`` and the scores, from the postings alone."""
    n_docs = sums.size
    k = min(k, n_docs)
    n, _ = _gather(indptr, indices, data, terms, indptr, indices, terms[:0], False, sums, hits, touched)
    keys = np.empty((1, n))
    for i in range(n):
        keys[0, i] = sums[touched[i]]
    ranked = touched[_top_rows(keys, touched, n, k, True)]
    out = np.empty(k, dtype=np.int64)
    out[: ranked.size] = ranked
    filled = ranked.size
    d = 0
    while filled < k:  # documents without a query term, in document order
        if sums[d] == 0.0:
            out[filled] = d
            filled += 1
        d += 1
    scores = sums[out]
    _reset(touched, n, sums, hits)
    return out, scores


@_kernel(inline="always")
def _eq6(raw, hit, label_size, n_query, with_cov, low, high, w_cov):
    """Eq. 6 for one pool member: range-normalised BM25 plus w_cov times the two coverages."""
    cov_label = hit / label_size if label_size > 0 else 0.0
    cov_query = hit / n_query if with_cov else 0.0
    bm25_hat = (raw - low) / (high - low) if high > low else 1.0
    return bm25_hat + w_cov * (cov_label + cov_query)


@_kernel(inline="always")
def _eq6_range(w_cov):
    """Bounds of every Eq. 6 score: normalised BM25 is in [0, 1], and so is each coverage (a label
    word counts once)."""
    return min(0.0, 2.0 * w_cov), 1.0 + max(0.0, 2.0 * w_cov)


@_kernel()
def _at_least(values, threshold):
    """How many of ``values`` are at least ``threshold`` (a pass the compiler vectorizes)."""
    count = 0
    for i in range(values.size):
        count += values[i] >= threshold
    return count


@_kernel()
def _rows_counted(values, threshold, count):
    """The rows of ``values`` at or above ``threshold``, in order, given how many there are (the
    count :func:`_threshold` made): branch-free, into one spare slot."""
    rows = np.empty(count + 1, dtype=np.int64)
    j = 0
    for i in range(values.size):
        rows[j] = i
        j += values[i] >= threshold
    return rows[:j]


@_kernel()
def _threshold(values, k, floor, ceiling):
    """Bounds t <= u such that at least k of ``values`` are at least t, not many more, and fewer
    than k are at least u: bisection of [floor, ceiling] (which holds every value) by counting
    passes, stopped when the count is within k and 5k/4 or the interval stops shrinking. Returns
    t, how many values reach it, u and how many reach u (u is infinite when k values reach the
    ceiling)."""
    low, high = floor, ceiling  # at least k values are >= low; fewer than k are >= high
    count = _at_least(values, high)
    if count >= k:
        return high, count, np.inf, 0
    high_count = count
    low_count = -1  # not counted yet
    for _ in range(40):
        middle = 0.5 * (low + high)
        if not low < middle < high:
            break
        count = _at_least(values, middle)
        if count >= k:
            low, low_count = middle, count
            if 4 * count <= 5 * k:
                break
        else:
            high, high_count = middle, count
    if low_count < 0:
        low_count = _at_least(values, low)
    return low, low_count, high, high_count


@_kernel()
def _best_rows(score, k, floor, ceiling):
    """The rows of ``score`` (each in [floor, ceiling]) that may be among the k best, in order: all
    of them when k is half or more, else those at or above a threshold that k to 5k/4 reach."""
    n = score.size
    if n <= 2 * k:
        return np.arange(n)
    cut, count, _, _ = _threshold(score, k, floor, ceiling)
    if count < k:  # a score outside the bounds after all: keep every row
        return np.arange(n)
    return _rows_counted(score, cut, count)


@_kernel()
def _top_set(values, last, k, high):
    """The k rows that rank first by ``values`` (BM25 sums, +0.0 or above, at most ``high``)
    descending, then ``last`` ascending, in no order.

    Counting passes (which the compiler vectorizes) first bisect the values' range for bounds
    t <= u: at least k and at most 5k/4 rows reach t, fewer than k reach u. Only the rows at or
    above t are then binned, over [t, u) alone, and only the bin that holds the k-th value is
    sorted (:func:`_top_set_binned`). A pool of 2,000 among 14,000 touched documents costs a few
    passes over the values instead of a binning of all of them."""
    n = values.size
    if k >= n or n <= 2 * k:
        low, high = _low_high_nonnegative(values, n) if n > 0 else (0.0, 0.0)
        return _top_set_binned(values, last, k, low, high)
    low, count, high, _ = _threshold(values, k, 0.0, high)
    rows = _rows_counted(values, low, count)
    return rows[_top_set_binned(values[rows], last[rows], k, low, high)]


@_kernel()
def _top_set_binned(values, last, k, low, high):
    """The k rows that rank first by ``values`` (each at least ``low``) descending, then ``last``
    ascending, in no order: a histogram of [low, high) in 1,024 bins, with the values at or
    above ``high`` in a bin of their own on top; every row of a bin above the one that holds the
    k-th value is in, and only that bin is sorted by both keys."""
    n = values.size
    if k >= n:
        return np.arange(n)
    bins = 1024
    scale = bins / (high - low) if high > low else 0.0  # infinite high: one bin for all below it
    slot = np.empty(n, dtype=np.int64)
    counts = np.zeros(bins + 1, dtype=np.int64)
    for i in range(n):
        value = values[i]
        slot[i] = bins if value >= high else min(int((value - low) * scale), bins - 1)
        counts[slot[i]] += 1
    cut = bins
    above = 0
    while above + counts[cut] < k:
        above += counts[cut]
        cut -= 1
    out = np.empty(k, dtype=np.int64)
    edge = np.empty(counts[cut], dtype=np.int64)
    j = e = 0
    for i in range(n):
        if slot[i] > cut:
            out[j] = i
            j += 1
        elif slot[i] == cut:
            edge[e] = i
            e += 1
    if j + e > k:  # more rows in the edge bin than places left: the best by value, then ``last``
        edge = edge[np.argsort(last[edge], kind="mergesort")]
        edge = edge[np.argsort(-values[edge], kind="mergesort")]
    out[j:] = edge[: k - j]
    return out


@_kernel()
def _sorted_rows(keys, last, k):
    """The k rows of ``keys`` that rank first, in rank order (keys descending, ``last`` ascending).

    Up to a few hundred rows, each row's place by the first key is counted: how many rows have a
    larger one (a comparison loop the compiler vectorizes, with no branch to mispredict, where a
    sort of rows in random order mispredicts about every other comparison). Longer lists are
    sorted. Either way each run of equal first keys is then put in order by all keys.
    """
    m = keys.shape[1]
    if m > 256:
        order = np.argsort(-keys[0])  # the first key descending; within a run of ties, any order yet
    else:
        first = keys[0]
        above = np.empty(m, dtype=np.int64)  # rows whose first key is larger: where its run starts
        placed = np.zeros(m, dtype=np.int64)  # rows placed so far in the run starting there
        for i in range(m):
            value = first[i]
            larger = 0
            for j in range(m):
                larger += first[j] > value
            above[i] = larger
        order = np.empty(m, dtype=np.int64)
        for i in range(m):
            order[above[i] + placed[above[i]]] = i
            placed[above[i]] += 1
    _order_runs(order, keys, last, k)
    return order[:k]


@_kernel()
def _order_runs(order, keys, last, k):
    """Put each run of equal first keys among ``order``'s first k rows in order by all keys
    (insertion sort for a short run, stable sorts key by key for a long one: ties of the
    untouched documents)."""
    m = order.size
    i = 0
    while i < min(k, m):
        j = i + 1
        while j < m and keys[0, order[j]] == keys[0, order[i]]:
            j += 1
        if j - i > 32:
            run = order[i:j].copy()
            run = run[np.argsort(last[run], kind="mergesort")]
            for row in range(keys.shape[0] - 1, 0, -1):
                run = run[np.argsort(-keys[row, run], kind="mergesort")]
            order[i:j] = run
        else:
            for a in range(i + 1, j):
                held = order[a]
                b = a - 1
                while b >= i and _before(keys, last, held, order[b]):
                    order[b + 1] = order[b]
                    b -= 1
                order[b + 1] = held
        i = j


@_kernel()
def _sorted_rows_by_sort(keys, last, k):
    """:func:`_sorted_rows` by a sort at any length (the reference the tests hold the count to)."""
    order = np.argsort(-keys[0])
    _order_runs(order, keys, last, k)
    return order[:k]


@_kernel()
def _rank_rows(rows, score, members, hits, bm25, label_sizes, n_query, id_rank, k):
    """The k of ``rows`` (a superset of the top k) in rank order, and their scores."""
    m = rows.size
    keys = np.empty((4, m))
    last = np.empty(m, dtype=np.int64)
    for j in range(m):
        d = members[rows[j]]
        keys[0, j] = score[rows[j]]
        keys[1, j] = hits[d] / label_sizes[d] if label_sizes[d] > 0 else 0.0
        keys[2, j] = hits[d] / n_query if n_query > 0 else 0.0
        keys[3, j] = bm25[d]
        last[j] = id_rank[d]
    top = _sorted_rows(keys, last, min(k, m))
    return members[rows[top]], keys[0, top]


@_kernel()
def _eq6_whole_index(
    w_indptr,
    w_postings,
    w_data,
    terms,
    x_indptr,
    x_indices,
    x_terms,
    label_sizes,
    id_rank,
    n_query,
    k,
    w_cov,
    bm25,
    hits,
):
    """:func:`eq6_top_k` over the whole index for a query whose postings cover much of it: dense
    sums, Eq. 6 for every document in one pass the compiler vectorizes (its three divisions are
    most of the work), then the rows at or above a threshold found by counting passes go on to
    the tie-break keys. The bisection starts from the range Eq. 6 can take (BM25 normalised to
    [0, 1], each coverage in [0, 1]), so no pass has to find the scores' range first. A document
    the query misses scores (0 - low) / (high - low) like every other, the value the sparse path
    gives the pool's untouched members, and falls to id order by the same keys."""
    n_docs = bm25.size
    _add_postings(w_indptr, w_postings, w_data, terms, bm25, hits)
    for c in x_terms:
        for d in x_indices[x_indptr[c] : x_indptr[c + 1]]:
            hits[d] += 1
    low, high = _low_high_nonnegative(bm25, n_docs)
    k = min(k, n_docs)
    with_cov = n_query > 0
    score = np.empty(n_docs)
    for d in range(n_docs):
        score[d] = _eq6(bm25[d], hits[d], label_sizes[d], n_query, with_cov, low, high, w_cov)
    rows = _best_rows(score, k, *_eq6_range(w_cov))
    out, scores = _rank_rows(np.arange(rows.size), score[rows], rows, hits, bm25, label_sizes, n_query, id_rank, k)
    bm25[:] = 0.0
    hits[:] = 0
    return out, scores


@_kernel()
def eq6_top_k(
    w_indptr,
    w_postings,
    w_data,
    terms,
    x_indptr,
    x_indices,
    x_terms,
    label_sizes,
    id_rank,
    by_id,
    n_query,
    k,
    pool_size,
    w_cov,
    bm25,
    hits,
    touched,
):
    """Eq. 6's top k over the pool, as ``Retriever._rescore_with_coverage`` ranks it.

    ``w_postings``: document numbers flagged where the term is in the label; ``x_*``: the label postings
    the documents' text lacks, and the query's columns of them (see :func:`_gather`).
    ``pool_size`` 0: the pool is the whole index; otherwise the BM25 top ``pool_size`` (ties by
    document order, documents without a query term after in document order). ``by_id``: the
    documents in id order (``argsort(id_rank)``). Returns document numbers and scores.
    """
    n_docs = bm25.size
    if pool_size == 0 and n_docs > 0 and 8 * (_postings(w_indptr, terms) + _postings(x_indptr, x_terms)) >= n_docs:
        return _eq6_whole_index(
            w_indptr,
            w_postings,
            w_data,
            terms,
            x_indptr,
            x_indices,
            x_terms,
            label_sizes,
            id_rank,
            n_query,
            k,
            w_cov,
            bm25,
            hits,
        )
    n_bm25, n_all = _gather(
        w_indptr, w_postings, w_data, terms, x_indptr, x_indices, x_terms, True, bm25, hits, touched
    )
    positive = touched[:n_bm25]

    rest = touched[:0]  # pool members without a query term, in id order
    if pool_size == 0:
        n_pool = n_docs
        members = touched[:n_all]  # the untouched members come from by_id when needed
    else:
        n_pool = min(pool_size, n_docs)
        if n_bm25 >= n_pool:
            values = np.empty(n_bm25)
            high = 0.0
            for i in range(n_bm25):
                value = bm25[positive[i]]
                values[i] = value
                high = max(high, value)
            members = positive[_top_set(values, positive, n_pool, high)]
        else:  # every positive, then the first documents without BM25 score in document order
            zeros = np.empty(n_pool - n_bm25, dtype=touched.dtype)
            filled = 0
            d = 0
            while filled < zeros.size:
                if bm25[d] == 0.0:
                    zeros[filled] = d
                    filled += 1
                d += 1
            members = np.concatenate((positive, zeros[hits[zeros] > 0]))
            rest = zeros[hits[zeros] == 0]
            rest = rest[np.argsort(id_rank[rest], kind="mergesort")]

    n = members.size
    raw = np.empty(n)  # the members' BM25, label hits and label sizes side by side: Eq. 6 then
    hit = np.empty(n, dtype=np.uint16)  # runs over contiguous arrays (vectorized) instead of
    size = np.empty(n)  # gathering three values a member from index-sized arrays
    for i in range(n):
        d = members[i]
        raw[i] = bm25[d]
        hit[i] = hits[d]
        size[i] = label_sizes[d]
    low = 0.0
    high = 0.0
    if n > 0:
        low, high = _low_high_nonnegative(raw, n)
    if n < n_pool:  # the pool holds documents of BM25 score 0
        low = min(low, 0.0)
        high = max(high, 0.0)
    with_cov = n_query > 0  # an empty query covers nothing (and divides by nothing)
    score = np.empty(n)
    for i in range(n):
        score[i] = _eq6(raw[i], hit[i], size[i], n_query, with_cov, low, high, w_cov)
    k = min(k, n_pool)
    rows = _best_rows(score, k, *_eq6_range(w_cov))
    ranked, ranked_scores = _rank_rows(rows, score, members, hits, bm25, label_sizes, n_query, id_rank, k)
    out = np.empty(k, dtype=np.int64)
    scores = np.empty(k)
    out[: ranked.size] = ranked
    scores[: ranked.size] = ranked_scores
    filled = ranked.size
    if filled < k:
        # Pool members without a query term: BM25 0, coverage 0, all one score below every
        # touched member's, so they follow in id order.
        bm25_hat = (0.0 - low) / (high - low) if high > low else 1.0
        scores[filled:] = bm25_hat + w_cov * (0.0 + 0.0)
        if pool_size == 0:
            i = 0
            while filled < k:
                d = by_id[i]
                if bm25[d] == 0.0 and hits[d] == 0:
                    out[filled] = d
                    filled += 1
                i += 1
        else:
            out[filled:] = rest[: k - filled]
    _reset(touched, n_all, bm25, hits)
    return out, scores


@_kernel()
def bm25_top_k_many(indptr, indices, data, terms, term_ends, k, sums, hits, touched):
    """:func:`bm25_top_k` for many queries in one call: query ``q``'s terms are
    ``terms[term_ends[q - 1]:term_ends[q]]``. Rows of documents and of scores, one per query."""
    k = min(k, sums.size)
    out = np.empty((term_ends.size, k), dtype=np.int64)
    scores = np.empty((term_ends.size, k))
    start = 0
    for q in range(term_ends.size):
        out[q], scores[q] = bm25_top_k(indptr, indices, data, terms[start : term_ends[q]], k, sums, hits, touched)
        start = term_ends[q]
    return out, scores


@_kernel()
def eq6_top_k_many(
    w_indptr,
    w_postings,
    w_data,
    terms,
    term_ends,
    x_indptr,
    x_indices,
    x_terms,
    x_ends,
    label_sizes,
    id_rank,
    by_id,
    n_query,
    k,
    pool_size,
    w_cov,
    bm25,
    hits,
    touched,
):
    """:func:`eq6_top_k` for many queries in one call (terms and label terms cut as in
    :func:`bm25_top_k_many`; ``n_query`` per query). Rows of documents and of scores."""
    n_pool = bm25.size if pool_size == 0 else min(pool_size, bm25.size)
    k = min(k, n_pool)
    out = np.empty((term_ends.size, k), dtype=np.int64)
    scores = np.empty((term_ends.size, k))
    start = x_start = 0
    for q in range(term_ends.size):
        out[q], scores[q] = eq6_top_k(
            w_indptr,
            w_postings,
            w_data,
            terms[start : term_ends[q]],
            x_indptr,
            x_indices,
            x_terms[x_start : x_ends[q]],
            label_sizes,
            id_rank,
            by_id,
            n_query[q],
            k,
            pool_size,
            w_cov,
            bm25,
            hits,
            touched,
        )
        start, x_start = term_ends[q], x_ends[q]
    return out, scores
