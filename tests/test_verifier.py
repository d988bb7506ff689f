"""Verifier scoring, parsing and window; the paper's two worked examples (Appendix G) as tests.

Expected values are written as the formulas the paper states, never as
numbers the code produced.
"""

import json

import pytest

from fhs.book.chapters import worked_examples as W
from fhs.data.domain import domain_from_dict, load_domain
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.method.verifier import (Verdicts, build_window, candidate_line, consensus, fill_support, fill_value,
                                 final_scores, parse_verdicts, read_verdicts, support, verdict_value, verifier_schema)

DIMS = W.DIMS
hypothesis, pool_of = W.hypothesis, W.pool_of


# ---- worked example 1: the RSU rollforward (Appendix G, Tables 21-22) ---------------------------
# The inputs live in fhs/book/chapters/worked_examples.py, which the case-study chapter draws from.

GOLD, OPTIONS, LEAD = W.RSU_GOLD, W.RSU_OPTIONS, W.RSU_LEAD


def rsu_case():
    example = W.rsu_example()
    return example.hypotheses, example.replies, example.pool


def test_rsu_example_support_values():
    (h1, h2), (text1, text2), pool = rsu_case()
    v1 = support(parse_verdicts(text1, pool.ids), h1, "paper")
    v2 = support(parse_verdicts(text2, pool.ids), h2, "paper")
    assert v1[GOLD] == pytest.approx(4 / 4)
    assert v1[OPTIONS] == pytest.approx(3 / 4)
    assert v2[GOLD] == pytest.approx(1.0) and v2[OPTIONS] == pytest.approx(1.0)
    vbar = consensus([fill_support(v1, pool.ids), fill_support(v2, pool.ids)], pool.ids)
    assert vbar[GOLD] == pytest.approx((4 / 4 + 1.0) / 2)  # 1.000
    assert vbar[OPTIONS] == pytest.approx((3 / 4 + 1.0) / 2)  # 0.875


def test_rsu_example_gold_moves_to_rank_one():
    (h1, h2), (text1, text2), pool = rsu_case()
    assert pool.ids.index(GOLD) == 6  # seventh in the fused ranking
    filled = [fill_support(support(parse_verdicts(t, pool.ids), h, "paper"), pool.ids) for h, t in ((h1, text1), (h2, text2))]
    vbar = consensus(filled, pool.ids)
    beta = 0.6
    gap = beta * (vbar[GOLD] - vbar[OPTIONS])
    assert gap == pytest.approx(beta * (1.000 - 0.875))  # 0.075
    assert gap > LEAD  # beats the options concept's 0.063 fused-score lead
    final = final_scores(pool, vbar, beta)
    assert final.ids[0] == GOLD
    assert final.ids[1] == OPTIONS
    assert final.scores[0] - final.scores[1] == pytest.approx(gap - LEAD)
    assert set(final.ids) == set(pool.ids)  # the verifier only reorders the pool


def test_score_pool_is_eq2_and_eq3_on_verdicts_in_hand_with_no_model():
    """The RSU example through the one pure function the verifier stage scores with: the same order."""
    from fhs.method.config import FHSConfig
    from fhs.method.verifier import score_pool

    (h1, h2), (text1, text2), pool = rsu_case()
    config = FHSConfig(beta=0.6)
    scored = score_pool(pool, [h1, h2], [parse_verdicts(text1, pool.ids), parse_verdicts(text2, pool.ids)], config)
    assert scored.ranking.ids[:2] == (GOLD, OPTIONS)
    assert scored.vbar[GOLD] == pytest.approx((4 / 4 + 1.0) / 2)
    assert scored.judged == [len(support(parse_verdicts(t, pool.ids), h, "paper")) for h, t in ((h1, text1), (h2, text2))]
    assert scored.ranking == final_scores(pool, scored.vbar, 0.6)


def test_score_example_runs_the_same_arithmetic_the_chapter_shows():
    scored = W.score_example(W.rsu_example())
    assert scored.beta == 0.6
    assert scored.vbar[GOLD] == pytest.approx((4 / 4 + 1.0) / 2)
    assert scored.vbar[OPTIONS] == pytest.approx((3 / 4 + 1.0) / 2)
    assert scored.rank(GOLD, fused=True) == 7 and scored.rank(GOLD) == 1
    assert scored.score(GOLD) == pytest.approx(1.0 - LEAD + 0.6 * 1.0)
    assert scored.verdicts[0][OPTIONS]["ROLE"] == "contradict"
    assert scored.verdicts[0][GOLD]["QUALIFIER"] == "abstain"


# ---- worked example 2: the securitization facility (Appendix G, Tables 23-24) ---------------------

MAX_CAP, REMAINING, CURRENT = W.SEC_MAX_CAP, W.SEC_REMAINING, W.SEC_CURRENT
FACILITY = list(W.SEC_FACILITY)


def securitization_case():
    example = W.securitization_example()
    return example.hypotheses, example.replies, example.pool


def test_securitization_example_paper_scoring():
    (h1, h2), (text1, text2), pool = securitization_case()
    v1 = support(parse_verdicts(text1, pool.ids), h1, "paper")
    v2 = support(parse_verdicts(text2, pool.ids), h2, "paper")
    assert v1[MAX_CAP] == pytest.approx(0 / 1)
    assert v2[MAX_CAP] == pytest.approx(2 / 2)
    vbar = consensus([fill_support(v1, pool.ids), fill_support(v2, pool.ids)], pool.ids)
    assert vbar[MAX_CAP] == pytest.approx((0 / 1 + 2 / 2) / 2)  # 0.5
    for distractor in FACILITY:
        assert vbar[distractor] == pytest.approx(0.0)
    final = final_scores(pool, vbar, 0.6)
    # The verifier separates the families; the fused score orders concepts inside the capacity family.
    assert list(final.ids[:3]) == [MAX_CAP, REMAINING, CURRENT]


def test_securitization_example_strict_scoring_divides_by_six():
    (h1, h2), (text1, text2), pool = securitization_case()
    v1 = support(parse_verdicts(text1, pool.ids), h1, "strict")
    v2 = support(parse_verdicts(text2, pool.ids), h2, "strict")
    vbar = consensus([fill_support(v1, pool.ids), fill_support(v2, pool.ids)], pool.ids)
    assert vbar[MAX_CAP] == pytest.approx((0 / 6 + 2 / 6) / 2)  # 0.167
    assert round(vbar[MAX_CAP], 3) == 0.167
    assert W.score_example(W.securitization_example(), "strict").vbar[MAX_CAP] == pytest.approx(vbar[MAX_CAP])


def test_securitization_example_needs_the_second_hypothesis():
    (h1, _), (text1, _), pool = securitization_case()
    v1 = fill_support(support(parse_verdicts(text1, pool.ids), h1, "paper"), pool.ids)
    # With only the first hypothesis the gold gets the same 0.0 as the distractors.
    assert v1[MAX_CAP] == v1[FACILITY[0]] == 0.0


# ---- the three scoring variants on one candidate -------------------------------------------------

def test_paper_code_and_strict_variants_differ_as_documented():
    h = hypothesis(FAMILY="Liabilities", ROLE="Debt")  # four dimensions unresolved
    # The verifier also rules on SCOPE (unresolved in h) and contradicts it.
    v = Verdicts("c", tuple((d, {"FAMILY": True, "ROLE": True, "SCOPE": False}.get(d)) for d in DIMS))
    assert support({"c": v}, h, "paper")["c"] == pytest.approx(2 / 2)  # SCOPE is not the hypothesis's claim
    assert support({"c": v}, h, "code")["c"] == pytest.approx(2 / 3)  # every non-abstaining verdict
    assert support({"c": v}, h, "strict")["c"] == pytest.approx(2 / 6)  # abstain = non-support


def test_all_abstentions_leave_a_candidate_unjudged_except_under_strict():
    h = hypothesis(FAMILY="Liabilities")
    v = Verdicts("c", tuple((d, None) for d in DIMS))
    assert support({"c": v}, h, "paper") == {}
    assert support({"c": v}, h, "code") == {}
    assert support({"c": v}, h, "strict") == {"c": 0.0}


def test_fill_mean_and_zero():
    judged = {"a": 1.0, "b": 0.5}
    pool = ["a", "b", "c", "d"]
    assert fill_support(judged, pool, "mean") == {"a": 1.0, "b": 0.5, "c": 0.75, "d": 0.75}
    assert fill_support(judged, pool, "zero") == {"a": 1.0, "b": 0.5, "c": 0.0, "d": 0.0}
    assert fill_value({}, "mean") == 0.0  # nothing judged -> 0


def test_consensus_averages_over_hypotheses():
    assert consensus([{"a": 1.0}, {"a": 0.0}, {"a": 0.5}], ["a"]) == {"a": pytest.approx((1.0 + 0.0 + 0.5) / 3)}
    assert consensus([], ["a"]) == {"a": 0.0}


def test_final_scores_ties_break_by_id():
    pool = pool_of([("b", 0.5), ("a", 0.5), ("c", 1.0)])
    final = final_scores(pool, {"a": 0.0, "b": 0.0, "c": 0.0}, 0.6)
    assert final.ids == ("c", "a", "b")


# ---- parsing ---------------------------------------------------------------------------------

WINDOW = ("us-gaap:Assets", "Liabilities", "R11.0")


def test_verdict_labels():
    assert verdict_value("Support") is True
    assert verdict_value("no support") is False and verdict_value("no_support") is False
    assert verdict_value("CONTRADICT") is False
    assert verdict_value("unresolved") is None and verdict_value("abstain") is None and verdict_value(3) is None


def test_parse_verdicts_maps_ids_loosely_and_keeps_the_first_entry():
    text = json.dumps({"verdicts": [
        {"id": "Assets", "family": "support"},  # namespace dropped by the model, lower-case key
        {"tag": "liabilities", "FAMILY": "contradict"},  # other id key, case-folded
        {"id": "R110", "FAMILY": "support"},  # punctuation lost
        {"id": "Liabilities", "FAMILY": "support"},  # duplicate: ignored
        {"id": "NotInWindow", "FAMILY": "support"},
    ]})
    verdicts = parse_verdicts(text, WINDOW)
    assert set(verdicts) == set(WINDOW)
    assert verdicts["us-gaap:Assets"].ruling("FAMILY") is True
    assert verdicts["Liabilities"].ruling("FAMILY") is False
    assert verdicts["R11.0"].ruling("ROLE") is None


def test_parse_verdicts_by_rank_and_from_a_bare_array_with_chatter():
    text = 'Here you go:\n```json\n[{"rank": 2, "FAMILY": "support"}, {"index": 3, "ROLE": "contradict"}]\n```'
    verdicts = parse_verdicts(text, WINDOW)
    assert verdicts["Liabilities"].ruling("FAMILY") is True
    assert verdicts["R11.0"].ruling("ROLE") is False


def test_parse_verdicts_salvages_complete_entries_of_a_cut_off_reply():
    full = json.dumps({"verdicts": [{"id": cid, "FAMILY": "support", "confidence": 0.9} for cid in WINDOW]})
    cut = full[: full.index('"R11.0"') + 12]  # stops inside the third entry
    verdicts = parse_verdicts(cut, WINDOW)
    assert set(verdicts) == {"us-gaap:Assets", "Liabilities"}
    assert verdicts["Liabilities"].confidence == 0.9


def test_parse_verdicts_of_garbage_is_empty():
    assert parse_verdicts("I cannot help with that.", WINDOW) == {}
    assert parse_verdicts("", WINDOW) == {}


# ---- the window ------------------------------------------------------------------------------

def toy_domain():
    return domain_from_dict({
        "name": "toy", "taxonomy": "Toy", "evidence": "a toy fact",
        "dimensions": [{"name": d, "gloss": d.lower()} for d in DIMS],
        "operators": [{"name": "direct_label", "gloss": "direct"}],
        "profile": {"family": {"categories": {"red": ["red"], "blue": ["blue"]}}},
    })


def test_profile_window_takes_the_first_of_each_profile_then_fills_by_rank():
    domain = toy_domain()
    ids = ["red1", "red2", "blue1", "red3", "plain1", "blue2"]
    labels = {"red1": "red thing", "red2": "red thing two", "blue1": "blue thing", "red3": "red three",
              "plain1": "plain", "blue2": "blue two"}
    taxonomy = Taxonomy.from_concepts("toy", [Concept(cid, labels[cid]) for cid in ids])
    window = build_window(ids, taxonomy, domain, k_v=3, scan=60)
    assert window.ids == ("red1", "blue1", "plain1")  # three distinct profiles, in fused order
    assert window.distinct_profiles == 3
    filled = build_window(ids, taxonomy, domain, k_v=5, scan=60)
    # only 3 profiles exist: the remaining slots go to the best-ranked others
    assert filled.ids == ("red1", "red2", "blue1", "red3", "plain1")
    scanned_only = build_window(ids, taxonomy, domain, k_v=2, scan=2)
    # scan = max(scan, k_v) = 2: only red1, red2 are looked at
    assert scanned_only.ids == ("red1", "red2")


def test_rank_window_is_the_plain_top_k():
    domain = toy_domain()
    ids = ["red1", "red2", "blue1"]
    window = build_window(ids, None, domain, k_v=2, variant="rank")
    assert window.ids == ("red1", "red2")


def test_candidate_line_cuts_the_definition():
    concept = Concept("Assets", "Assets", definition="x" * 400, datatype="monetaryItemType")
    line = candidate_line(1, concept, 320)
    assert line.startswith("[1] Assets / monetaryItemType / Assets / ")
    assert len(line.split(" / ")[-1]) == 320
    assert candidate_line(2, Concept("A", "A"), 320) == "[2] A / - / A"


def test_rsu_concepts_get_distinct_us_gaap_profiles():
    """The window only helps the RSU fact if the gold and the options concept differ in profile."""
    domain = load_domain("us-gaap")
    gold = Concept(GOLD, "Share Based Compensation Arrangement By Share Based Payment Award Equity Instruments "
                         "Other Than Options Non vested Number", datatype="sharesItemType")
    options = Concept(OPTIONS, "Share based Compensation Arrangement By Share based Payment Award Options "
                               "Non vested Number Of Shares", datatype="sharesItemType")
    assert domain.profile_of(gold) != domain.profile_of(options)


US_GAAP = load_domain("us-gaap")


def test_verbose_schema_fixes_one_entry_per_window_candidate_in_order():
    schema = verifier_schema(US_GAAP, WINDOW, compact=False)
    items = schema["properties"]["verdicts"]
    assert items["minItems"] == items["maxItems"] == len(WINDOW)
    assert [entry["properties"]["id"]["enum"] for entry in items["prefixItems"]] == [[cid] for cid in WINDOW]


def test_compact_schema_is_one_code_of_six_letters_per_window_candidate():
    schema = verifier_schema(US_GAAP, WINDOW)
    items = schema["properties"]["verdicts"]
    assert items["minItems"] == items["maxItems"] == len(WINDOW) == len(items["prefixItems"])
    assert {entry["pattern"] for entry in items["prefixItems"]} == {"^[SCA]{6}$"}


def test_compact_codes_map_by_position_to_the_same_verdicts_as_the_verbose_reply():
    labels = {"S": "support", "C": "contradict", "A": "unresolved"}
    codes = ["SSCAAS", "CCCCCC", "aass-cc"]
    verbose = json.dumps({"verdicts": [{"id": cid, **{d: labels[ch] for d, ch in zip(DIMS, code.upper().replace("-", ""))}}
                                       for cid, code in zip(WINDOW, codes)]})
    compact = parse_verdicts(json.dumps({"verdicts": codes}), WINDOW, DIMS)
    assert compact == parse_verdicts(verbose, WINDOW, DIMS)
    assert compact["us-gaap:Assets"].ruling("EVENT") is False and compact["us-gaap:Assets"].ruling("QUALIFIER") is None
    assert {cid: v.to_dict() for cid, v in compact.items()}["R11.0"]["FAMILY"] == "abstain"


def test_malformed_codes_are_counted_and_leave_their_candidates_unjudged():
    text = json.dumps({"verdicts": ["SSSSS", "SSXSSS", "SSSSSS"]})  # too short, unknown letter, fine
    verdicts, malformed = read_verdicts(text, WINDOW, DIMS)
    assert malformed == 2 and list(verdicts) == ["R11.0"]
    assert parse_verdicts(text, WINDOW, DIMS) == verdicts


def test_a_cut_off_compact_reply_keeps_its_complete_codes():
    verdicts, malformed = read_verdicts('{"verdicts": ["SSSSSS", "CCCCCC", "SS', WINDOW, DIMS)
    assert list(verdicts) == list(WINDOW[:2]) and malformed == 0
    assert read_verdicts("no codes here", WINDOW, DIMS) == ({}, 0)


@pytest.mark.model
def test_a_real_model_under_the_schema_judges_every_window_candidate():
    """SmolLM2-135M with the schema as a grammar: every candidate judged once, in order."""
    from fhs.llm.contract import Message, Request
    from fhs.llm.factory import make_llm
    from fhs.llm.models import smollm2_path

    llm = make_llm("llama_cpp", str(smollm2_path()), n_ctx=2048)
    for compact in (True, False):
        request = Request(messages=(Message("user", "Judge each candidate on each dimension. Answer in JSON."),),
                          max_tokens=120 * len(WINDOW), schema=verifier_schema(US_GAAP, WINDOW, compact),
                          purpose="verifier")
        (response,) = llm.complete([request])
        verdicts, malformed = read_verdicts(response.text, WINDOW, US_GAAP.dimension_names)
        assert list(verdicts) == list(WINDOW) and malformed == 0, response.text
