"""Offline re-scoring reproduces the live pipeline: the same Eq. 3, from the record alone."""

import pytest

from fhs.method.config import FHSConfig
from fhs.method.fhs import run_fhs_fact
from fhs.run.evaluate import gold_rank
from fhs.run.rescore import best_of, pilot, rescore, rescored_vbar
from scripted_llm import OverlapRetriever
from test_pipeline import DIMS, DOMAIN, FACT, TAXONOMY, scripted


def record_for(**changes):
    config = FHSConfig(selector=False).replace(**changes)
    record = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), scripted(), DOMAIN, TAXONOMY, config)
    return {**record, "id": FACT.id, "context_id": FACT.context_id, "gold": list(FACT.gold),
            "ranking": record["final_ids"], "rank": gold_rank(record["final_ids"], FACT.gold)}


@pytest.mark.parametrize("beta", [0.0, 0.2, 0.6, 1.5])
@pytest.mark.parametrize("normalize", [True, False])
def test_rescoring_a_record_matches_running_the_variant(beta, normalize):
    base = record_for()
    live = record_for(beta=beta, normalize=normalize) if beta else None
    offline = rescore(base, beta=beta, normalize=normalize)
    if live is not None:
        assert offline["ranking"] == live["ranking"]
    else:
        assert offline["ranking"] == list(base["pool"]["ids"])  # beta 0: the fused order


def test_rescored_vbar_reproduces_the_recorded_one_and_strict_scoring_differs():
    base = record_for()
    paper = rescored_vbar(base, DIMS, "paper")
    assert all(paper[cid] == pytest.approx(v) for cid, v in base["verifier"]["vbar"].items())
    strict_live = record_for(scoring="strict")
    strict = rescored_vbar(base, DIMS, "strict")
    assert all(strict[cid] == pytest.approx(v) for cid, v in strict_live["verifier"]["vbar"].items())


def test_best_of_and_pilot():
    a = [{"id": "x", "rank": 5}, {"id": "y", "rank": None}]
    b = [{"id": "x", "rank": 2}, {"id": "y", "rank": 7}]
    assert [r["rank"] for r in best_of(a, b)] == [2, 7]
    stats = pilot([record_for()])
    assert stats["union_recall"] >= stats["pool_recall"] and stats["consolidation_loss"] >= 0
    assert set(stats) >= {"hypothesis0_recall", "hypothesis1_recall"}
