"""Tolerant JSON parsing and the one-retry policy (reference §2 failure handling, §4 step 6)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import jsonschema
import pytest

from fhs.jsonout import (
    complete_json,
    complete_json_batch,
    first_balanced,
    parse_array,
    parse_object,
    parse_with_schema,
    salvage_array,
    schema_errors,
    strip_fences,
    strip_think,
)
from fhs.llm import CachedLLM, CallStats, Message, Request, Response, ResponseCache

OBJ = {"retrieval_query": "revenue from contracts", "family": "Revenue"}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(OBJ),
        f"Here is the answer:\n{json.dumps(OBJ)}\nHope this helps.",
        f"```json\n{json.dumps(OBJ, indent=2)}\n```",
        f"```\n{json.dumps(OBJ)}\n```",
        f"<think>The user wants {{json}}; maybe {{\"a\": 1}}.</think>\n{json.dumps(OBJ)}",
        f"reasoning that the template opened</think>{json.dumps(OBJ)}",
        f"The form {{like this}} is wrong; here: {json.dumps(OBJ)}",
        f"```json\n{json.dumps(OBJ)}",  # fence never closed (capped generation)
    ],
)
def test_parse_object_finds_the_object(text):
    assert parse_object(text) == OBJ


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no json here",
        '{"retrieval_query": "cut short',
        "<think>I will answer {\"a\": 1} but never finish",
        "[1, 2, 3]",  # an array is not an object
        '{"a": 1,}',  # trailing comma is not JSON
    ],
)
def test_parse_object_returns_none_on_failure(text):
    assert parse_object(text) is None


def test_braces_inside_strings_do_not_end_the_object():
    obj = {"q": "a } tricky { string with \"quotes\" and \\ backslash"}
    assert parse_object("prefix " + json.dumps(obj) + " suffix {") == obj


def test_raw_control_character_in_a_string_is_not_valid_json():
    # json.loads is strict: the tightened grammar exists so the model cannot write this.
    assert parse_object('{"q": "line one\nline two"}') is None


def test_first_balanced_rejects_bad_opener():
    with pytest.raises(ValueError):
        first_balanced("{}", "(")


def test_strip_helpers():
    assert strip_think("a<think>x</think>b<THINK>y</THINK>c") == "abc"
    assert strip_think("answer <think> unfinished") == "answer "
    assert strip_fences("text ```json\n{}\n``` more") == "{}\n"
    assert strip_fences("plain") == "plain"


def test_parse_array_whole_and_salvaged():
    entries = [{"tag": "A", "FAMILY": "support"}, {"tag": "B", "FAMILY": "contradict"}]
    whole = "Verdicts:\n" + json.dumps(entries)
    assert parse_array(whole) == entries
    cut = json.dumps(entries)[:-1] + ', {"tag": "C", "FAM'  # third entry cut by the token cap
    assert parse_array(cut) == entries
    assert parse_array(cut, salvage=False) is None
    assert salvage_array("[ {\"broken") is None
    assert salvage_array("nothing") is None


SCHEMA = {
    "type": "object",
    "properties": {
        "retrieval_query": {"type": "string", "minLength": 1},
        "family": {"type": "string", "enum": ["Revenue", "Expense", "UNRESOLVED"]},
        "n": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
    },
    "required": ["retrieval_query", "family"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    "value",
    [
        {"retrieval_query": "q", "family": "Revenue"},
        {"retrieval_query": "q", "family": "Revenue", "n": 3, "tags": ["a"]},
        {"retrieval_query": "", "family": "Revenue"},
        {"retrieval_query": "q"},
        {"retrieval_query": "q", "family": "Assets"},
        {"retrieval_query": "q", "family": "Revenue", "extra": 1},
        {"retrieval_query": "q", "family": "Revenue", "n": 1.5},
        {"retrieval_query": "q", "family": "Revenue", "n": True},
        {"retrieval_query": "q", "family": "Revenue", "tags": ["a", "b", "c"]},
        {"retrieval_query": 7, "family": "Revenue"},
        ["not", "an", "object"],
    ],
)
def test_schema_errors_agrees_with_jsonschema(value):
    reference_ok = jsonschema.Draft202012Validator(SCHEMA).is_valid(value)
    assert (schema_errors(value, SCHEMA) == []) == reference_ok


def test_parse_with_schema_validates():
    parse = parse_with_schema(SCHEMA)
    assert parse('{"retrieval_query": "q", "family": "Revenue"}') == {
        "retrieval_query": "q",
        "family": "Revenue",
    }
    assert parse('{"retrieval_query": "q", "family": "Assets"}') is None
    array_parse = parse_with_schema({"type": "array", "items": {"type": "integer"}})
    assert array_parse("[1, 2]") == [1, 2]
    assert array_parse('[1, "x"]') is None


@dataclass
class ScriptedLLM:
    """Answers each request from a script keyed by (sample_index, attempt); records calls."""

    script: dict[tuple[int, int], str]
    name: str = "scripted"
    kind: str = "scripted"
    model: str = "scripted-model"
    seen: list[Request] = field(default_factory=list)
    batches: list[int] = field(default_factory=list)

    def complete(self, requests):
        self.batches.append(len(requests))
        self.seen.extend(requests)
        return [
            Response(text=self.script[(r.sample_index, r.attempt)], tokens_in=10, tokens_out=5)
            for r in requests
        ]


def _request(sample_index=0, **kw):
    return Request(messages=(Message("user", "give json"),), sample_index=sample_index, **kw)


def test_complete_json_first_try():
    llm = ScriptedLLM({(0, 0): json.dumps(OBJ)})
    stats = CallStats()
    value, responses = complete_json(llm, _request(purpose="hypothesis"), stats=stats)
    assert value == OBJ and len(responses) == 1
    assert stats.calls == 1 and stats.by_purpose == {"hypothesis": 1}


def test_complete_json_retries_once_as_a_new_attempt():
    llm = ScriptedLLM({(0, 0): "sorry, no json", (0, 1): json.dumps(OBJ)})
    value, responses = complete_json(llm, _request())
    assert value == OBJ
    assert [r.attempt for r in llm.seen] == [0, 1]
    assert [r.text for r in responses] == ["sorry, no json", json.dumps(OBJ)]


def test_complete_json_gives_up_after_one_retry():
    llm = ScriptedLLM({(0, 0): "nope", (0, 1): "still nope", (0, 2): json.dumps(OBJ)})
    stats = CallStats()
    value, responses = complete_json(llm, _request(), stats=stats)
    assert value is None and len(responses) == 2 and stats.calls == 2


def test_complete_json_uses_the_callers_validation():
    bad = json.dumps({"retrieval_query": "q", "family": "Assets"})
    good = json.dumps({"retrieval_query": "q", "family": "Expense"})
    llm = ScriptedLLM({(0, 0): bad, (0, 1): good})
    value, _ = complete_json(llm, _request(), parse=parse_with_schema(SCHEMA))
    assert value == {"retrieval_query": "q", "family": "Expense"}


def test_complete_json_batch_retries_only_failures_in_one_batch():
    llm = ScriptedLLM(
        {(0, 0): json.dumps(OBJ), (1, 0): "bad", (2, 0): "bad", (1, 1): json.dumps(OBJ), (2, 1): "bad"}
    )
    out = complete_json_batch(llm, [_request(0), _request(1), _request(2)])
    assert [value for value, _ in out] == [OBJ, OBJ, None]
    assert [len(history) for _, history in out] == [1, 2, 2]
    assert llm.batches == [3, 2]


def test_retry_is_a_distinct_cache_entry(tmp_path):
    backend = ScriptedLLM({(0, 0): "bad", (0, 1): json.dumps(OBJ)})
    cached = CachedLLM(backend, ResponseCache(tmp_path / "cache.sqlite"))
    value, _ = complete_json(cached, _request())
    assert value == OBJ and len(cached.cache) == 2
    # A rerun replays both attempts from the cache and reaches the same answer.
    value_again, responses = complete_json(cached, _request())
    assert value_again == OBJ and all(r.cached for r in responses)
    assert len(backend.seen) == 2
