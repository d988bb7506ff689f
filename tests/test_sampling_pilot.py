"""Table 11 over synthetic records of both arms: same renderings, per-hypothesis recall, overlap, consolidation."""

import json

import pytest

from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.method.fhs import run_fhs_fact
from fhs.method.registry import METHODS
from fhs.run.evaluate import gold_rank
from fhs.run.tables.sampling_pilot import arm_summary, fused_top, hypothesis_lists, sampling_pilot, shared_renderings
from scripted_llm import OverlapRetriever, ScriptedLLM
from test_pipeline import DOMAIN, FACT, TAXONOMY, scripted


def fhs_record(fid, modality, lists, gold="g"):
    """FHS's layout: parallel queries (hypothesis index, rendering) and rankings."""
    queries = [{"hypothesis_index": j, "rendering": name, "text": "q"} for j, name, _ in lists]
    return {"id": fid, "context_id": fid, "modality": modality, "gold": [gold], "method": "fhs",
            "queries": queries, "rankings": [ids for _, _, ids in lists], "pool": {"ids": []}}


def diverse_record(fid, modality, rounds, gold="g"):
    """parallel-diverse's layout: per sample the non-empty query fields, label first, each with its ranking."""
    out = []
    for j, (label, definition) in enumerate(rounds):
        fields = {"label_query": "lab" if label is not None else "", "definition_query": "def" if definition is not None else ""}
        queries = [{"query": "q", "source": "model", "ranking": ids} for ids in (label, definition) if ids is not None]
        out.append({"sample": j, "source": "model", "grounding": "g", **fields, "queries": queries})
    return {"id": fid, "context_id": fid, "modality": modality, "gold": [gold], "method": "parallel-diverse",
            "rounds": out, "pool": {"ids": []}}


def test_both_arms_are_read_over_fhs_renderings():
    assert shared_renderings("table", FHSConfig()) == ("label", "definition")
    assert shared_renderings("text", FHSConfig()) == ("definition",)
    assert shared_renderings("text", FHSConfig(label_on_text=True)) == ("label", "definition")
    diverse = diverse_record("x", "text", [(["g"], ["a"])])
    assert hypothesis_lists(diverse) == {0: [("label", ["g"]), ("definition", ["a"])]}
    # on text only the definition list counts: the gold found by the label query alone is a miss
    summary = arm_summary([diverse], depth=5)
    assert summary["lists_per_fact"] == 1 and summary["per_hypothesis_recall@5"] == 0.0
    assert arm_summary([diverse_record("x", "table", [(["g"], ["a"])])], depth=5)["lists_per_fact"] == 2


def test_identical_hypotheses_overlap_fully_and_disjoint_ones_not_at_all():
    same = fhs_record("a", "text", [(0, "definition", ["g", "b"]), (1, "definition", ["g", "b"])])
    apart = fhs_record("b", "text", [(0, "definition", ["g", "b"]), (1, "definition", ["c", "d"])])
    assert arm_summary([same], depth=2)["overlap"] == 1.0
    summary = arm_summary([apart], depth=2)
    assert summary["overlap"] == 0.0 and summary["accumulated_pool"] == 4
    assert summary["hypothesis0_recall@2"] == 1.0 and summary["hypothesis1_recall@2"] == 0.0
    assert summary["per_hypothesis_recall@2"] == 0.5


def test_consolidation_loss_is_coverage_minus_the_fused_pool():
    # depth 2: the gold is second in one list; fusion keeps the two first-ranked candidates
    lost = fhs_record("a", "text", [(0, "definition", ["a", "g"]), (1, "definition", ["b", "c"])])
    kept = fhs_record("b", "text", [(0, "definition", ["g", "a"]), (1, "definition", ["b", "c"])])
    summary = arm_summary([lost, kept], depth=2)
    assert summary["coverage@2"] == 1.0 and summary["pool_recall@2"] == 0.5
    assert summary["consolidation_loss"] == pytest.approx(0.5)


def test_refused_facts_are_counted_and_miss():
    refused = {"id": "r", "context_id": "r", "modality": "table", "gold": ["g"], "failed": "refused", "ranking": []}
    summary = arm_summary([fhs_record("a", "table", [(0, "definition", ["g"])]), refused], depth=5)
    assert summary["facts"] == 2 and summary["refused"] == 1 and summary["coverage@5"] == 0.5


def test_the_recomputed_pool_of_an_fhs_record_is_its_own_pool():
    stage = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), scripted(), DOMAIN, TAXONOMY, FHSConfig(selector=False))
    record = {**stage, "id": FACT.id, "gold": list(FACT.gold)}
    every = [ids for lists in hypothesis_lists(record).values() for _, ids in lists]
    assert fused_top(every, 200) == record["pool"]["ids"]
    assert arm_summary([record])["pool_recall@200"] == float(gold_rank(record["pool"]["ids"], FACT.gold) is not None)


def test_sampling_pilot_pairs_the_arms_on_shared_facts_with_both_real_layouts():
    fhs = {**run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), scripted(), DOMAIN, TAXONOMY, FHSConfig(selector=False)),
           "id": FACT.id, "gold": list(FACT.gold)}
    replies = [json.dumps({"grounding": "Nonvested awards", "label_query": "Nonvested Number",
                           "definition_query": "Number of nonvested equity instruments other than options"}),
               json.dumps({"grounding": "Treasury", "label_query": "Treasury Stock Shares",
                           "definition_query": "Shares held in treasury"})]
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=ScriptedLLM(
        {"parallel-diverse": replies}), domain=DOMAIN, config=FHSConfig(selector=False))
    diverse = {**METHODS["parallel-diverse"](FACT, ctx), "id": FACT.id, "gold": list(FACT.gold), "modality": "table"}
    extra = {**diverse, "id": "only-in-one-arm"}
    table = sampling_pilot([fhs], [diverse, extra])
    assert table["facts"] == 1 and table["arms"]["diverse"]["facts"] == 1
    assert table["arms"]["factorized"]["lists_per_fact"] == table["arms"]["diverse"]["lists_per_fact"] == 4
    factorized, forced = table["arms"]["factorized"], table["arms"]["diverse"]
    assert table["difference"]["per_hypothesis_recall_drop"] == pytest.approx(
        factorized["per_hypothesis_recall@200"] - forced["per_hypothesis_recall@200"])
    assert 0.0 <= factorized["overlap"] <= 1.0 and 0.0 <= forced["overlap"] <= 1.0
