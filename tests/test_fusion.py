"""Summed / mean RRF, truncation ties and range normalisation; expected values written as formulas."""

import pytest

from fhs.retrieval.bm25 import Ranking
from fhs.retrieval.fusion import fuse, range_normalize, rrf_terms


def ranking(*ids):
    return Ranking(ids=tuple(ids), scores=tuple(float(len(ids) - i) for i in range(len(ids))))


A = ranking("a", "b", "c")
B = ranking("b", "d")


def test_summed_rrf_sums_only_over_rankings_that_contain_the_candidate():
    pool = fuse([A, B], kappa=60, k=10, normalize=False)
    expected = {
        "a": 1 / (60 + 1),
        "b": 1 / (60 + 2) + 1 / (60 + 1),
        "c": 1 / (60 + 3),
        "d": 1 / (60 + 2),
    }
    assert dict(zip(pool.ids, pool.scores)) == pytest.approx(expected)
    assert pool.ids == ("b", "a", "d", "c")  # 1/62 > 1/63
    assert pool.contributions[0] == ((0, 2), (1, 1))
    assert pool.union_size == 4


def test_mean_rrf_divides_by_the_number_of_containing_rankings():
    pool = fuse([A, B], kappa=60, k=10, method="mean", normalize=False)
    scores = dict(zip(pool.ids, pool.scores))
    assert scores["b"] == pytest.approx((1 / 62 + 1 / 61) / 2)
    assert scores["a"] == pytest.approx(1 / 61)
    assert pool.ids[0] == "a"  # a single rank-1 beats the average of ranks 1 and 2


def test_ties_break_on_best_single_rank_then_id():
    # x: ranks 1 and 3 in two lists; y: rank 2 twice. S(x) != S(y) in general, so build exact ties:
    # p appears only in list 0 at rank 2, q only in list 1 at rank 2 -> same score, same best rank -> id order.
    first = ranking("x", "q")
    second = ranking("y", "p")
    pool = fuse([first, second], k=10, normalize=False)
    assert pool.ids == ("x", "y", "p", "q")


def test_truncation_keeps_the_top_k_and_normalises_over_the_union_by_default():
    long = ranking(*[f"c{i:02d}" for i in range(10)])
    pool = fuse([long], k=3)
    assert pool.ids == ("c00", "c01", "c02")
    low, high = 1 / (60 + 10), 1 / (60 + 1)
    assert pool.normalized == pytest.approx(tuple((1 / (60 + r) - low) / (high - low) for r in (1, 2, 3)))
    kept = fuse([long], k=3, normalize_over="kept")
    low = 1 / (60 + 3)
    assert kept.normalized == pytest.approx(tuple((1 / (60 + r) - low) / (high - low) for r in (1, 2, 3)))
    assert kept.normalized[-1] == 0.0


def test_range_normalisation_of_equal_scores_is_all_zero():
    assert range_normalize([0.5, 0.5]) == [0.0, 0.0]
    assert range_normalize([]) == []
    pool = fuse([ranking("only")], k=5)
    assert pool.normalized == (0.0,)


def test_duplicate_ids_within_one_ranking_count_once():
    terms = rrf_terms([ranking("a", "a", "b")])
    assert terms["a"] == [(0, 1)]
    assert terms["b"] == [(0, 3)]


def test_empty_input_gives_an_empty_pool():
    pool = fuse([], k=5)
    assert len(pool) == 0 and pool.union_size == 0


def test_bad_method_is_rejected():
    with pytest.raises(ValueError):
        fuse([A], method="max")
    with pytest.raises(ValueError, match="ties"):
        fuse([A], ties="random")


def test_the_two_tie_rules_differ_only_on_equal_scores():
    """FHS's pool breaks equal fused scores by the best single-list rank, the hybrid's by id (the authors'
    fusion and hybrid code); with ``k`` None every candidate is kept, as the hybrid keeps them."""
    lists = [Ranking(("m", "z", "b"), (3.0, 2.0, 1.0)), Ranking(("z", "b", "m"), (3.0, 2.0, 1.0)),
             Ranking(("q", "a"), (2.0, 1.0)), Ranking(("a", "q"), (2.0, 1.0))]
    by_rank, by_id = fuse(lists, k=None), fuse(lists, k=None, ties="id")
    assert by_rank.scores == by_id.scores and sorted(by_rank.ids) == sorted(by_id.ids)
    # z (ranks 2, 1) and m (1, 3) differ in score; a and q tie exactly (ranks 2, 1 and 1, 2)
    assert by_id.ids.index("a") < by_id.ids.index("q")
    assert [c for c in by_rank.ids if c in "aq"] == ["a", "q"]  # equal best rank too: id decides
    assert len(fuse(lists, k=None)) == by_rank.union_size == 5


@pytest.mark.slow
def test_summed_rrf_matches_ranx_on_random_runs():
    """Independent reference: ranx's RRF (sum over the runs that contain a doc) on the same lists."""
    ranx = pytest.importorskip("ranx")
    import random

    rng = random.Random(7)
    docs = [f"d{i}" for i in range(40)]
    rankings = [Ranking(ids=tuple(rng.sample(docs, 25)), scores=tuple(float(25 - i) for i in range(25)))
                for _ in range(4)]
    ours = fuse(rankings, kappa=60, k=200, normalize=False)
    runs = [ranx.Run({"q": dict(zip(r.ids, r.scores))}) for r in rankings]
    theirs = ranx.fuse(runs, method="rrf", params={"k": 60}, norm=None).to_dict()["q"]
    assert set(ours.ids) == set(theirs)
    for cid, score in zip(ours.ids, ours.scores):
        assert score == pytest.approx(theirs[cid], abs=1e-12)
