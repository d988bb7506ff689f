"""Table 6's free-text ensemble + verifier: the calls it makes, what the verifier reads, what it reuses."""

import json
import re

import pytest

from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.method.hypotheses import hypotheses_from_records
from fhs.run.ledger import SqliteLedger, hypothesis_key
from fhs.method.parallel import parallel_requests
from fhs.method.parallel_verified import description_reading
from fhs.method.registry import LLM_METHODS, METHODS
from fhs.method.verifier import DESCRIPTION_SOURCE
from fhs.run.rescore import rescore
from fhs.run.evaluate import gold_rank
from scripted_llm import OverlapRetriever, ScriptedLLM
from test_baselines import DOMAIN, FACT, GOLD, SELECT, TAXONOMY, query

DIMS = DOMAIN.dimension_names
SAMPLES = ["Number of nonvested equity instruments other than options", "Treasury stock shares held"]
LISTED = re.compile(r"^\[\d+\] (\S+) /", flags=re.M)


def verifier_codes(request):
    """Compact codes by position: all six supported for the gold, ROLE contradicted and TEMPORAL abstained elsewhere."""
    ids = LISTED.findall(request.messages[-1].content)
    return json.dumps({"verdicts": ["SSSSSS" if cid == GOLD else "SCSSSA" for cid in ids]})


def scripted(samples=SAMPLES, verifier_replies=2, selector=True):
    script = {"parallel": [query(s) if not s.startswith("!") else s[1:] for s in samples],
              "verifier": [verifier_codes] * verifier_replies}
    if selector:
        script["selector"] = [SELECT]
    return ScriptedLLM(script)


def context(llm, ledger=None, **config):
    return MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=llm, domain=DOMAIN,
                         config=FHSConfig(**config), ledger=ledger)


def test_registered_as_an_llm_method():
    assert "parallel-verified" in METHODS and "parallel-verified" in LLM_METHODS


def test_j_free_text_samples_then_one_verifier_call_per_sample_then_the_selector():
    llm = scripted()
    record = METHODS["parallel-verified"](FACT, context(llm))
    assert [r.purpose for r in llm.requests] == ["parallel", "parallel", "verifier", "verifier", "selector"]
    assert llm.batches == [2, 2, 1]  # the J samples in one batch, the J verifier calls in one batch

    # the samples are exactly parallel's requests, so its cached answers are replayed
    assert llm.calls("parallel") == parallel_requests(FACT, DOMAIN, FHSConfig())
    plain = METHODS["parallel"](FACT, context(scripted(verifier_replies=0)))
    assert record["pool"] == plain["pool"] and record["rounds"] == plain["rounds"]

    # the verifier reads the description, greedy, with every dimension judged against it
    for request, sample in zip(llm.calls("verifier"), SAMPLES):
        prompt = request.messages[-1].content
        assert request.temperature == 0.0
        assert f"judge each dimension by what it states or implies): {sample}" in prompt
        assert "UNRESOLVED\n" not in prompt and f"FAMILY: {sample}" not in prompt
    readings = hypotheses_from_records(record["hypotheses"], DIMS)
    assert [h.source for h in readings] == [DESCRIPTION_SOURCE] * 2
    assert [h.retrieval_query for h in readings] == SAMPLES and all(h.resolved == DIMS for h in readings)

    # v_j = supported / non-abstaining verdicts (Section 4.4): gold 6/6, the others 4/5
    verifier = record["verifier"]
    window = verifier["window"]["ids"]
    assert GOLD in window
    for cid in window:
        entries = [v["entries"][cid] for v in verifier["verdicts"]]
        ruled = [[x for x in e.values() if x != "abstain"] for e in entries]
        expected = sum(r.count("support") / len(r) for r in ruled) / len(ruled)
        assert verifier["vbar"][cid] == pytest.approx(expected)
    assert verifier["vbar"][GOLD] == 1.0 and all(verifier["vbar"][c] < 1.0 for c in window if c != GOLD)

    # Eq. 3 over the fused pool, then the selector's pick
    pool = record["pool"]
    vbar = {cid: verifier["vbar"].get(cid, verifier["vbar_outside"]) for cid in pool["ids"]}
    s_tilde = dict(zip(pool["ids"], pool["normalized"]))
    assert record["ranking"] == sorted(pool["ids"], key=lambda c: (-(s_tilde[c] + 0.6 * vbar[c]), c))
    assert record["ranking"][0] == GOLD and record["selected"] == GOLD
    assert [c["purpose"] for c in record["llm_calls"]] == ["parallel", "parallel", "verifier", "verifier", "selector"]
    assert all(c["parsed"] for c in record["llm_calls"]) and record["parse_failures"] == 0


def test_an_unreadable_sample_searches_the_direct_query_and_is_not_verified():
    llm = scripted(samples=[SAMPLES[0], "!not json"], verifier_replies=1, selector=False)
    record = METHODS["parallel-verified"](FACT, context(llm, selector=False))
    assert [r.purpose for r in llm.requests] == ["parallel", "parallel", "verifier"]
    assert record["rounds"][1]["source"] == "fallback" and record["parse_failures"] == 1
    assert len(record["hypotheses"]) == 1 and len(record["verifier"]["verdicts"]) == 1


def test_nothing_readable_or_beta_zero_makes_no_verifier_call():
    llm = scripted(samples=["!{", "!{"], verifier_replies=0, selector=False)
    record = METHODS["parallel-verified"](FACT, context(llm, selector=False))
    assert record["verifier"] is None and record["ranking"] == record["pool"]["ids"]
    llm = scripted(verifier_replies=0, selector=False)
    record = METHODS["parallel-verified"](FACT, context(llm, selector=False, beta=0.0))
    assert [r.purpose for r in llm.requests] == ["parallel", "parallel"]
    assert record["ranking"] == record["pool"]["ids"]  # beta 0: parallel's fused order


def test_replays_the_parallel_run_and_a_second_variant_reuses_the_ledger(tmp_path):
    backend = scripted(verifier_replies=2, selector=False)
    llm = CachedLLM(backend, ResponseCache(tmp_path / "responses.sqlite"))
    ledger = SqliteLedger(tmp_path / "verdicts.sqlite")
    METHODS["parallel"](FACT, context(llm, ledger, selector=False))
    assert [r.purpose for r in backend.requests] == ["parallel", "parallel"]

    first = METHODS["parallel-verified"](FACT, context(llm, ledger, selector=False))
    assert [r.purpose for r in backend.requests] == ["parallel", "parallel", "verifier", "verifier"]
    assert [c["cached"] for c in first["llm_calls"]] == [True, True, False, False]
    readings = hypotheses_from_records(first["hypotheses"], DIMS)
    assert hypothesis_key(readings[0], FACT) != hypothesis_key(readings[1], FACT)  # each description has its own verdicts

    # another beta and a smaller window: the same candidates under the same descriptions, no call at all
    second = METHODS["parallel-verified"](FACT, context(llm, ledger, selector=False, beta=0.3, k_v=3))
    assert len(backend.requests) == 4
    assert all(c["cached"] for c in second["llm_calls"]) and len(second["llm_calls"]) == 2
    window = second["verifier"]["window"]["ids"]
    assert set(window) <= set(first["verifier"]["window"]["ids"])
    assert [v["from_ledger"] for v in second["verifier"]["verdicts"]] == [len(window)] * 2


def test_offline_rescoring_of_its_records_matches_a_live_variant():
    def as_record(stage):
        return {**stage, "id": FACT.id, "gold": list(FACT.gold), "rank": gold_rank(stage["ranking"], FACT.gold)}

    base = as_record(METHODS["parallel-verified"](FACT, context(scripted(selector=False), selector=False)))
    live = as_record(METHODS["parallel-verified"](FACT, context(scripted(selector=False), selector=False, beta=1.5)))
    assert rescore(base, beta=1.5)["ranking"] == live["ranking"]


def test_description_reading_claims_every_dimension():
    reading = description_reading("  Revenue   from contracts ", DIMS, 1)
    assert reading.retrieval_query == "Revenue from contracts" and reading.sample_index == 1
    assert reading.resolved == DIMS and reading.source == DESCRIPTION_SOURCE
