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


def _without_timing(path):
    records = read_records(path / "records.jsonl")
    for record in records:
        assert record.pop("wall_seconds") >= 0  # timings differ from process to process
    return records


@pytest.mark.data  # FinCL and US-GAAP from FHS_DATA
def test_llm_free_runs_in_forked_processes_write_the_records_of_one(tmp_path, monkeypatch):
    """FinCL's 500 facts against US-GAAP, direct and the gold-query probe: the same lines, in the same order."""
    from fhs.book.study import Study
    from fhs.run import runner

    forks = []
    forked = runner._forked
    monkeypatch.setattr(runner, "_forked", lambda *a: forks.append(a[2]) or forked(*a))
    monkeypatch.setattr(runner, "FORK_MIN_FACTS", 100)
    runs = {}
    for processes in ("1", "2"):
        monkeypatch.setenv(runner.PROCESSES_ENV, processes)
        study = Study.for_profile("cpu", tmp_path / processes, progress=False)
        runs[processes] = [study.run("fincl", method) for method in ("direct", "oracle")]
    assert forks == [2, 2]  # only the second study forked, once a run
    for one, two in zip(runs["1"], runs["2"]):
        assert len(one.summaries) == 500
        assert _without_timing(two.path) == _without_timing(one.path)
        assert {k: v for k, v in two.metrics.items() if k != "wall_seconds"} == \
            {k: v for k, v in one.metrics.items() if k != "wall_seconds"}


class FailsOnOneQuery(Retriever):
    def search(self, query, datatype=None, top_k=None):
        if "value 7 " in f"{query} ":
            raise ValueError("index broken for fact 7")
        return super().search(query, datatype, top_k)


def test_an_error_in_a_forked_process_stops_the_run_and_keeps_the_records_before_it(tmp_path, monkeypatch):
    from fhs.run import runner

    monkeypatch.setattr(runner, "FORK_MIN_FACTS", 10)
    monkeypatch.setenv(runner.PROCESSES_ENV, "2")
    facts = [Fact(id=f"f{i}", context_id=f"c{i}", modality="table", value=str(i), datatype="monetaryItemType",
                  context=f"revenue value {i} ", gold=("Revenues",), row_header=f"revenue value {i}") for i in range(40)]
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=FailsOnOneQuery(TAXONOMY, RetrievalConfig()))
    with pytest.raises(ValueError, match="index broken for fact 7"):
        run_method(facts, "direct", ctx, tmp_path, progress=False)
    kept = [r["id"] for r in read_records(tmp_path / "records.jsonl")]
    assert kept == [f"f{i}" for i in range(len(kept))] and "f7" not in kept  # in order, none after the failure
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()))
    result = run_method(facts, "direct", ctx, tmp_path, progress=False)
    assert result["n_facts"] == 40 and result["n_new"] == 40 - len(kept)


def test_model_runs_and_small_runs_stay_in_one_process(monkeypatch):
    from fhs.run.runner import RunJob, run_processes

    monkeypatch.delenv("FHS_RUN_PROCESSES", raising=False)
    bm25 = MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()))
    jobs = [RunJob(FACTS, "direct", bm25, "x")]
    assert run_processes(jobs, 5_000, 2) == 2
    assert run_processes(jobs, 500, 2) == 1  # too few facts to pay for the fork
    assert run_processes([RunJob(FACTS, "fhs", context(ScriptedLLM({})), "x")], 5_000, 2) == 1  # a model

    class Encoder(Retriever):
        fork_safe = False  # e.g. the dense retriever: its runtime's threads do not survive a fork

    jobs = [RunJob(FACTS, "direct", MethodContext(taxonomy=TAXONOMY, retriever=Encoder(TAXONOMY)), "x")]
    assert run_processes(jobs, 5_000, 2) == 1
