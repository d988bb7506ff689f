"""Metrics by hand and against ranx; the clustered bootstrap against a slow loop."""

import numpy as np
import pytest

from fhs.run.evaluate import (
    clustered_bootstrap,
    gold_rank,
    metric_interval,
    metrics,
    paired_difference,
    per_fact,
    rank_metrics,
    recall_curve,
)


def test_gold_rank_takes_the_first_of_several_golds():
    assert gold_rank(["x", "b", "a"], ["a", "b"]) == 2
    assert gold_rank(["x"], ["a"]) is None


def test_summary_by_hand():
    ranks = [1, 3, 12, None, 60]
    result = rank_metrics(ranks)
    assert result["recall@1"] == pytest.approx(1 / 5)
    assert result["recall@10"] == pytest.approx(2 / 5)
    assert result["recall@50"] == pytest.approx(3 / 5)
    assert result["recall@200"] == pytest.approx(4 / 5)
    assert result["mrr"] == pytest.approx((1 + 1 / 3 + 1 / 12 + 0 + 1 / 60) / 5)


def test_metrics_split_by_modality():
    records = [
        {"rank": 1, "modality": "table", "context_id": "a"},
        {"rank": None, "modality": "text", "context_id": "b"},
    ]
    result = metrics(records)
    assert result["by_modality"]["table"]["recall@1"] == 1.0
    assert result["by_modality"]["text"]["mrr"] == 0.0
    assert result["n_facts"] == 2


def test_metrics_agree_with_ranx():
    import ranx  # a test dependency: fail loudly if it is missing
    rng = np.random.default_rng(7)
    concepts = [f"c{i}" for i in range(400)]
    qrels, run, records = {}, {}, []
    for q in range(120):
        golds = list(rng.choice(concepts, size=rng.integers(1, 3), replace=False))
        ranking = list(rng.choice(concepts, size=200, replace=False))
        qrels[f"q{q}"] = {g: 1 for g in golds}
        run[f"q{q}"] = {c: float(200 - i) for i, c in enumerate(ranking)}
        records.append({"rank": gold_rank(ranking, golds), "modality": "table", "context_id": f"ctx{q % 30}"})
    ours = metrics(records)
    theirs = ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), ["hit_rate@1", "hit_rate@10", "hit_rate@50", "hit_rate@200", "mrr@200"])
    for k in (1, 10, 50, 200):
        assert ours[f"recall@{k}"] == pytest.approx(theirs[f"hit_rate@{k}"])
    assert ours["mrr"] == pytest.approx(theirs["mrr@200"])


def slow_bootstrap(values, clusters, resamples, seed):
    """The same procedure written as a loop over resamples and contexts."""
    names = sorted(set(clusters))
    members = {name: [v for v, c in zip(values, clusters) if c == name] for name in names}
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(names), size=(resamples, len(names)))
    stats = []
    for row in draws:
        total, count = 0.0, 0
        for index in row:
            total += sum(members[names[index]])
            count += len(members[names[index]])
        stats.append(total / count)
    return np.percentile(stats, [2.5, 97.5])


def test_clustered_bootstrap_matches_a_slow_loop():
    rng = np.random.default_rng(3)
    clusters = [f"k{int(i)}" for i in rng.integers(0, 25, size=300)]
    values = rng.random(300).round().tolist()
    interval = clustered_bootstrap(values, clusters, resamples=500, seed=11)
    low, high = slow_bootstrap(values, clusters, 500, 11)
    assert (interval.low, interval.high) == pytest.approx((low, high))
    assert interval.estimate == pytest.approx(np.mean(values))
    assert interval.low <= interval.estimate <= interval.high


def test_clustering_widens_the_interval_when_facts_in_a_context_agree():
    # 20 contexts of 10 identical facts each: effectively 20 observations, not 200
    values = [float(i % 2) for i in range(20) for _ in range(10)]
    clustered = clustered_bootstrap(values, [str(i) for i in range(20) for _ in range(10)])
    independent = clustered_bootstrap(values, [str(i) for i in range(200)])
    assert (clustered.high - clustered.low) > 2 * (independent.high - independent.low)


def test_paired_difference_of_a_run_with_itself_is_zero():
    records = [{"id": str(i), "rank": (i % 7) or None, "context_id": str(i % 5)} for i in range(50)]
    diff = paired_difference(records, records, "mrr")
    assert (diff.estimate, diff.low, diff.high) == (0.0, 0.0, 0.0)
    better = [{**r, "rank": 1} for r in records]
    gain = paired_difference(better, records, "recall@1")
    assert gain.low > 0
    assert metric_interval(better, "recall@1").estimate == 1.0


def test_recall_curve_is_cumulative_recall():
    ranks = [1, 3, 3, None, 200]
    curve = recall_curve(ranks, depth=200)
    assert curve[0] == pytest.approx(1 / 5)
    assert curve[2] == pytest.approx(3 / 5)
    assert curve[199] == pytest.approx(4 / 5)


def test_accuracy_reads_the_selector_verdict_when_there_is_one():
    records = [{"id": "a", "rank": 3, "correct": True, "context_id": "x"},
               {"id": "b", "rank": 1, "correct": False, "context_id": "y"},
               {"id": "c", "rank": 1, "context_id": "z"}]  # no selector: accuracy = recall@1
    assert metric_interval(records, "accuracy", resamples=50).estimate == pytest.approx(2 / 3)


def test_one_accuracy_definition_with_its_basis():
    from fhs.run.evaluate import accuracy, accuracy_basis, metrics

    judged = [{"id": "a", "rank": 2, "correct": True, "context_id": "x", "modality": "text"},
              {"id": "b", "rank": 1, "correct": False, "context_id": "y", "modality": "table"}]
    plain = [{"id": "c", "rank": 1, "context_id": "z", "modality": "text"},
             {"id": "d", "rank": 3, "context_id": "z", "modality": "text"}]
    assert accuracy(judged) == 0.5 and accuracy_basis(judged) == "selector"
    assert accuracy(plain) == 0.5 and accuracy_basis(plain) == "rank-1"
    assert accuracy_basis(judged + plain) == "mixed" and accuracy(judged + plain) == 0.5
    block = metrics(judged)
    assert (block["accuracy"], block["accuracy_basis"]) == (0.5, "selector")
    assert block["by_modality"]["table"]["accuracy"] == 0.0
    # the interval reads the same per-record values as the point estimate
    assert metric_interval(judged + plain, "accuracy", resamples=50).estimate == accuracy(judged + plain)


def test_runs_estimate_takes_point_interval_and_std_from_the_same_runs():
    from fhs.run.evaluate import runs_estimate

    def run(hits):
        return [{"id": f"f{i}", "context_id": f"c{i // 2}", "rank": 1 if hit else 5} for i, hit in enumerate(hits)]

    runs = [run([1, 1, 0, 0]), run([1, 0, 0, 0]), run([1, 1, 1, 0])]
    e = runs_estimate(runs, "recall@1", resamples=200)
    assert e.per_run == (0.5, 0.25, 0.75)
    assert e.estimate == pytest.approx(0.5) and e.low <= e.estimate <= e.high
    assert e.std == pytest.approx(0.25)  # sample std (ddof 1) of 0.5, 0.25, 0.75
    single = runs_estimate(runs[:1], "recall@1", resamples=200)
    assert single.std is None and single.estimate == 0.5
    assert "±" in str(e) and "±" not in str(single)
    # a fact missing from one run is left out of every run
    assert runs_estimate([runs[0], runs[1][:3]], "recall@1", resamples=50).per_run == (2 / 3, 1 / 3)
