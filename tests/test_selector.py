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
