"""The fast scorer against rank_bm25 on the same formula, and Eq. 6 by hand."""

import math
import random

import numpy as np
import pytest

from fhs.bench.retrieval import reference_bm25, reference_top_k
from fhs.core.text import tokenize
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.retrieval.bm25 import BM25Index, Ranking, RetrievalConfig, Retriever, top_k_order

# Scores are sums of a few float64 products; both implementations compute the
# same terms in a different order, so they agree to rounding.
SCORE_TOLERANCE = 1e-9


def random_corpus(seed: int, n_docs: int, vocab: int = 60):
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    return [[rng.choice(words[: rng.randint(5, vocab)]) for _ in range(rng.randint(1, 25))] for _ in range(n_docs)]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_scores_match_rank_bm25_with_the_paper_idf(seed):
    docs = random_corpus(seed, 300)
    ours = BM25Index(docs)
    reference = reference_bm25(docs)
    rng = random.Random(100 + seed)
    for _ in range(40):
        query = {f"w{rng.randrange(70)}" for _ in range(rng.randint(1, 8))}  # some unknown words
        expected = np.asarray(reference.get_scores(sorted(query)))
        assert np.allclose(ours.scores(query), expected, rtol=0, atol=SCORE_TOLERANCE)
        assert list(top_k_order(ours.scores(query), 200)) == reference_top_k(reference, query, 200)


def test_bm25_by_hand():
    docs = [["a", "b"], ["a"], ["c", "c", "d"]]
    index = BM25Index(docs, k1=1.5, b=0.75)
    n, avgdl = 3, 2.0
    idf_a = math.log(1 + (n - 2 + 0.5) / (2 + 0.5))
    # doc 0 has tf(a) = 1 and length 2 = avgdl
    expected_doc0 = idf_a * 1 * 2.5 / (1 + 1.5 * (1 - 0.75 + 0.75 * 2 / avgdl))
    expected_doc1 = idf_a * 1 * 2.5 / (1 + 1.5 * (1 - 0.75 + 0.75 * 1 / avgdl))
    scores = index.scores({"a"})
    assert scores[0] == pytest.approx(expected_doc0)
    assert scores[1] == pytest.approx(expected_doc1)
    assert scores[2] == 0.0
    # a repeated query term counts once: the query is a set
    assert np.allclose(index.scores(["a", "a"]), scores)


def test_top_k_breaks_ties_by_document_order():
    scores = np.array([1.0, 3.0, 3.0, 0.0, 3.0, 2.0])
    assert list(top_k_order(scores, 4)) == [1, 2, 4, 5]
    assert list(top_k_order(scores, 10)) == [1, 2, 4, 5, 0, 3]


def tiny_taxonomy():
    return Taxonomy.from_concepts(
        "tiny",
        [
            Concept("Revenues", "Revenues", "Amount of revenue recognized from goods sold and services rendered.", "monetaryItemType"),
            Concept("RevenueFromContractWithCustomerExcludingAssessedTax", "Revenue From Contract With Customer Excluding Assessed Tax",
                    "Amount of revenue from satisfaction of performance obligation by transferring promised goods or services to customers.", "monetaryItemType"),
            Concept("CostOfRevenue", "Cost Of Revenue", "The aggregate cost of goods produced and sold and services rendered.", "monetaryItemType"),
            Concept("EarningsPerShareBasic", "Earnings Per Share Basic", "Net income per share.", "perShareItemType"),
        ],
    )


def test_coverage_terms_by_hand():
    taxonomy = tiny_taxonomy()
    retriever = Retriever(taxonomy, RetrievalConfig(w_cov=1.0))
    part = retriever.partition_for("monetaryItemType")
    query = set(tokenize("total revenues"))  # {"total", "revenue"}
    cov_label, cov_query = Retriever.coverage(part, query, np.arange(3))
    # Revenues: L = {revenue} -> |Q∩L|/|L| = 1/1, |Q∩L|/|Q| = 1/2
    # Revenue From Contract ... : L = {revenuefromcontract..., revenue, contract, customer, excluding, assessed, tax}
    long_label = set(tokenize("Revenue From Contract With Customer Excluding Assessed Tax"))
    # Cost Of Revenue: L = {cost, revenue} ("of" is a stopword)
    assert len(long_label) == 7
    assert list(cov_label) == pytest.approx([1 / 1, 1 / 7, 1 / 2])
    assert list(cov_query) == pytest.approx([1 / 2, 1 / 2, 1 / 2])


def test_eq6_score_is_normalised_bm25_plus_coverage():
    taxonomy = tiny_taxonomy()
    retriever = Retriever(taxonomy, RetrievalConfig(w_cov=1.0))
    query = "total revenues"
    ranking = retriever.search(query, "monetaryItemType")
    part = retriever.partition_for("monetaryItemType")
    tokens = set(tokenize(query))
    bm25 = part.index.scores(tokens)
    bm25_hat = (bm25 - bm25.min()) / (bm25.max() - bm25.min())
    cov_label, cov_query = Retriever.coverage(part, tokens, np.arange(3))
    expected = {part.ids[i]: bm25_hat[i] + cov_label[i] + cov_query[i] for i in range(3)}
    assert dict(zip(ranking.ids, ranking.scores)) == pytest.approx(expected)
    assert ranking.ids[0] == "Revenues"  # the short label wins once coverage is on
    assert list(ranking.scores) == sorted(ranking.scores, reverse=True)


def test_datatype_filter_and_global_fallback():
    taxonomy = tiny_taxonomy()
    retriever = Retriever(taxonomy, RetrievalConfig(w_cov=1.0))
    assert retriever.search("earnings per share", "perShareItemType").ids == ("EarningsPerShareBasic",)
    assert set(retriever.search("revenue", "monetaryItemType").ids) == {
        "Revenues", "RevenueFromContractWithCustomerExcludingAssessedTax", "CostOfRevenue"}
    # an unknown datatype searches everything
    assert len(retriever.search("revenue", "stringItemType").ids) == 4
    assert len(Retriever(taxonomy, RetrievalConfig(type_filter=False)).search("revenue", "monetaryItemType").ids) == 4


def test_pool_multiplier_limits_rescoring_to_the_bm25_head():
    taxonomy = tiny_taxonomy()
    retriever = Retriever(taxonomy, RetrievalConfig(w_cov=1.0, top_k=1, pool_multiplier=2, type_filter=False))
    part = retriever.partition_for(None)
    bm25 = part.index.scores(set(tokenize("cost of revenue")))
    head = {part.ids[i] for i in top_k_order(bm25, 2)}
    assert set(retriever.search("cost of revenue").ids) <= head


def test_without_coverage_the_ranking_is_plain_bm25():
    taxonomy = tiny_taxonomy()
    retriever = Retriever(taxonomy, RetrievalConfig(w_cov=0.0))
    part = retriever.partition_for("monetaryItemType")
    bm25 = part.index.scores(set(tokenize("goods sold")))
    assert retriever.search("goods sold", "monetaryItemType").ids == tuple(part.ids[i] for i in top_k_order(bm25, 200))


def test_top_k_agrees_with_a_full_sort_whatever_the_number_of_zeros():
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 60))
        scores = np.where(rng.random(n) < rng.random(), 0.0, rng.integers(0, 4, size=n).astype(float))
        k = int(rng.integers(1, 80))
        expected = sorted(range(n), key=lambda i: (-scores[i], i))[:k]
        assert list(top_k_order(scores, k)) == expected


def test_column_sums_equal_scipys_slice_sums_bit_for_bit():
    from scipy import sparse

    from fhs.retrieval.bm25 import column_sums

    rng = np.random.default_rng(11)
    matrix = sparse.random(400, 90, density=0.08, format="csc", random_state=3, data_rvs=rng.random)
    for _ in range(100):
        columns = np.unique(rng.integers(0, 90, size=int(rng.integers(1, 12))))
        expected = np.asarray(matrix[:, columns].sum(axis=1)).ravel()
        assert np.array_equal(column_sums(matrix, columns), expected)  # same additions, same order


@pytest.mark.parametrize("seed", [0, 1])
def test_coverage_rescoring_sorts_only_the_head_yet_equals_a_full_sort(seed):
    """Eq. 6 over the whole index: the order must be the five-key sort of every document."""
    rng = random.Random(seed)
    docs = random_corpus(seed, 500, vocab=30)  # a small vocabulary: many tied scores
    concepts = [Concept(id=f"c{i:03d}", label=" ".join(d[:3]), datatype="t", definition=" ".join(d))
                for i, d in enumerate(docs)]
    retriever = Retriever(Taxonomy("toy", concepts), RetrievalConfig(top_k=20))
    for _ in range(30):
        query = " ".join(rng.choice(docs[rng.randrange(500)]) for _ in range(rng.randint(1, 5)))
        part = retriever.partition_for("t")
        tokens = set(tokenize(query))
        bm25 = part.index.scores(tokens)
        low, high = bm25.min(), bm25.max()
        hat = (bm25 - low) / (high - low) if high > low else np.ones_like(bm25)
        cov_label, cov_query = Retriever.coverage(part, tokens, np.arange(bm25.size))
        score = hat + cov_label + cov_query
        full = np.lexsort((part.id_rank, -bm25, -cov_query, -cov_label, -score))[:20]
        assert retriever.search(query, "t").ids == tuple(part.ids[i] for i in full)


@pytest.mark.data
@pytest.mark.slow
def test_the_retrieval_bench_compares_the_same_lists_with_bm25s_and_rank_bm25():
    """`fhs bench retrieval`'s side-by-side run on real data: every scorer timed, and every list of
    ours equal to the reference's (rank-bm25), to bm25s's up to float32 ties, and the deployed
    search's to the numpy scorer's. Speeds are printed, never asserted."""
    from fhs.bench.retrieval import bench_retrieval

    report = bench_retrieval("fincl", limit=300, n_queries=60, n_reference=5, repeats=1)
    for key in ("qps_deployed", "qps_deployed_batched", "qps_bm25", "qps_bm25s_numba", "qps_bm25s_numpy",
                "qps_rank_bm25"):
        assert report[key] > 0, key
    assert report["top200_deployed_equal_numpy_scorer"] == 1.0
    assert report["top200_bm25_equal_rank_bm25"] == 1.0
    assert report["top200_bm25_equal_bm25s_up_to_ties"] == 1.0


def test_a_ranking_given_a_numpy_row_reads_as_the_tuple_of_floats_it_stands_for():
    import pickle

    row = np.array([2.5, 1.0, 0.25])
    lazy, eager = Ranking(("a", "b", "c"), row), Ranking(("a", "b", "c"), (2.5, 1.0, 0.25))
    assert lazy == eager and hash(lazy) == hash(eager) and repr(lazy) == repr(eager)
    assert type(lazy.scores) is tuple and all(type(s) is float for s in lazy.scores)
    assert pickle.loads(pickle.dumps(Ranking(("a",), np.array([1.0])))) == Ranking(("a",), (1.0,))
    with pytest.raises(AttributeError, match="immutable"):
        lazy.ids = ("z",)
