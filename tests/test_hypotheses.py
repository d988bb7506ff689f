"""Hypothesis parsing, the fallback, the two renderers, the prefix and modality rules, generation."""

import json

import pytest

from fhs.data.domain import load_domain
from fhs.data.evidence import direct_query, prefix
from fhs.data.facts import Fact
from fhs.llm.tokens import count_messages, default_counter
from fhs.method.config import FHSConfig
from fhs.method.hypotheses import (UNRESOLVED, Hypothesis, fallback_hypothesis, generate_hypotheses, hypothesis_schema,
                                   parse_hypothesis, queries_for, render_definition, render_label)
from fhs.core.text import tokenize
from scripted_llm import ScriptedLLM

DIMS = ("FAMILY", "ROLE", "EVENT", "QUALIFIER", "SCOPE", "TEMPORAL")

TABLE = Fact(id="t1", context_id="c1", modality="table", value="1,229,202", datatype="sharesItemType",
             context="Restricted stock units. Nonvested at December 31, 2023 1,229,202", gold=("G",),
             row_header="Nonvested at December 31, 2023", column_header="Total Number of RSUs")
TEXT = Fact(id="x1", context_id="c2", modality="text", value="370", datatype="monetaryItemType",
            context="The facility was amended to increase the aggregate commitments from $370 million to $400 million.",
            gold=("G",))


def reply(dimensions, query="Number of nonvested equity awards other than options.", operators=("roll_forward",)):
    return json.dumps({"dimensions": dimensions, "operators": list(operators), "retrieval_query": query})


# ---- parsing ---------------------------------------------------------------------------------

def test_parse_fills_missing_dimensions_and_accepts_lower_case_keys_and_lists():
    h = parse_hypothesis(reply({"family": "Share-Based Compensation", "ROLE": ["Nonvested", "Shares"]}))
    assert h is not None
    assert h.value("FAMILY") == "Share-Based Compensation"
    assert h.value("ROLE") == "Nonvested, Shares"
    assert [h.value(d) for d in DIMS[2:]] == [UNRESOLVED] * 4
    assert h.resolved == ("FAMILY", "ROLE")


def test_parse_drops_unknown_operators_and_defaults_to_direct_label():
    assert parse_hypothesis(reply({}, operators=("roll_forward", "telepathy"))).operators == ("roll_forward",)
    assert parse_hypothesis(reply({}, operators=("telepathy",))).operators == ("direct_label",)
    assert parse_hypothesis(reply({}, operators=())).operators == ("direct_label",)


def test_parse_requires_json_and_a_non_empty_retrieval_query():
    assert parse_hypothesis("FAMILY: Equity") is None
    assert parse_hypothesis(reply({"FAMILY": "Equity"}, query="  ")) is None
    assert parse_hypothesis(json.dumps({"dimensions": {"FAMILY": "Equity"}})) is None
    assert parse_hypothesis("[1, 2]") is None


def test_parse_tolerates_thinking_fences_and_prose():
    text = "<think>hmm</think>Sure:\n```json\n" + reply({"FAMILY": "Equity"}) + "\n```\nDone."
    h = parse_hypothesis(text)
    assert h is not None and h.value("FAMILY") == "Equity"


def test_unresolved_is_the_literal_sentinel_only():
    h = parse_hypothesis(reply({"FAMILY": "unresolved", "ROLE": "", "SCOPE": "Not applicable"}))
    assert h.value("FAMILY") == UNRESOLVED and h.value("ROLE") == UNRESOLVED
    assert h.is_resolved("SCOPE")  # an ICD laterality value, not a blank


def test_fallback_hypothesis_resolves_nothing_and_queries_the_raw_fact():
    h = fallback_hypothesis(TABLE)
    assert h.resolved == () and h.source == "fallback"
    assert h.retrieval_query == direct_query(TABLE)


# ---- rendering -------------------------------------------------------------------------------

RSU = Hypothesis(dimensions=(("FAMILY", "Share-Based Compensation"), ("ROLE", "Nonvested Shares"),
                             ("EVENT", UNRESOLVED), ("QUALIFIER", UNRESOLVED), ("SCOPE", UNRESOLVED),
                             ("TEMPORAL", "End of period")),
                 retrieval_query="Number of nonvested shares at period end.")


def test_render_label_tokenizes_resolved_values_in_canonical_order():
    expected = " ".join(tokenize("Share-Based Compensation") + tokenize("Nonvested Shares") + tokenize("End of period"))
    assert render_label(RSU) == expected
    assert render_label(fallback_hypothesis(TABLE)) == ""


def test_render_definition_prefers_the_generated_query():
    assert render_definition(RSU) == "Number of nonvested shares at period end."
    no_query = Hypothesis(dimensions=RSU.dimensions, retrieval_query="")
    assert render_definition(no_query) == "Share-Based Compensation Nonvested Shares End of period"


def test_table_facts_issue_definition_then_label_with_the_prefix():
    queries = queries_for(TABLE, RSU, FHSConfig(), hypothesis_index=1)
    assert [q.rendering for q in queries] == ["definition", "label"]
    assert all(q.text.startswith(prefix(TABLE) + " ") for q in queries)
    assert queries[0].text == f"{prefix(TABLE)} {render_definition(RSU)}"
    assert queries[1].text == f"{prefix(TABLE)} {render_label(RSU)}"
    assert {q.hypothesis_index for q in queries} == {1}


def test_text_facts_issue_the_definition_form_only():
    assert [q.rendering for q in queries_for(TEXT, RSU, FHSConfig())] == ["definition"]
    assert [q.rendering for q in queries_for(TEXT, RSU, FHSConfig(label_on_text=True))] == ["definition", "label"]


def test_nothing_resolved_skips_the_label_query():
    queries = queries_for(TABLE, fallback_hypothesis(TABLE), FHSConfig())
    assert [q.rendering for q in queries] == ["definition"]


def test_rendering_ablations():
    assert [q.rendering for q in queries_for(TABLE, RSU, FHSConfig(renderings=("definition",)))] == ["definition"]
    assert [q.rendering for q in queries_for(TABLE, RSU, FHSConfig(renderings=("label",)))] == ["label"]
    # label-only on a hypothesis with nothing resolved: one direct query keeps the hypothesis in play
    only = queries_for(TABLE, fallback_hypothesis(TABLE), FHSConfig(renderings=("label",)))
    assert [(q.rendering, q.text) for q in only] == [("direct", direct_query(TABLE))]


# ---- generation ------------------------------------------------------------------------------

DOMAIN = load_domain("us-gaap")


def test_generate_sends_j_sampled_requests_in_one_batch():
    llm = ScriptedLLM({"hypothesis": [reply({"FAMILY": "Equity"}), reply({"FAMILY": "Share-Based Compensation"})]})
    hypotheses, calls = generate_hypotheses(TABLE, llm, FHSConfig(), DOMAIN)
    assert [h.value("FAMILY") for h in hypotheses] == ["Equity", "Share-Based Compensation"]
    assert [h.sample_index for h in hypotheses] == [0, 1]
    assert llm.batches == [2]
    first, second = llm.requests
    assert first.messages == second.messages  # one identical prompt
    assert (first.sample_index, second.sample_index) == (0, 1)
    assert first.temperature == 0.8 and first.top_p == 1.0 and first.max_tokens == 2048
    assert first.schema == hypothesis_schema(DOMAIN)
    assert len(calls) == 2


def test_the_prompt_shows_evidence_dimensions_and_rules_but_no_candidates():
    llm = ScriptedLLM({"hypothesis": [reply({})] * 2})
    generate_hypotheses(TABLE, llm, FHSConfig(), DOMAIN)
    prompt = llm.requests[0].messages[-1].content
    assert "Row context: Nonvested at December 31, 2023" in prompt
    assert "UNRESOLVED" in prompt and "retrieval_query" in prompt
    for dim in DOMAIN.dimensions:
        assert f"- {dim.name}: {dim.gloss}" in prompt
    for op in DOMAIN.operator_names:
        assert op in prompt
    assert "candidate" not in prompt.lower()


def test_a_failed_sample_is_retried_once_as_a_new_attempt_then_dropped():
    llm = ScriptedLLM({"hypothesis": [reply({"FAMILY": "Equity"}), "oops", "still not json"]})
    hypotheses, calls = generate_hypotheses(TABLE, llm, FHSConfig(), DOMAIN)
    assert len(hypotheses) == 1 and hypotheses[0].sample_index == 0
    assert llm.batches == [2, 1]
    retry = llm.requests[2]
    assert retry.sample_index == 1 and retry.attempt == 1 and llm.requests[1].attempt == 0
    from fhs.llm.contract import cache_key
    assert cache_key("k", "m", retry) != cache_key("k", "m", llm.requests[1])  # not the cached failure
    assert len(calls) == 3


def test_a_retry_can_rescue_a_sample():
    llm = ScriptedLLM({"hypothesis": ["oops", reply({"FAMILY": "Equity"}), reply({"FAMILY": "Debt"})]})
    hypotheses, _ = generate_hypotheses(TABLE, llm, FHSConfig(), DOMAIN)
    assert [(h.sample_index, h.value("FAMILY")) for h in hypotheses] == [(0, "Debt"), (1, "Equity")]


def test_no_surviving_sample_gives_the_fallback():
    llm = ScriptedLLM({"hypothesis": ["x"] * 4})
    hypotheses, calls = generate_hypotheses(TABLE, llm, FHSConfig(), DOMAIN)
    assert len(calls) == 4
    assert hypotheses == [fallback_hypothesis(TABLE)]


def test_structured_config_is_one_greedy_sample():
    llm = ScriptedLLM({"hypothesis": [reply({"FAMILY": "Equity"})]})
    hypotheses, _ = generate_hypotheses(TABLE, llm, FHSConfig.structured(), DOMAIN)
    assert len(hypotheses) == 1
    assert llm.requests[0].temperature == 0.0 and llm.requests[0].top_p == 1.0


def test_a_long_context_is_shrunk_to_fit_the_prompt_budget():
    big = Fact(id="b", context_id="c", modality="text", value="1", datatype="monetaryItemType",
               context="word " * 20_000, gold=("G",))
    llm = ScriptedLLM({"hypothesis": [reply({})]})
    generate_hypotheses(big, llm, FHSConfig(num_hypotheses=1, generator_prompt_tokens=2_500), DOMAIN)
    (request,) = llm.requests
    assert count_messages(default_counter(), request.messages) <= 2_500
    assert " ... " in request.messages[-1].content  # head and tail kept around the cut
    assert request.shortened["rung"] >= 1 and request.shortened["context_chars"] < 12_000


@pytest.mark.parametrize("name", ["us-gaap", "icd-10-cm"])
def test_schema_lists_the_domain_dimensions(name):
    domain = load_domain(name)
    schema = hypothesis_schema(domain)
    assert schema["properties"]["dimensions"]["required"] == list(domain.dimension_names)


def test_records_round_trip_for_replay():
    from fhs.method.hypotheses import hypotheses_from_records

    original = [RSU, fallback_hypothesis(TABLE)]
    assert hypotheses_from_records([h.to_dict() for h in original]) == original
