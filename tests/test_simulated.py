"""The simulated model answers every stage's schema, reproducibly; token counts use Qwen's vocabulary."""

from __future__ import annotations

import jsonschema
import pytest

from fhs.data.domain import load_domain
from fhs.llm.contract import Message, Request
from fhs.llm.tokens import CHATML_GENERATION_PROMPT, CHATML_PER_MESSAGE, QWEN3_NO_THINKING, CharEstimate, \
    count_messages
from fhs.method.hypotheses import hypothesis_schema
from fhs.method.rewrite import text_schema
from fhs.method.selector import selector_schema
from fhs.method.verifier import read_verdicts, verifier_schema
from fhs.plan.simulated import SimulatedBackend, simulated_answer
from fhs.run.relocation import RELOCATE_SCHEMA

USER = ("Value: 1,234\nDatatype: monetaryItemType\nSource context: Total revenue from contracts with "
        "customers increased in fiscal 2024 because of pricing")
MESSAGES = [{"role": "system", "content": "Answer with JSON."}, {"role": "user", "content": USER}]


def schemas():
    domain = load_domain("us-gaap")
    return {
        "hypothesis": hypothesis_schema(domain),
        "verifier": verifier_schema(domain, ["us-gaap:A", "us-gaap:B", "us-gaap:C"]),
        "verifier-verbose": verifier_schema(domain, ["us-gaap:A", "us-gaap:B"], compact=False),
        "selector": selector_schema(12),
        "rewrite": text_schema(["critique", "query"]),
        "relocate": RELOCATE_SCHEMA,
    }


@pytest.mark.parametrize("stage", list(schemas()))
def test_answers_are_valid_under_the_request_schema(stage):
    import json

    schema = schemas()[stage]
    for seed in range(20):
        value = json.loads(simulated_answer(MESSAGES, schema, seed=seed, temperature=0.8))
        jsonschema.validate(value, schema)


def test_verifier_codes_read_back_as_one_verdict_per_window_candidate():
    domain = load_domain("us-gaap")
    window = ["us-gaap:A", "us-gaap:B", "us-gaap:C"]
    text = simulated_answer(MESSAGES, verifier_schema(domain, window), seed=3, temperature=0.0)
    verdicts, malformed = read_verdicts(text, window, domain.dimension_names)
    assert sorted(verdicts) == window and malformed == 0


def test_greedy_answers_ignore_the_seed_and_sampled_ones_follow_it():
    schema = schemas()["hypothesis"]
    greedy = {simulated_answer(MESSAGES, schema, seed=s, temperature=0.0) for s in range(5)}
    sampled = {simulated_answer(MESSAGES, schema, seed=s, temperature=0.8) for s in range(5)}
    assert len(greedy) == 1 and len(sampled) > 1
    assert simulated_answer(MESSAGES, schema, seed=4, temperature=0.8) in sampled  # reproducible


def test_free_text_comes_from_the_evidence_not_the_instructions():
    import json

    value = json.loads(simulated_answer(MESSAGES, None, seed=0, temperature=0.0))
    evidence_words = set(USER.replace(":", " ").split())
    assert set(value["query"].split()) <= evidence_words


def test_backend_reports_tokens_from_its_counter():
    counter = CharEstimate(4.0)
    backend = SimulatedBackend(counter=counter)
    request = Request(messages=(Message("system", "Answer with JSON."), Message("user", USER)))
    (response,) = backend.complete([request])
    assert response.tokens_in == count_messages(counter, MESSAGES)
    assert response.tokens_out == counter.count(response.text) + 1
    assert response.finish_reason == "stop"


def test_chatml_wrapping_is_added_per_message():
    counter = CharEstimate(1.0)
    expected = sum(len(m["content"]) + CHATML_PER_MESSAGE for m in MESSAGES) + CHATML_GENERATION_PROMPT
    assert count_messages(counter, MESSAGES, thinking_off=False) == expected
    assert count_messages(counter, MESSAGES) == expected + QWEN3_NO_THINKING


@pytest.mark.model
def test_qwen_vocabulary_counts_what_it_tokenizes():
    from fhs.llm.tokens import QwenVocab

    vocab = QwenVocab()
    assert vocab.count(USER) == len(vocab.tokenize(USER)) > 0
    assert vocab.count("") == 0
    # the estimate is meant to over-count English evidence, never to under-count it by much
    assert CharEstimate().count(USER) >= vocab.count(USER)
