"""The compiled search against the numpy scorer it replaced: the same lists, the same score bits."""

import random
from dataclasses import replace

import pytest

from fhs.data.evidence import direct_query
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.retrieval.bm25 import RetrievalConfig, Retriever
from fhs.retrieval.sparse_top_k import MAX_LABEL_WORDS
from fhs.run.inputs import load_experiment


def assert_same(retriever: Retriever, query: str, datatype, top_k=None):
    fast, slow = retriever.search(query, datatype, top_k), retriever.search_numpy(query, datatype, top_k)
    assert fast.ids == slow.ids, query
    assert fast.scores == slow.scores, query  # Python floats compared exactly: the same bits


def toy_taxonomy(seed: int, n: int, vocab: int) -> Taxonomy:
    rng = random.Random(seed)
    words = [f"w{i}" for i in range(vocab)]
    concepts = []
    for i in range(n):
        doc = [rng.choice(words) for _ in range(rng.randint(1, 12))]
        label = " ".join(doc[: rng.randint(0, 3)]) or ("" if i % 7 else "")
        # the index text holds the label (Concept.index_text): with_foreign_label_words breaks that
        if i % 5 == 0:
            label = (label + " " + rng.choice(words)).strip()
        concepts.append(Concept(id=f"c{rng.randrange(10**6):06d}-{i}", label=label, datatype=rng.choice("ab"),
                                definition=" ".join(doc) if i % 5 else ""))
    return Taxonomy("toy", concepts)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("config", [
    RetrievalConfig(top_k=20),
    RetrievalConfig(top_k=20, pool_multiplier=2),
    RetrievalConfig(top_k=7, pool_multiplier=10),  # a pool larger than the index
    RetrievalConfig(top_k=500),  # k larger than the index: every document, the untouched in id order
    RetrievalConfig(top_k=20, w_cov=0.0),  # BM25 alone
    RetrievalConfig(top_k=300, w_cov=0.0),
    RetrievalConfig(top_k=20, w_cov=0.37, type_filter=False),
])
def test_the_kernels_rank_toy_indexes_as_numpy_does(seed, config):
    taxonomy = toy_taxonomy(seed, 300, vocab=25)  # a small vocabulary: many tied scores
    retriever = Retriever(taxonomy, config)
    rng = random.Random(seed)
    queries = ["", "zzz unknown", "w1", "w1 w1 w2"] + [
        " ".join(rng.choice(["w%d" % rng.randrange(30) for _ in range(8)]) for _ in range(rng.randint(1, 6)))
        for _ in range(40)]
    for query in queries:
        for datatype in ("a", "b", None):
            assert_same(retriever, query, datatype)
    assert_same(retriever, "w3 w4", "a", top_k=0)


def test_threads_do_not_share_scratch():
    from concurrent.futures import ThreadPoolExecutor

    retriever = Retriever(toy_taxonomy(9, 400, vocab=40), RetrievalConfig(top_k=30))
    queries = [f"w{i} w{(i * 7) % 40} w{(i * 3) % 40}" for i in range(200)]
    expected = [retriever.search_numpy(q, "a") for q in queries]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda q: retriever.search(q, "a"), queries)) == expected


def real_queries(experiment, n: int):
    """Direct queries of the first facts and, for each, its gold concept's own text (the oracle's kind)."""
    by_id = {c.id: c for c in experiment.taxonomy.concepts}
    for fact in experiment.facts[:n]:
        yield direct_query(fact), fact.datatype
        gold = next((by_id[g] for g in fact.gold if g in by_id), None)
        if gold is not None:
            yield f"{gold.label}. {gold.definition}", fact.datatype


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["codiesp", "fincl", "ixbrl"])
def test_every_top_200_on_the_real_data_is_the_numpy_scorers(dataset):
    experiment = load_experiment(dataset, limit=300, progress=False)
    retriever = experiment.retriever
    for query, datatype in real_queries(experiment, 300):
        assert_same(retriever, query, datatype)
    # the other pool setting on the same taxonomy
    other = Retriever(experiment.taxonomy, replace(retriever.config, pool_multiplier=0 if
                                                     retriever.config.pool_multiplier else 10))
    for query, datatype in real_queries(experiment, 100):
        assert_same(other, query, datatype)


def assert_many_same(retriever: Retriever, queries, datatypes, top_k=None):
    """search_many against one search per query (itself held to the numpy scorer above)."""
    many = retriever.search_many(queries, datatypes, top_k)
    assert len(many) == len(queries)
    for query, datatype, batched in zip(queries, datatypes, many):
        single = retriever.search(query, datatype, top_k)
        assert batched.ids == single.ids and batched.scores == single.scores, query


@pytest.mark.parametrize("config", [
    RetrievalConfig(top_k=20), RetrievalConfig(top_k=7, pool_multiplier=10), RetrievalConfig(top_k=500),
    RetrievalConfig(top_k=20, w_cov=0.0), RetrievalConfig(top_k=20, w_cov=0.37, type_filter=False)])
def test_search_many_gives_every_query_its_own_ranking(config):
    retriever = Retriever(toy_taxonomy(5, 300, vocab=25), config)
    rng = random.Random(5)
    queries = ["", "zzz unknown", "w1", "w1 w1 w2"] + [
        " ".join("w%d" % rng.randrange(30) for _ in range(rng.randint(1, 8))) for _ in range(60)]
    datatypes = [rng.choice(["a", "b", None]) for _ in queries]
    assert_many_same(retriever, queries, datatypes)
    assert_many_same(retriever, queries[:5], ["a"] * 5, top_k=0)
    assert retriever.search_many([], []) == []


@pytest.mark.data
@pytest.mark.slow
@pytest.mark.parametrize("dataset", ["codiesp", "fincl"])
def test_search_many_on_the_real_data_is_search(dataset):
    experiment = load_experiment(dataset, limit=300, progress=False)
    queries, datatypes = zip(*real_queries(experiment, 300))
    assert_many_same(experiment.retriever, list(queries), list(datatypes))


def with_foreign_label_words(retriever: Retriever, datatype: str, seed: int) -> None:
    """Give some labels of ``datatype``'s index words their document's text lacks (a taxonomy whose
    label is not part of its indexed text), so the kernels' extra label postings are used."""
    import dataclasses

    import numpy as np
    from scipy import sparse

    part = retriever.partition_for(datatype)
    rng = np.random.default_rng(seed)
    vocabulary = dict(part.label_vocabulary)
    for word in ("w3", "w11", "foreign"):
        vocabulary.setdefault(word, len(vocabulary))
    rows = rng.integers(0, part.labels.shape[0], 60)
    columns = rng.integers(0, len(vocabulary), 60)
    labels = sparse.lil_matrix((part.labels.shape[0], len(vocabulary)))
    labels[:, : part.labels.shape[1]] = part.labels
    labels[rows, columns] = 1.0
    labels = labels.tocsc()
    retriever._partitions[datatype] = dataclasses.replace(
        part, labels=labels, label_vocabulary=vocabulary, label_sizes=np.asarray(labels.sum(axis=1)).ravel())


def test_label_flags_and_extra_postings_hold_every_label_word_once():
    """Each label word of a document is counted once: by its posting's flag where the document's
    text has the word, else by the extra postings."""
    import numpy as np

    retriever = Retriever(toy_taxonomy(3, 300, vocab=25))
    with_foreign_label_words(retriever, "a", seed=3)
    part = retriever.partition_for("a")
    columns = np.repeat(np.arange(part.index.weights.shape[1]), np.diff(part.index.weights.indptr))
    terms = {i: t for t, i in part.index.vocabulary.items()}
    label_terms = {i: t for t, i in part.label_vocabulary.items()}
    flagged = {(int(d), terms[int(c)]) for d, c, f in zip(part.index.weights.indices, columns, part.postings >> 31) if f}
    extra = part.label_extra.tocoo()
    added = {(int(d), label_terms[int(c)]) for d, c in zip(extra.row, extra.col)}
    labels = part.labels.tocoo()
    expected = {(int(d), label_terms[int(c)]) for d, c in zip(labels.row, labels.col)}
    assert flagged | added == expected and not flagged & added
    assert flagged and added  # both paths are exercised


@pytest.mark.parametrize("config", [RetrievalConfig(top_k=20), RetrievalConfig(top_k=20, pool_multiplier=2),
                                    RetrievalConfig(top_k=500)])
def test_label_words_missing_from_the_text_rank_as_numpy_does(config):
    retriever = Retriever(toy_taxonomy(4, 300, vocab=25), config)
    with_foreign_label_words(retriever, "a", seed=4)
    rng = random.Random(4)
    queries = ["foreign", "w3 foreign", "zzz"] + [
        " ".join("w%d" % rng.randrange(30) for _ in range(rng.randint(1, 40))) + " foreign" * (i % 2)
        for i in range(40)]
    for query in queries:
        assert_same(retriever, query, "a")
    assert_many_same(retriever, queries, ["a"] * len(queries))


def test_query_columns_of_a_batch_are_each_querys_own():
    import numpy as np

    from fhs.retrieval.bm25 import query_columns

    vocabulary = {f"w{i}": (7 * i) % 20 for i in range(20)}
    rng = random.Random(2)
    queries = [set(), {"zzz"}] + [{f"w{rng.randrange(25)}" for _ in range(rng.randint(1, 9))} for _ in range(30)]
    columns, ends = query_columns(vocabulary, queries)
    starts = np.r_[0, ends[:-1]]
    for query, start, end in zip(queries, starts, ends):
        assert columns[start:end].tolist() == sorted(vocabulary[t] for t in query if t in vocabulary)
    assert query_columns(vocabulary, [])[0].size == 0


def test_a_label_longer_than_the_hit_counters_is_refused_by_name():
    words = " ".join(f"w{i}" for i in range(MAX_LABEL_WORDS + 1))
    taxonomy = Taxonomy("toy", [Concept(id="short", label="w1 w2", datatype="a", definition=""),
                                Concept(id="endless", label=words, datatype="a", definition="")])
    with pytest.raises(ValueError, match=r"concept 'endless': its label has 65,536 distinct words"):
        Retriever(taxonomy, RetrievalConfig(top_k=2)).search("w1", "a")


def test_rows_ranked_by_counting_come_in_the_order_a_sort_gives():
    """The counted ranks (short lists), with runs of equal first keys short and long, against the sort."""
    import numpy as np

    from fhs.retrieval.sparse_top_k import _sorted_rows, _sorted_rows_by_sort

    rng = np.random.default_rng(7)
    for trial in range(400):
        m = int(rng.integers(1, 600))
        levels = int(rng.choice([2, 10, 50, 10_000]))  # few levels: long runs of ties
        keys = np.round(rng.random((4, m)) * [[levels], [3], [3], [3]])
        last = rng.permutation(m)
        k = int(rng.integers(1, m + 1))
        assert np.array_equal(_sorted_rows(keys, last, k), _sorted_rows_by_sort(keys, last, k)), trial


def test_the_pools_top_set_is_the_one_a_sort_gives():
    """The BM25 pool's members (values descending, then ``last``): the bracket and its histogram, with
    ties at the k-th value many or none, k near the row count and far below it, against a lexsort."""
    import numpy as np

    from fhs.retrieval.sparse_top_k import _top_set

    rng = np.random.default_rng(11)
    for trial in range(600):
        n = int(rng.integers(1, 5000))
        levels = int(rng.choice([1, 3, 40, 1000, 10**9]))  # one level: every value tied
        values = np.round(rng.random(n) * levels) / levels * float(rng.choice([0.5, 7.0, 30.0]))
        if trial % 5 == 0:
            values[rng.random(n) < 0.3] = 0.0
        last = rng.permutation(n * 2)[:n]
        k = int(rng.choice([1, n, max(1, n // 7), int(rng.integers(1, n + 1))]))
        expected = np.lexsort((last, -values))[:k]
        got = _top_set(values, last, k, float(values.max()))
        assert sorted(got.tolist()) == sorted(expected.tolist()), trial
