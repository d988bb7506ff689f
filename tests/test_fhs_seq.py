"""FHS-Seq with a scripted model: the call sequence, the dimension choice, the stop rule, enforcement.

The scripted verifier reads the window's candidate ids from where they appear
in its prompt (any format that names them), and answers with the record
layout ``{candidate_id: {dimension: verdict}}`` that the loop tallies.
"""

from __future__ import annotations

import json
import re

import pytest

from fhs.core.text import camel_split
from fhs.data.domain import load_domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.method.fhs import run_fhs_fact
from fhs.method.fhs_seq import SeqConfig, run_fhs_seq
from fhs.method.hypotheses import Hypothesis
from fhs.method.registry import LLM_METHODS, METHODS
from fhs.method.revision import Tally, choose_dimension, enforce_target_only, tally
from scripted_llm import OverlapRetriever, ScriptedLLM

DOMAIN = load_domain("us-gaap")
DIMS = DOMAIN.dimension_names  # FAMILY, ROLE, EVENT, QUALIFIER, SCOPE, TEMPORAL
STEM = "ShareBasedCompensationArrangementByShareBasedPaymentAward"
GOLD = f"{STEM}EquityInstrumentsOtherThanOptionsNonvestedNumber"
NAMES = [GOLD, f"{STEM}OptionsOutstandingNumber", f"{STEM}NumberOfSharesAvailableForGrant",
         f"{STEM}EquityInstrumentsOtherThanOptionsGrantsInPeriod",
         f"{STEM}EquityInstrumentsOtherThanOptionsVestedInPeriod", "CommonStockSharesOutstanding",
         "TreasuryStockShares"]
TAXONOMY = Taxonomy.from_concepts("toy", [Concept(n, camel_split(n), datatype="sharesItemType") for n in NAMES])
FACT = Fact(id="rsu", context_id="c1", modality="table", value="1,229,202", datatype="sharesItemType",
            context="Restricted stock units: Nonvested at December 31, 2023 1,229,202", gold=(GOLD,),
            row_header="Nonvested at December 31, 2023", column_header="Total Number of RSUs")
H0 = {"FAMILY": "Share-Based Compensation", "ROLE": "Nonvested Shares", "EVENT": "UNRESOLVED",
      "QUALIFIER": "UNRESOLVED", "SCOPE": "UNRESOLVED", "TEMPORAL": "End of period"}
H1 = {**H0, "FAMILY": "Equity", "ROLE": "Equity instruments other than options"}


def reply(dims, query="Number of nonvested share awards at period end."):
    return json.dumps({"dimensions": dims, "operators": ["roll_forward"], "retrieval_query": query})


def window_ids(request):
    """The taxonomy ids the prompt names, in the order it names them."""
    text = request.messages[-1].content
    found = {cid: m.start() for cid in NAMES if (m := re.search(rf"\b{cid}\b", text))}
    return sorted(found, key=found.get)


def verifier(rulings):
    """A verifier that gives every window candidate the same ``{dimension: verdict}`` (support elsewhere)."""
    def answer(request):
        return json.dumps({"verdicts": [{"id": cid, **{d: rulings.get(d, "support") for d in DIMS}}
                                        for cid in window_ids(request)]})
    return answer


def context(llm, **config):
    return MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=llm, domain=DOMAIN,
                         config=FHSConfig(**config))


def purposes(record):
    return [c["purpose"] for c in record["llm_calls"]]


# ---- tally and choice -----------------------------------------------------------------

def test_tally_counts_each_dimension_over_the_window_and_missing_entries_abstain():
    entries = {"a": {"FAMILY": "support", "ROLE": "contradict"}, "b": {"FAMILY": "contradict", "ROLE": "abstain"}}
    tallies = tally(entries, ["a", "b", "c"], ["FAMILY", "ROLE"])
    assert tallies["FAMILY"] == Tally(support=1, against=1, abstain=1)
    assert tallies["ROLE"] == Tally(support=0, against=1, abstain=2)


def test_choice_is_the_largest_net_against_with_ties_in_the_fixed_order():
    t = {d: Tally() for d in DIMS}
    assert choose_dimension(t, DIMS) is None  # nothing net-unsupported
    t["TEMPORAL"] = Tally(support=1, against=3)  # net 2
    t["QUALIFIER"] = Tally(support=0, against=2)  # net 2, earlier in the order
    t["FAMILY"] = Tally(support=5, against=6)  # net 1
    assert choose_dimension(t, DIMS) == "QUALIFIER"
    t["SCOPE"] = Tally(support=0, against=3)  # net 3 wins outright
    assert choose_dimension(t, DIMS) == "SCOPE"
    assert choose_dimension({d: Tally(support=2, against=2) for d in DIMS}, DIMS) is None  # net 0 is not > 0


def test_only_the_target_dimension_may_change():
    current = Hypothesis(dimensions=tuple(H0.items()), retrieval_query="old", operators=("roll_forward",))
    revised = Hypothesis(dimensions=tuple({**H0, "ROLE": "Unvested awards", "FAMILY": "Equity"}.items()),
                         retrieval_query="new", operators=("direct_label",))
    revision = enforce_target_only(current, revised, "ROLE")
    assert revision.restored == ("FAMILY",) and revision.target_changed
    assert revision.hypothesis.value("ROLE") == "Unvested awards"
    assert revision.hypothesis.value("FAMILY") == H0["FAMILY"]
    assert revision.hypothesis.operators == ("roll_forward",) and revision.hypothesis.retrieval_query == "new"


# ---- the loop ----------------------------------------------------------------------------

def full_episode_llm(role_rulings="contradict"):
    return ScriptedLLM({
        "hypothesis": [reply(H0), reply(H1)],
        "verifier": [verifier({"ROLE": role_rulings})] * 14,
        "revision": [reply({**H0, "ROLE": f"Revision {i} awards"}, f"Revision {i} query.") for i in (1, 2, 3)],
        "selector": [json.dumps({"selected_index": 1, "ranked_indices": [1]})],
    })


def test_a_dimension_that_stays_unsupported_runs_all_four_rounds_with_19_calls():
    llm = full_episode_llm()
    record = run_fhs_seq(FACT, context(llm))
    json.dumps(record)
    expected = (["hypothesis"] * 2 + ["verifier"] * 2 + ["revision"] + ["verifier"] * 3 + ["revision"]
                + ["verifier"] * 4 + ["revision"] + ["verifier"] * 5 + ["selector"])
    assert purposes(record) == expected and len(expected) - 1 == 19
    assert llm.batches == [2, 2, 1, 3, 1, 4, 1, 5, 1]
    assert all(r.temperature == 0.0 for r in llm.calls("revision"))
    assert record["rounds_used"] == 4 and record["stop_reason"] == "max_rounds"
    rounds = record["rounds"]
    assert [r["hypotheses"] for r in rounds] == [2, 3, 4, 5]
    assert [r["target"] for r in rounds] == ["ROLE"] * 4
    assert rounds[0]["tallies"]["ROLE"] == {"support": 0, "against": len(rounds[0]["verifier"]["window"]["ids"]),
                                           "abstain": 0}
    # hypothesis 0 is revised first, then always the latest revision
    assert [r["current"] for r in rounds] == [0, 2, 3, 4]
    assert "Nonvested Shares" in llm.calls("revision")[0].messages[-1].content
    assert "Revision 1 awards" in llm.calls("revision")[1].messages[-1].content
    revised = record["hypotheses"][2:]
    assert [h["dimensions"]["ROLE"] for h in revised] == ["Revision 1 awards", "Revision 2 awards", "Revision 3 awards"]
    assert all({k: v for k, v in h["dimensions"].items() if k != "ROLE"} ==
               {k: v for k, v in H0.items() if k != "ROLE"} for h in revised)
    assert [r["revision"]["target"] for r in rounds[1:]] == ["ROLE"] * 3 and rounds[0]["revision"] is None
    # every round re-fuses every ranking so far and re-verifies every hypothesis
    assert [r["rankings"] for r in rounds] == [4, 6, 8, 10] == [2 * r["hypotheses"] for r in rounds]
    assert [len(r["verifier"]["verdicts"]) for r in rounds] == [2, 3, 4, 5]
    assert record["ranking"] == rounds[-1]["ranking"]  # the paper's final list: Eq. 3 after the last round
    assert record["selected"] == record["ranking"][0]


def test_round_one_is_fhs():
    seq = run_fhs_seq(FACT, context(full_episode_llm()))
    fhs = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), full_episode_llm(), DOMAIN, TAXONOMY, FHSConfig())
    first = seq["rounds"][0]
    assert first["ranking"] == fhs["final_ids"] and first["refusion"] == fhs["pool"]["ids"]
    assert seq["hypotheses"][:2] == fhs["hypotheses"] and seq["rankings"][:4] == fhs["rankings"]


def test_it_stops_after_round_one_when_no_dimension_is_net_unsupported():
    llm = ScriptedLLM({"hypothesis": [reply(H0), reply(H1)], "verifier": [verifier({})] * 2, "selector": ["{}"]})
    record = run_fhs_seq(FACT, context(llm))
    assert purposes(record) == ["hypothesis"] * 2 + ["verifier"] * 2 + ["selector"]
    assert record["rounds_used"] == 1 and record["stop_reason"] == "no_unsupported_dimension"
    assert record["rounds"][0]["target"] is None


def test_ties_pick_the_earlier_dimension_and_a_later_round_can_stop_early():
    calls = {"n": 0}

    def verdicts(request):  # round 1: EVENT and TEMPORAL tie; round 2 onwards: all supported
        calls["n"] += 1
        return verifier({"TEMPORAL": "contradict", "EVENT": "contradict"} if calls["n"] <= 2 else {})(request)

    llm = ScriptedLLM({"hypothesis": [reply(H0), reply(H1)], "verifier": [verdicts] * 5,
                       "revision": [reply({**H0, "EVENT": "Vesting"})], "selector": ["{}"]})
    record = run_fhs_seq(FACT, context(llm))
    assert record["rounds"][0]["target"] == "EVENT"
    assert purposes(record) == ["hypothesis"] * 2 + ["verifier"] * 2 + ["revision"] + ["verifier"] * 3 + ["selector"]
    assert record["rounds_used"] == 2 and record["stop_reason"] == "no_unsupported_dimension"


def test_changes_outside_the_target_are_restored_and_recorded():
    llm = ScriptedLLM({"hypothesis": [reply(H0), reply(H1)], "verifier": [verifier({"ROLE": "contradict"})] * 5,
                       "revision": [reply({**H0, "ROLE": "Unvested awards", "FAMILY": "Equity", "SCOPE": "Parent"})],
                       "selector": ["{}"]})
    record = run_fhs_seq(FACT, context(llm), SeqConfig(max_rounds=2))
    revision = record["rounds"][1]["revision"]
    assert revision["restored"] == ["FAMILY", "SCOPE"] and revision["target_changed"]
    assert record["hypotheses"][2]["dimensions"] == {**H0, "ROLE": "Unvested awards"}
    assert record["hypotheses"][2]["source"] == "revision"
    assert record["stop_reason"] == "max_rounds" and record["rounds_used"] == 2


@pytest.mark.parametrize("text, reason", [("not json at all", "revision_failed"),
                                          (reply(H0), "revision_unchanged")])
def test_a_failed_or_empty_revision_stops_and_keeps_round_one(text, reason):
    llm = ScriptedLLM({"hypothesis": [reply(H0), reply(H1)], "verifier": [verifier({"ROLE": "contradict"})] * 2,
                       "revision": [text], "selector": ["{}"]})
    record = run_fhs_seq(FACT, context(llm))
    assert purposes(record) == ["hypothesis"] * 2 + ["verifier"] * 2 + ["revision", "selector"]
    assert record["stop_reason"] == reason and record["rounds_used"] == 1
    assert record["rounds"][0]["revision_attempt"]["parsed"] is (reason != "revision_failed")
    assert record["ranking"] == record["rounds"][0]["ranking"] and len(record["hypotheses"]) == 2


def test_the_code_options_zero_fill_and_plain_refusion():
    record = run_fhs_seq(FACT, context(full_episode_llm()), SeqConfig(fill="zero", final="refusion"))
    assert record["seq"] == {"max_rounds": 4, "fill": "zero", "final": "refusion", "fill_used": "zero"}
    assert record["ranking"] == record["rounds"][-1]["refusion"]
    assert all(f == 0.0 for r in record["rounds"] for f in r["verifier"]["fill"])
    with pytest.raises(ValueError, match="final"):
        SeqConfig(final="best")


def test_unchanged_reverification_comes_from_the_response_cache(tmp_path):
    backend = full_episode_llm()
    llm = CachedLLM(backend, ResponseCache(tmp_path / "responses.sqlite"))
    record = run_fhs_seq(FACT, context(llm, k_v=1, window="rank"))  # top-1 window: unchanged between rounds
    verifier_calls = [c for c in record["llm_calls"] if c["purpose"] == "verifier"]
    assert len(verifier_calls) == 2 + 3 + 4 + 5
    window = [r["verifier"]["window"]["ids"] for r in record["rounds"]]
    assert window[1:] == window[:-1]
    # only each newly added hypothesis needs the model; h0 and h1 are re-verified from the cache
    assert [c["cached"] for c in verifier_calls] == [False] * 2 + [True, True, False] + \
        [True] * 3 + [False] + [True] * 4 + [False]
    assert len(backend.calls("verifier")) == 5


def test_registered_as_an_llm_method():
    assert "fhs-seq" in METHODS and "fhs-seq" in LLM_METHODS


# ---- the chapter's diagnostics over FHS-Seq records -------------------------------------

def test_diagnostics_read_rounds_pool_changes_and_the_oracle_from_records():
    from fhs.run.tables.seq_diagnostics import (gold_ever_in_pool, oracle_best_single, replaced_share,
                                                single_hypothesis_ranking, summary, with_round_ranks)

    record = {**run_fhs_seq(FACT, context(full_episode_llm())), "gold": [GOLD], "context_id": "c1"}
    [ranked] = with_round_ranks([record])
    assert ranked["rank_round1"] == record["rounds"][0]["ranking"].index(GOLD) + 1
    assert ranked["rank_full"] == record["ranking"].index(GOLD) + 1
    first, last = record["rounds"][0]["ranking"][:50], set(record["ranking"][:50])
    assert replaced_share(record) == sum(c not in last for c in first) / len(first)
    assert gold_ever_in_pool(record) and not gold_ever_in_pool({**record, "gold": ["Assets"]})

    # one hypothesis scored alone with beta 0 is exactly FHS run on that hypothesis without the verifier
    h1 = Hypothesis(dimensions=tuple(H1.items()), retrieval_query="Number of nonvested share awards at period end.",
                    operators=("roll_forward",), sample_index=1)
    alone = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), ScriptedLLM({}), DOMAIN, TAXONOMY,
                         FHSConfig(beta=0.0, selector=False), hypotheses=[h1])
    assert single_hypothesis_ranking(record, 1, FHSConfig(beta=0.0)) == alone["final_ids"]
    [oracle] = oracle_best_single([record], FHSConfig())
    assert oracle["rank_oracle"] == min(oracle["rank_single"]) and len(oracle["rank_single"]) == 2
    assert summary([record])["all_rounds"] == 1.0 and summary([record])["mean_rounds"] == 4
