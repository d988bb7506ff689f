"""The shared listwise selector: prompt, budget shrinking, parsing, the final order and its fallback."""

import json

import pytest

from fhs.data.domain import load_domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.tokens import count_messages, default_counter
from fhs.method.config import FHSConfig
from fhs.method.prompting import PromptTooLong, fact_messages
from fhs.method.selector import Selection, apply_selection, parse_selection, select, selector_prompt, selector_request
from scripted_llm import ScriptedLLM

DOMAIN = load_domain("us-gaap")
FACT = Fact(id="f", context_id="c", modality="table", value="5", datatype="monetaryItemType",
            context="Total assets 5", gold=("G",), row_header="Total assets")
IDS = [f"C{i}" for i in range(1, 31)]
TAXONOMY = Taxonomy.from_concepts("toy", [Concept(cid, f"Label {cid}", definition="d" * 400,
                                                  datatype="monetaryItemType") for cid in IDS])


def test_parse_selection_validates_and_keeps_the_selected_first():
    sel = parse_selection(json.dumps({"selected_index": 3, "ranked_indices": [3, 1, 99, 1, "2", 0]}), IDS[:5])
    assert sel == Selection(selected_index=3, ranked_indices=(3, 1, 2))


def test_parse_selection_falls_back_to_the_named_id_then_the_first_ranked():
    assert parse_selection(json.dumps({"selected_index": 77, "selected_id": "C2", "ranked_indices": []}), IDS[:5]) \
        == Selection(2, (2,))
    assert parse_selection(json.dumps({"selected_index": None, "ranked_indices": [4, 5]}), IDS[:5]) \
        == Selection(4, (4, 5))
    assert parse_selection(json.dumps({"ranked_indices": []}), IDS[:5]) is None
    assert parse_selection("no json", IDS[:5]) is None


def test_parse_selection_caps_ranked_indices():
    sel = parse_selection(json.dumps({"selected_index": 1, "ranked_indices": list(range(1, 31))}), IDS, max_ranked=20)
    assert len(sel.ranked_indices) == 20


def test_apply_selection_order_and_fallback():
    ids = ["a", "b", "c", "d", "e"]
    assert apply_selection(ids, Selection(4, (4, 2))) == ["d", "b", "a", "c", "e"]
    assert apply_selection(ids, None) == ids


def test_request_shows_numbered_candidates_in_the_method_order():
    request, fitted = selector_request(FACT, IDS, TAXONOMY, DOMAIN, FHSConfig())
    prompt = request.messages[-1].content
    assert "[1] C1 / monetaryItemType / Label C1 / " in prompt
    assert prompt.index("[2] C2") < prompt.index("[30] C30")
    assert fitted.rung == 0 and fitted.setting == {"context_chars": 12_000, "definition_chars": 320}
    assert request.shortened is None
    assert request.temperature == 0.0 and request.purpose == "selector" and request.max_tokens == 512


@pytest.mark.model
def test_request_shrinks_definitions_when_over_its_token_budget():
    full, fitted = selector_request(FACT, IDS, TAXONOMY, DOMAIN, FHSConfig())
    tokens = count_messages(default_counter(), full.messages)
    assert fitted.rung == 0 and fitted.tokens in (0, tokens)  # 0: its bytes alone showed that it fits
    request, used = selector_request(FACT, IDS, TAXONOMY, DOMAIN, FHSConfig(selector_prompt_tokens=tokens - 1))
    assert used.setting == {"context_chars": 8_000, "definition_chars": 240} and used.tokens < tokens
    assert request.shortened == {"rung": 1, "of": used.rungs - 1, "context_chars": 8_000, "definition_chars": 240,
                                 "tokens": used.tokens, "limit": tokens - 1}
    bare = fact_messages(selector_prompt(FACT, IDS, TAXONOMY, DOMAIN, 5_000, 0))
    size = count_messages(default_counter(), bare)
    fits, used = selector_request(FACT, IDS, TAXONOMY, DOMAIN, FHSConfig(selector_prompt_tokens=size))
    assert used.setting == {"context_chars": 5_000, "definition_chars": 0} and fits.messages == bare
    assert "[1] C1 / monetaryItemType / Label C1\n" in fits.messages[-1].content


@pytest.mark.model
def test_the_window_less_the_reply_is_the_budget_when_it_is_smaller():
    full, _ = selector_request(FACT, IDS, TAXONOMY, DOMAIN, FHSConfig())
    tokens = count_messages(default_counter(), full.messages)
    config = FHSConfig(context_tokens=tokens + 511, max_tokens_selector=512)
    request, used = selector_request(FACT, IDS, TAXONOMY, DOMAIN, config)
    assert used.rung == 1 and used.limit == tokens - 1 and request.shortened["rung"] == 1
    # the same prompt fits once the reply leaves room for it
    _, used = selector_request(FACT, IDS, TAXONOMY, DOMAIN, config.replace(max_tokens_selector=511))
    assert used.rung == 0


def test_a_prompt_that_fits_no_rung_is_refused_before_it_is_sent():
    llm = ScriptedLLM({"selector": []})
    with pytest.raises(PromptTooLong, match=r"fact f: the selector prompt over 30 candidates: .* prompt tokens"):
        select(FACT, IDS, llm, TAXONOMY, DOMAIN, FHSConfig(selector_prompt_tokens=10))
    assert llm.requests == []


def test_only_the_first_selector_candidates_are_shown():
    request, _ = selector_request(FACT, IDS, TAXONOMY, DOMAIN, FHSConfig(selector_candidates=10))
    prompt = request.messages[-1].content
    assert "[10] C10" in prompt and "C11" not in prompt


def test_select_end_to_end_and_invalid_reply_keeps_the_order():
    llm = ScriptedLLM({"selector": [json.dumps({"selected_index": 2, "ranked_indices": [2, 5]}), "garbage"]})
    ids, sel, calls = select(FACT, IDS, llm, TAXONOMY, DOMAIN, FHSConfig())
    assert ids[:3] == ["C2", "C5", "C1"] and len(ids) == len(IDS) and sel.selected_index == 2
    ids, sel, calls = select(FACT, IDS, llm, TAXONOMY, DOMAIN, FHSConfig())
    assert ids == IDS and sel is None and len(calls) == 1


# ---- the by-id layout (FHSConfig.selector_layout) --------------------------------------------------
# the method's order; in id order (string order) the numbers are C1=1, C10=2, C2=3, C3=4
METHOD_ORDER = ["C3", "C10", "C1", "C2"]


def test_the_by_id_layout_sorts_the_candidates_then_gives_the_method_order_as_their_numbers():
    request, _ = selector_request(FACT, METHOD_ORDER, TAXONOMY, DOMAIN, FHSConfig(selector_layout="by-id"))
    prompt = request.messages[-1].content
    assert prompt.index("[1] C1 /") < prompt.index("[2] C10 /") < prompt.index("[3] C2 /") < prompt.index("[4] C3 /")
    assert prompt.rstrip().endswith("Ranking of these candidates, most likely first "
                                    "(candidate numbers, separated by spaces):\n4 2 1 3")
    assert prompt.index("Task:") < prompt.index("Evidence (") < prompt.index("[1] C1 /")
    assert request.shown == ("C1", "C10", "C2", "C3")  # what the answer's numbers point into
    assert [request.shown[n - 1] for n in (4, 2, 1, 3)] == METHOD_ORDER


def test_the_by_id_layout_in_the_authors_order_ends_with_the_task():
    config = FHSConfig(selector_layout="by-id", prompt_order="evidence-first")
    prompt = selector_request(FACT, METHOD_ORDER, TAXONOMY, DOMAIN, config)[0].messages[-1].content
    assert prompt.index("Evidence (") < prompt.index("[1] C1 /") < prompt.index("4 2 1 3") < prompt.index("Task:")


def test_requests_about_one_fact_share_the_by_id_block_whatever_the_method_order():
    config = FHSConfig(selector_layout="by-id")
    one = selector_request(FACT, METHOD_ORDER, TAXONOMY, DOMAIN, config)[0].messages[-1].content
    other = selector_request(FACT, METHOD_ORDER[::-1], TAXONOMY, DOMAIN, config)[0].messages[-1].content
    head = "Ranking of these candidates"
    assert one != other and one[: one.index(head)] == other[: other.index(head)]


def test_an_answer_picks_the_same_candidates_in_both_layouts():
    # C10 chosen, then C2: numbers 2 and 4 in the method's order, 2 and 3 in id order
    replies = {"ranked": {"selected_index": 2, "ranked_indices": [2, 4]},
               "by-id": {"selected_index": 2, "ranked_indices": [2, 3]}}
    results = {}
    for layout, reply in replies.items():
        llm = ScriptedLLM({"selector": [json.dumps(reply)]})
        results[layout] = select(FACT, METHOD_ORDER, llm, TAXONOMY, DOMAIN, FHSConfig(selector_layout=layout))[:2]
    assert results["ranked"] == results["by-id"] == (["C10", "C2", "C3", "C1"], Selection(2, (2, 4)))


def test_a_by_id_answer_naming_an_id_or_only_ranked_numbers_maps_back_too():
    for reply in ({"selected_index": 99, "selected_id": "C2", "ranked_indices": []},
                  {"selected_index": None, "ranked_indices": [3, 4]}):
        llm = ScriptedLLM({"selector": [json.dumps(reply)]})
        ids, selection, _ = select(FACT, METHOD_ORDER, llm, TAXONOMY, DOMAIN, FHSConfig(selector_layout="by-id"))
        assert ids[0] == "C2" and selection.selected_index == 4


def test_the_selector_layout_is_a_knob_and_a_checked_setting_whose_default_keeps_the_method_order():
    from fhs.run.knobs import knob_overrides

    assert knob_overrides(selector_layout="by-id") == {"selector_layout": "by-id"}
    assert FHSConfig().selector_layout == "ranked"
    prompt = selector_request(FACT, METHOD_ORDER, TAXONOMY, DOMAIN, FHSConfig())[0].messages[-1].content
    assert prompt.index("[1] C3 /") < prompt.index("[2] C10 /") < prompt.index("[3] C1 /") < prompt.index("[4] C2 /")
    assert "Ranking" not in prompt
    with pytest.raises(ValueError, match="selector_layout"):
        FHSConfig(selector_layout="sorted")


@pytest.mark.model
def test_a_real_model_answers_the_by_id_layout_with_numbers_that_map_back():
    """SmolLM2-135M under the schema's grammar: a parseable answer whose numbers name shown candidates."""
    from fhs.llm.factory import make_llm
    from fhs.llm.models import smollm2_path

    llm = make_llm("llama_cpp", str(smollm2_path()), n_ctx=4096)
    config = FHSConfig(selector_layout="by-id", selector_candidates=4, definition_chars=80, context_tokens=4096)
    ids, selection, calls = select(FACT, METHOD_ORDER, llm, TAXONOMY, DOMAIN, config)
    ((request, response),) = calls
    assert request.shown == ("C1", "C10", "C2", "C3") and not response.cut_short
    shown = parse_selection(response.text, request.shown)
    assert shown is not None and selection is not None, response.text
    assert ids[0] == request.shown[shown.selected_index - 1] == METHOD_ORDER[selection.selected_index - 1]
    assert sorted(ids) == sorted(METHOD_ORDER)
