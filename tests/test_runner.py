"""The runner with a scripted model: malformed output and a failing model mid-run."""

from __future__ import annotations

import json

import pytest

from fhs.data.domain import load_domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.retrieval.bm25 import RetrievalConfig, Retriever
from fhs.run.records import read_records
from fhs.run.runner import run_method
from scripted_llm import ScriptedLLM

TAXONOMY = Taxonomy.from_concepts("tiny", [
    Concept("Revenues", "Revenues", "Amount of revenue recognized.", "monetaryItemType"),
    Concept("CostOfRevenue", "Cost Of Revenue", "Cost of goods and services sold.", "monetaryItemType"),
    Concept("OperatingExpenses", "Operating Expenses", "Expenses of operations.", "monetaryItemType"),
])
FACTS = [Fact(id=f"f{i}", context_id=f"c{i}", modality="table", value=str(10 + i), datatype="monetaryItemType",
              context="Total revenues 10 11 12; cost of revenue 5 6 7", gold=("Revenues",),
              row_header="Total revenues") for i in range(3)]


def context(llm) -> MethodContext:
    return MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()), llm=llm,
                         domain=load_domain("us-gaap"), config=FHSConfig.fhs(context_chars=400))


def test_malformed_output_falls_back_and_every_fact_is_recorded(tmp_path):
    garbage = ["not json at all", "{\"dimensions\": ", "```\n[1, 2\n```"]
    llm = ScriptedLLM({"hypothesis": garbage * 8, "verifier": garbage * 4, "selector": garbage * 2})
    result = run_method(FACTS[:2], "fhs", context(llm), tmp_path)
    records = read_records(tmp_path / "records.jsonl")
    assert [r["id"] for r in records] == ["f0", "f1"]
    for record in records:
        # no hypothesis parsed: the documented fallback (all UNRESOLVED, the direct query)
        assert [h["source"] for h in record["hypotheses"]] == ["fallback"]
        assert record["verifier"] is None or not any(v["parsed"] for v in record["verifier"]["verdicts"])
        assert record["selection"] is None and record["selected"] == record["ranking"][0]
        assert not any(call["parsed"] for call in record["llm_calls"])
    assert result["n_facts"] == 2 and result["llm_calls"] == len(llm.requests)


class FailsOnSecondFact(ScriptedLLM):
    def complete(self, requests):
        if any("11 monetaryItemType" in m.content or "Value: 11" in m.content
               for r in requests for m in r.messages):
            raise RuntimeError("model crashed")
        return super().complete(requests)


def test_a_failing_model_keeps_finished_records_and_the_rerun_continues(tmp_path):
    replies = {"hypothesis": ["{}"] * 12, "verifier": ["[]"] * 6, "selector": ["{}"] * 3}
    with pytest.raises(RuntimeError, match="model crashed"):
        run_method(FACTS, "fhs", context(FailsOnSecondFact(replies)), tmp_path)
    finished = read_records(tmp_path / "records.jsonl")
    assert [r["id"] for r in finished] == ["f0"]

    result = run_method(FACTS, "fhs", context(ScriptedLLM(replies)), tmp_path)
    assert result["n_new"] == 2 and result["n_facts"] == 3
    assert read_records(tmp_path / "records.jsonl")[0] == finished[0]


class AnswersByPurpose:
    """A thread-safe double: the same reply for every request of a purpose."""

    name = "by-purpose"

    def __init__(self, replies):
        self.replies = replies

    def complete(self, requests):
        from fhs.llm.contract import Response

        return [Response(text=self.replies[r.purpose], tokens_in=10, tokens_out=5, seconds=0.01) for r in requests]


def test_facts_run_in_threads_give_the_same_records(tmp_path):
    hypothesis = json.dumps({"dimensions": {"FAMILY": "Revenue", "ROLE": "Revenues", "EVENT": "UNRESOLVED",
                                            "QUALIFIER": "UNRESOLVED", "SCOPE": "UNRESOLVED", "TEMPORAL": "UNRESOLVED"},
                             "operators": ["direct_label"], "retrieval_query": "Total revenue recognized"})
    verdicts = json.dumps({"verdicts": [{"id": "Revenues", "FAMILY": "support", "ROLE": "support"}]})
    llm = AnswersByPurpose({"hypothesis": hypothesis, "verifier": verdicts, "selector": '{"selected_index": 1}'})
    facts = [Fact(id=f"f{i}", context_id=f"c{i % 3}", modality="table", value=str(i), datatype="monetaryItemType",
                  context="Total revenues and cost of revenue", gold=("Revenues",)) for i in range(12)]
    one = run_method(facts, "fhs", context(llm), tmp_path / "one", workers=1)
    four = run_method(facts, "fhs", context(llm), tmp_path / "four", workers=4)
    assert read_records(tmp_path / "four" / "records.jsonl") != []
    by_id = {r["id"]: r for r in read_records(tmp_path / "one" / "records.jsonl")}
    for record in read_records(tmp_path / "four" / "records.jsonl"):
        one_record = by_id[record["id"]]
        assert record.pop("wall_seconds") >= 0 and one_record.pop("wall_seconds") >= 0  # timings differ
        assert record == one_record
    assert {k: one[k] for k in ("recall@1", "mrr", "accuracy", "n_facts")} == \
        {k: four[k] for k in ("recall@1", "mrr", "accuracy", "n_facts")}


class RefusesOneFact(AnswersByPurpose):
    """Refuses every request about the fact whose value is 11 (as a server refuses a prompt for good)."""

    def complete(self, requests):
        from fhs.llm.contract import RequestRefused

        if any("11" in m.content for r in requests for m in r.messages if "Value:" in m.content
               and "Value: 11" in m.content):
            raise RequestRefused("HTTP 400: prompt too long")
        return super().complete(requests)


def test_a_refused_fact_counts_as_a_miss_unless_excluded(tmp_path):
    hypothesis = json.dumps({"dimensions": {"FAMILY": "Revenue"}, "operators": [],
                             "retrieval_query": "Total revenue recognized"})
    llm = RefusesOneFact({"hypothesis": hypothesis, "verifier": '{"verdicts": []}',
                          "selector": '{"selected_index": 1}'})
    miss = run_method(FACTS, "fhs", context(llm), tmp_path / "run", progress=False)
    assert (miss["n_facts"], miss["n_refused"], miss["refused"]) == (3, 1, "miss")
    assert miss["failed_facts"]["ids"] == ["f1"]
    # the two answered facts found their gold at rank 1: 2 of 3 under "miss", 2 of 2 under "exclude"
    assert miss["recall@1"] == pytest.approx(2 / 3) and miss["accuracy_basis"] == "selector"
    excluded = run_method(FACTS, "fhs", context(llm), tmp_path / "run", progress=False, refused="exclude")
    assert (excluded["n_facts"], excluded["n_refused"], excluded["refused"]) == (2, 1, "exclude")
    assert excluded["recall@1"] == 1.0
    from fhs.run.evaluate import metric_interval
    latest = {r["id"]: r for r in read_records(tmp_path / "run" / "records.jsonl")}  # f1 was retried
    assert metric_interval(list(latest.values()), "recall@1").estimate == pytest.approx(2 / 3)  # chapters count the miss too


def test_fhs_run_takes_the_refused_policy():
    from fhs.cli import build_parser
    from fhs.core.errors import InputError

    parser = build_parser()
    assert parser.parse_args(["run", "--dataset", "fincl", "--method", "direct", "--out", "x"]).refused == "miss"
    assert parser.parse_args(["run", "--dataset", "fincl", "--method", "direct", "--out", "x",
                              "--refused", "exclude"]).refused == "exclude"
    with pytest.raises(InputError, match="invalid choice"):
        parser.parse_args(["run", "--dataset", "fincl", "--method", "direct", "--out", "x", "--refused", "drop"])
