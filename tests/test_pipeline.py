"""run_fhs_fact wired end to end with the scripted LLM and a tiny overlap retriever."""

import json
import re

import pytest

from fhs.core.text import camel_split
from fhs.data.domain import load_domain
from fhs.data.evidence import prefix
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.method.config import FHSConfig
from fhs.method.fhs import run_fhs_fact
from fhs.method.hypotheses import Hypothesis, fallback_hypothesis
from scripted_llm import OverlapRetriever, ScriptedLLM

DOMAIN = load_domain("us-gaap")
DIMS = DOMAIN.dimension_names
STEM = "ShareBasedCompensationArrangementByShareBasedPaymentAward"
GOLD = f"{STEM}EquityInstrumentsOtherThanOptionsNonvestedNumber"
NAMES = [
    GOLD,
    "SharebasedCompensationArrangementBySharebasedPaymentAwardOptionsNonvestedNumberOfShares",
    f"{STEM}OptionsOutstandingNumber",
    f"{STEM}NumberOfSharesAvailableForGrant",
    f"{STEM}EquityInstrumentsOtherThanOptionsGrantsInPeriod",
    f"{STEM}EquityInstrumentsOtherThanOptionsVestedInPeriod",
    f"{STEM}EquityInstrumentsOtherThanOptionsForfeitedInPeriod",
    "CommonStockSharesOutstanding",
    "TreasuryStockShares",
]
TAXONOMY = Taxonomy.from_concepts("toy", [Concept(n, camel_split(n), datatype="sharesItemType") for n in NAMES]
                                  + [Concept("Assets", "Assets", datatype="monetaryItemType")])
FACT = Fact(id="rsu", context_id="c1", modality="table", value="1,229,202", datatype="sharesItemType",
            context="Restricted stock units: Nonvested at January 1 ... Nonvested at December 31, 2023 1,229,202",
            gold=(GOLD,), row_header="Nonvested at December 31, 2023", column_header="Total Number of RSUs")

H1 = {"FAMILY": "Share-Based Compensation", "ROLE": "Nonvested Shares", "TEMPORAL": "End of period",
      "EVENT": "UNRESOLVED", "QUALIFIER": "UNRESOLVED", "SCOPE": "UNRESOLVED"}
H2 = {"FAMILY": "Equity", "ROLE": "Share-based compensation equity instruments other than options",
      "TEMPORAL": "As of December 31, 2023"}


def hypothesis_reply(dims, query):
    return json.dumps({"dimensions": dims, "operators": ["roll_forward"], "retrieval_query": query})


def verifier_reply(request):
    """Support every dimension for awards other than options; contradict ROLE for everything else."""
    ids = re.findall(r"^\[\d+\] (\S+) /", request.messages[-1].content, flags=re.M)
    entries = []
    for cid in ids:
        ruling = {d: "support" for d in DIMS}
        if "OtherThanOptionsNonvested" not in cid:
            ruling["ROLE"] = "contradict"
        entries.append({"id": cid, **ruling, "confidence": 0.5})
    return json.dumps({"verdicts": entries})


def scripted(selector_index=1):
    return ScriptedLLM({
        "hypothesis": [hypothesis_reply(H1, "Number of nonvested share awards at period end."),
                       hypothesis_reply(H2, "Number of equity instruments other than options outstanding.")],
        "verifier": [verifier_reply, verifier_reply],
        "selector": [json.dumps({"selected_index": selector_index, "ranked_indices": [selector_index]})],
    })


def test_fhs_record_covers_every_stage():
    llm, retriever = scripted(), OverlapRetriever(TAXONOMY)
    config = FHSConfig()
    record = run_fhs_fact(FACT, retriever, llm, DOMAIN, TAXONOMY, config)
    json.dumps(record)  # plain JSON
    assert "gold" not in record

    # 2 hypotheses x (definition, label) = 4 prefixed queries, searched in the fact's datatype
    assert [(q["hypothesis_index"], q["rendering"]) for q in record["queries"]] == \
        [(0, "definition"), (0, "label"), (1, "definition"), (1, "label")]
    assert all(q["text"].startswith(prefix(FACT) + " ") for q in record["queries"])
    assert [d for _, d in retriever.queries] == ["sharesItemType"] * 4
    assert len(record["rankings"]) == 4 and "Assets" not in record["rankings"][0]

    # the pool holds exactly the union of the rankings; its normalised head is 1.0
    pool = record["pool"]
    assert set(pool["ids"]) == {cid for r in record["rankings"] for cid in r}
    assert pool["normalized"][0] == 1.0

    # calls: J hypotheses in one batch, one verifier call per hypothesis in one batch, one selector call
    assert [c["purpose"] for c in record["llm_calls"]] == ["hypothesis"] * 2 + ["verifier"] * 2 + ["selector"]
    assert llm.batches == [2, 2, 1]
    assert all(c["parsed"] for c in record["llm_calls"])
    assert all(r.temperature == 0.0 for r in llm.calls("verifier"))

    verifier = record["verifier"]
    assert set(verifier["window"]["ids"]) <= set(pool["ids"])
    assert GOLD in verifier["window"]["ids"]
    # h1 resolves FAMILY, ROLE, TEMPORAL; h2 the same three. Gold: all supported; others: ROLE contradicted.
    assert verifier["vbar"][GOLD] == pytest.approx((3 / 3 + 3 / 3) / 2)
    other = next(c for c in verifier["window"]["ids"] if c != GOLD)
    assert verifier["vbar"][other] == pytest.approx((2 / 3 + 2 / 3) / 2)
    assert verifier["verdicts"][0]["entries"][other]["ROLE"] == "contradict"

    # Eq. 3 on the recorded numbers: S~ + beta * v̄, best first
    s_tilde = dict(zip(pool["ids"], pool["normalized"]))
    vbar = {cid: verifier["vbar"].get(cid, verifier["vbar_outside"]) for cid in pool["ids"]}
    expected = sorted(pool["ids"], key=lambda c: (-(s_tilde[c] + config.beta * vbar[c]), c))
    assert record["final_ids"] == expected
    assert record["final_ids"][0] == GOLD
    assert record["selected_ids"][0] == record["final_ids"][0]
    assert record["selection"] == {"selected_index": 1, "ranked_indices": [1]}


def test_selector_choice_reorders_the_head():
    record = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), scripted(selector_index=3), DOMAIN, TAXONOMY, FHSConfig())
    assert record["selected_ids"][0] == record["final_ids"][2]
    assert sorted(record["selected_ids"]) == sorted(record["final_ids"])


def test_structured_preset_makes_one_generation_call_and_no_verifier_calls():
    llm = ScriptedLLM({"hypothesis": [hypothesis_reply(H1, "Number of nonvested awards.")], "selector": ["{}"]})
    record = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, FHSConfig.structured())
    assert [c["purpose"] for c in record["llm_calls"]] == ["hypothesis", "selector"]
    assert record["verifier"] is None
    assert record["final_ids"] == record["pool"]["ids"]
    assert record["selection"] is None and record["selected_ids"] == record["final_ids"]  # fallback: unchanged


def test_failed_generation_falls_back_and_skips_the_useless_verifier_call():
    llm = ScriptedLLM({"hypothesis": ["no"] * 4, "selector": ["{}"]})
    record = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, FHSConfig())
    assert [h["source"] for h in record["hypotheses"]] == ["fallback"]
    assert [q["rendering"] for q in record["queries"]] == ["definition"]  # nothing resolved: no label query
    assert [c["purpose"] for c in record["llm_calls"]] == ["hypothesis"] * 4 + ["selector"]
    assert record["verifier"]["verdicts"] == [{"asked": False, "parsed": False, "from_ledger": 0, "malformed": 0,
                                               "truncated": False, "entries": {}}]
    assert record["final_ids"] == record["pool"]["ids"]  # v̄ is 0 everywhere: the order is S~'s


def test_code_scoring_still_asks_about_a_fallback_hypothesis():
    llm = ScriptedLLM({"hypothesis": ["no"] * 4, "verifier": [verifier_reply]})
    record = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY,
                          FHSConfig(scoring="code", selector=False))
    assert [c["purpose"] for c in record["llm_calls"]] == ["hypothesis"] * 4 + ["verifier"]
    assert record["selected_ids"] is None
    # "code" counts every non-abstaining verdict, though the hypothesis resolved nothing
    vbar = record["verifier"]["vbar"]
    assert all(v == pytest.approx(6 / 6 if cid == GOLD else 5 / 6) for cid, v in vbar.items())


def test_text_facts_issue_one_query_per_hypothesis_and_hypotheses_can_be_replayed():
    text_fact = Fact(id="t", context_id="c", modality="text", value="1,229,202", datatype="sharesItemType",
                     context="We had 1,229,202 nonvested restricted stock units at year end.", gold=(GOLD,))
    replay = [Hypothesis(dimensions=tuple((d, H1.get(d, "UNRESOLVED")) for d in DIMS), retrieval_query="nonvested units"),
              fallback_hypothesis(text_fact)]
    llm = ScriptedLLM({"verifier": [verifier_reply], "selector": ["{}"]})
    record = run_fhs_fact(text_fact, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, FHSConfig(), hypotheses=replay)
    assert [q["rendering"] for q in record["queries"]] == ["definition", "definition"]
    assert [c["purpose"] for c in record["llm_calls"]] == ["verifier", "selector"]  # fallback h2 is not asked
    assert len(record["verifier"]["support"]) == 2


def verifier_code_reply(request):
    """verifier_reply's rulings as compact codes: one letter per dimension, one code per candidate."""
    ids = re.findall(r"^\[\d+\] (\S+) /", request.messages[-1].content, flags=re.M)
    return json.dumps({"verdicts": ["S" * len(DIMS) if "OtherThanOptionsNonvested" in cid
                                    else "".join("C" if d == "ROLE" else "S" for d in DIMS) for cid in ids]})


def test_every_call_shares_the_system_message_and_the_verifier_calls_all_but_the_hypothesis():
    """Prefix caching: each stage's instructions and the evidence come before anything a call changes."""
    llm = scripted()
    config = FHSConfig(context_chars=2_000)
    run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, config)
    assert [r.purpose for r in llm.requests] == ["hypothesis"] * 2 + ["verifier"] * 2 + ["selector"]
    systems = {r.messages[0].content for r in llm.requests}
    assert len(systems) == 1 and [m.role for m in llm.requests[0].messages] == ["system", "user"]
    for request in llm.requests:
        user = request.messages[1].content
        assert user.startswith("Task: ") and user.index("Answer with JSON") < user.index("Source context:")
    # the two verifier calls share everything up to the hypothesis (instructions, evidence, candidates)
    first, second = (r.messages[1].content for r in llm.calls("verifier"))
    shared = first.index("Interpretation of the located value (UNRESOLVED")
    assert first[:shared] == second[:shared] and "[1] " in first[:shared] and first != second


def test_compact_verifier_codes_score_like_the_verbose_reply():
    records = []
    for reply in (verifier_reply, verifier_code_reply):
        llm = ScriptedLLM({
            "hypothesis": [hypothesis_reply(H1, "Number of nonvested share awards at period end."),
                           hypothesis_reply(H2, "Number of equity instruments other than options outstanding.")],
            "verifier": [reply, reply],
            "selector": [json.dumps({"selected_index": 1, "ranked_indices": [1]})],
        })
        records.append(run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, FHSConfig()))
    verbose, compact = (r["verifier"] for r in records)
    assert [v["entries"] for v in compact["verdicts"]] == [v["entries"] for v in verbose["verdicts"]]
    assert compact["vbar"] == verbose["vbar"] and [v["malformed"] for v in compact["verdicts"]] == [0, 0]
    assert records[0]["final_ids"] == records[1]["final_ids"]


def test_verbose_outputs_flag_restores_the_word_verdicts_and_the_echoed_id():
    llm = scripted()
    run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, FHSConfig(compact_outputs=False))
    verifier = llm.calls("verifier")[0]
    assert '"support|contradict|unresolved"' in verifier.messages[1].content
    assert verifier.schema["properties"]["verdicts"]["prefixItems"][0]["properties"]["id"]["enum"]
    assert '"selected_id"' in llm.calls("selector")[0].messages[1].content
    compact = scripted()
    run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), compact, DOMAIN, TAXONOMY, FHSConfig())
    assert '"selected_id"' not in compact.calls("selector")[0].messages[1].content
    assert compact.calls("verifier")[0].max_tokens < verifier.max_tokens
