"""Tolerant JSON parsing of model text (fhs.llm.jsonout)."""

from __future__ import annotations

import json

import pytest

from fhs.llm.jsonout import (
    first_balanced,
    parse_array,
    parse_object,
    salvage_array,
    strip_fences,
    strip_think,
)

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
