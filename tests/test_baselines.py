"""The six rewriting baselines with a scripted model: which calls, in which order, seeing what.

Each test asserts the exact sequence and number of model calls, what each
round's prompt shows, the queries issued (prefixed, or the direct query as the
documented fallback) and that the record keeps every round.
"""

import json

import pytest

from fhs.core.text import camel_split
from fhs.data.domain import load_domain
from fhs.data.evidence import direct_query, prefix
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import cache_key
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.method.registry import LLM_METHODS, METHODS, get_method
from fhs.method.rewrite import feedback_candidates, parse_fields
from fhs.retrieval.bm25 import Ranking
from fhs.retrieval.fusion import fuse
from scripted_llm import OverlapRetriever, ScriptedLLM

DOMAIN = load_domain("us-gaap")
STEM = "ShareBasedCompensationArrangementByShareBasedPaymentAward"
GOLD = f"{STEM}EquityInstrumentsOtherThanOptionsNonvestedNumber"
NAMES = [GOLD, f"{STEM}OptionsOutstandingNumber", f"{STEM}NumberOfSharesAvailableForGrant",
         f"{STEM}EquityInstrumentsOtherThanOptionsGrantsInPeriod", "CommonStockSharesOutstanding",
         "TreasuryStockShares"]
TAXONOMY = Taxonomy.from_concepts("toy", [Concept(n, camel_split(n), definition=f"Definition of {camel_split(n)}.",
                                                  datatype="sharesItemType") for n in NAMES]
                                  + [Concept("Assets", "Assets", datatype="monetaryItemType")])
FACT = Fact(id="rsu", context_id="c1", modality="table", value="1,229,202", datatype="sharesItemType",
            context="Restricted stock units: Nonvested at December 31, 2023 1,229,202",
            gold=(GOLD,), row_header="Nonvested at December 31, 2023", column_header="Total Number of RSUs")
SELECT = json.dumps({"selected_index": 1, "ranked_indices": [1]})
NEW_METHODS = ("free-text", "parallel", "parallel-instructed", "parallel-diverse", "decomposed",
               "self-refine", "feedback-refine")


def fused(id_lists):
    return list(fuse([Ranking(tuple(ids), tuple(0.0 for _ in ids)) for ids in id_lists], kappa=60, k=200).ids)


def context(llm, **config):
    return MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=llm, domain=DOMAIN,
                         config=FHSConfig(**config))


def query(text):
    return json.dumps({"query": text})


def test_every_baseline_is_registered_as_an_llm_method():
    for name in NEW_METHODS:
        assert get_method(name) is METHODS[name]
        assert name in LLM_METHODS


def test_free_text_one_greedy_call_then_the_selector():
    llm = ScriptedLLM({"free-text": [query("Number of nonvested equity instruments other than options")],
                       "selector": [SELECT]})
    record = METHODS["free-text"](FACT, context(llm))
    assert [r.purpose for r in llm.requests] == ["free-text", "selector"]
    request = llm.requests[0]
    assert request.temperature == 0.0
    prompt = request.messages[-1].content
    assert "US-GAAP" in prompt and DOMAIN.query_guidance in prompt and FACT.row_header in prompt
    # the fixed instructions first, then the evidence (context before the value): a shared prefix
    assert prompt.index("Answer with JSON") < prompt.index("Evidence:") < prompt.index("Source context:") \
        < prompt.index("Value:")
    (round_,) = record["rounds"]
    assert round_["query"] == f"{prefix(FACT)} Number of nonvested equity instruments other than options"
    assert round_["source"] == "model" and record["parse_failures"] == 0
    assert record["ranking"][0] == GOLD and record["selected"] == GOLD
    assert [c["parsed"] for c in record["llm_calls"]] == [True, True]


@pytest.mark.parametrize("reply", ["not json at all", json.dumps({"query": "  "}), json.dumps({"other": "x"})])
def test_free_text_falls_back_to_the_direct_query(reply):
    llm = ScriptedLLM({"free-text": [reply], "selector": [SELECT]})
    record = METHODS["free-text"](FACT, context(llm))
    assert record["rounds"][0]["query"] == direct_query(FACT)
    assert record["rounds"][0]["source"] == "fallback"
    assert record["parse_failures"] == 1 and record["llm_calls"][0]["parsed"] is False
    assert record["ranking"]


def test_parallel_two_separate_sampled_requests_fused():
    llm = ScriptedLLM({"parallel": [query("Nonvested equity instruments other than options"),
                                    query("Treasury stock shares")], "selector": [SELECT]})
    record = METHODS["parallel"](FACT, context(llm))
    assert llm.batches[0] == 2  # one batch of two requests, never n > 1
    first, second = llm.calls("parallel")
    assert (first.sample_index, second.sample_index) == (0, 1)
    assert first.temperature == second.temperature == 0.8
    assert first.messages == second.messages  # i.i.d.: the same plain prompt
    assert "sample 1 of 2" not in first.messages[-1].content
    assert [r["query"] for r in record["rounds"]] == [f"{prefix(FACT)} Nonvested equity instruments other than options",
                                                      f"{prefix(FACT)} Treasury stock shares"]
    assert len(record["pool"]["contributions"][0]) >= 1 and record["wording"] == "plain"
    assert record["ranking"] == fused([r["ranking"] for r in record["rounds"]])


def test_parallel_instructed_tells_each_sample_its_number():
    llm = ScriptedLLM({"parallel": [query("a"), query("b")], "selector": [SELECT]})
    record = METHODS["parallel-instructed"](FACT, context(llm))
    first, second = llm.calls("parallel")
    assert "sample 1 of 2" in first.messages[-1].content and "sample 2 of 2" in second.messages[-1].content
    assert record["wording"] == "instructed"


def test_parallel_diverse_shows_each_call_the_earlier_readings():
    replies = [json.dumps({"grounding": "Nonvested RSUs at year end", "label_query": "Nonvested Number",
                           "definition_query": "Number of nonvested equity instruments other than options"}),
               json.dumps({"grounding": "Shares available for grant", "label_query": "Shares Available For Grant",
                           "definition_query": "Number of shares available for grant"})]
    llm = ScriptedLLM({"parallel-diverse": replies, "selector": [SELECT]})
    record = METHODS["parallel-diverse"](FACT, context(llm))
    first, second = llm.calls("parallel-diverse")
    assert llm.batches[:2] == [1, 1]  # sequential
    assert "(none yet)" in first.messages[-1].content
    assert "1. Nonvested RSUs at year end" in second.messages[-1].content
    assert [h["shown_readings"] for h in record["rounds"]] == [[], ["Nonvested RSUs at year end"]]
    assert [len(h["queries"]) for h in record["rounds"]] == [2, 2]
    assert record["rounds"][0]["queries"][0]["query"] == f"{prefix(FACT)} Nonvested Number"
    for h in record["rounds"]:  # fused per hypothesis, then across
        assert h["fused"] == fused([q["ranking"] for q in h["queries"]])
    assert record["ranking"] == fused([h["fused"] for h in record["rounds"]])


def test_parallel_diverse_unreadable_sample_takes_the_direct_query():
    llm = ScriptedLLM({"parallel-diverse": ["{broken", json.dumps({"grounding": "x", "label_query": "",
                                                                   "definition_query": ""})],
                       "selector": [SELECT]})
    record = METHODS["parallel-diverse"](FACT, context(llm))
    assert [h["source"] for h in record["rounds"]] == ["fallback", "fallback"]
    assert record["rounds"][1]["queries"][0]["query"] == direct_query(FACT)
    assert record["parse_failures"] == 2
    assert "(none yet)" in llm.calls("parallel-diverse")[1].messages[-1].content


def test_decomposed_four_slots_missing_ones_take_the_direct_query():
    reply = json.dumps({"entity_family": "Share-based compensation equity instruments other than options",
                        "temporal_scope": "end of period", "measurement": "", "aggregation": None})
    llm = ScriptedLLM({"decomposed": [reply], "selector": [SELECT]})
    ctx = context(llm)
    record = METHODS["decomposed"](FACT, ctx)
    assert [r.purpose for r in llm.requests] == ["decomposed", "selector"]
    assert [r["slot"] for r in record["rounds"]] == ["entity_family", "temporal_scope", "measurement", "aggregation"]
    assert [r["source"] for r in record["rounds"]] == ["model", "model", "fallback", "fallback"]
    assert record["rounds"][2]["query"] == direct_query(FACT)
    assert len(ctx.retriever.queries) == 4 and record["parse_failures"] == 0


def refine_replies(note):
    return [query("Treasury stock shares"),
            json.dumps({note: "wrong family", "query": "Nonvested equity instruments other than options"}),
            "garbage",
            json.dumps({note: "holds", "query": "Nonvested equity instruments other than options number"})]


@pytest.mark.parametrize("method,note", [("self-refine", "critique"), ("feedback-refine", "assessment")])
def test_refinement_rounds_in_order_with_a_fallback_round(method, note):
    llm = ScriptedLLM({method: refine_replies(note), "selector": [SELECT]})
    record = METHODS[method](FACT, context(llm))
    assert [r.purpose for r in llm.requests] == [method] * 4 + ["selector"]
    assert llm.batches == [1, 1, 1, 1, 1]
    assert all(r.temperature == 0.0 for r in llm.requests)
    rounds = record["rounds"]
    assert [r["round"] for r in rounds] == [1, 2, 3, 4]
    assert [r["source"] for r in rounds] == ["model", "model", "fallback", "model"]
    assert rounds[2]["query"] == direct_query(FACT) and record["parse_failures"] == 1
    assert rounds[1][note] == "wrong family"
    # round k is shown round k-1's reading; after a failed round, the last reading the model wrote
    assert rounds[1]["shown_reading"] == "Treasury stock shares"
    assert rounds[3]["shown_reading"] == "Nonvested equity instruments other than options"
    assert "Treasury stock shares" in llm.requests[1].messages[-1].content
    assert len(record["pool"]["contributions"][0]) >= 2  # RRF over the rounds


def test_self_refine_never_shows_candidates():
    llm = ScriptedLLM({"self-refine": refine_replies("critique"), "selector": [SELECT]})
    METHODS["self-refine"](FACT, context(llm))
    for request in llm.calls("self-refine"):
        assert not any(name in request.messages[-1].content for name in NAMES)


def test_feedback_refine_round_k_sees_round_k_minus_1_top_ten():
    llm = ScriptedLLM({"feedback-refine": refine_replies("assessment"), "selector": [SELECT]})
    record = METHODS["feedback-refine"](FACT, context(llm))
    rounds = record["rounds"]
    for k in (2, 3, 4):
        previous = rounds[k - 2]["ranking"][:10]
        prompt = llm.requests[k - 1].messages[-1].content
        assert rounds[k - 1]["shown_candidates"] == previous
        for number, cid in enumerate(previous, start=1):
            assert f"[{number}] {cid} / " in prompt
            assert TAXONOMY[cid].label in prompt


def test_feedback_candidates_put_the_fact_datatype_first():
    ids = ["Assets", *NAMES]
    shown = feedback_candidates(FACT, ids, TAXONOMY, n=3)
    assert shown == NAMES[:3]
    assert feedback_candidates(FACT, ids, TAXONOMY)[-1] == "Assets"


def test_self_refine_round_one_is_the_free_text_request_and_the_cache_serves_it(tmp_path):
    """A shared response cache answers round 1 of both refinements with free-text's reply."""
    backend = ScriptedLLM({"free-text": [query("Treasury stock shares")],
                           "self-refine": [json.dumps({"critique": "c", "query": f"q{k}"}) for k in range(3)],
                           "feedback-refine": [json.dumps({"assessment": "a", "query": f"q{k}"}) for k in range(3)]})
    cache = ResponseCache(tmp_path / "responses.sqlite")
    llm = CachedLLM(backend, cache)
    ctx = context(llm, selector=False)
    free = METHODS["free-text"](FACT, ctx)
    assert len(backend.requests) == 1
    for method in ("self-refine", "feedback-refine"):
        before = len(backend.requests)
        record = METHODS[method](FACT, ctx)
        assert len(backend.requests) == before + 3  # rounds 2-4 only
        assert record["llm_calls"][0]["cached"] is True
        assert [c["cached"] for c in record["llm_calls"][1:]] == [False] * 3
        assert record["rounds"][0]["query"] == free["rounds"][0]["query"]
    own = [r for r in backend.requests if r.purpose == "free-text"][0]
    from fhs.method.free_text import free_text_request
    again = free_text_request(FACT, DOMAIN, ctx.config, purpose="self-refine")
    assert cache_key("x", "m", again) == cache_key("x", "m", own)


def test_parse_fields_is_forgiving_about_form():
    assert parse_fields('```json\n{"Query": ["a", "b"]}\n```', ("query",)) == {"query": "a b"}
    assert parse_fields("[1, 2]", ("query",)) is None
    assert parse_fields('{"critique": 3}', ("critique", "query")) == {"critique": "3", "query": ""}


def test_table_11_pilot_reads_the_records_both_sampling_methods_write():
    """The ablation chapter's Table 11 reads parallel and parallel-diverse records as they are written."""
    from fhs.run.rescore import pilot

    plain = METHODS["parallel"](FACT, context(ScriptedLLM({
        "parallel": [query("Nonvested equity instruments other than options"), query("Treasury stock shares")],
        "selector": [SELECT]})))
    diverse = METHODS["parallel-diverse"](FACT, context(ScriptedLLM({
        "parallel-diverse": [json.dumps({"grounding": "g", "label_query": "Nonvested Number",
                                         "definition_query": "Number of nonvested equity instruments"}),
                             json.dumps({"grounding": "h", "label_query": "Treasury Stock Shares",
                                         "definition_query": "Number of treasury shares"})],
        "selector": [SELECT]})))
    for record in (plain, diverse):
        record["gold"] = list(FACT.gold)
        stats = pilot([record])
        hits = [GOLD in ranking for ranking in ([r["ranking"] for r in record["rounds"]] if "ranking" in record["rounds"][0]
                                               else [h["fused"] for h in record["rounds"]])]
        assert [stats["hypothesis0_recall"], stats["hypothesis1_recall"]] == [float(h) for h in hits]
        assert stats["union_recall"] == float(any(hits))
        assert stats["pool_recall"] == float(GOLD in record["pool"]["ids"])
