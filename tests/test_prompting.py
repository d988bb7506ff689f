"""Reading JSON out of model replies, and prompt budgets."""

from fhs.prompting import clip, fit_to_budget, json_payload, salvage_array_objects, strip_wrapping


def test_json_payload_finds_the_first_parseable_object():
    assert json_payload('{"a": 1}') == {"a": 1}
    assert json_payload('noise {"a": "}"} more {"b": 2}') == {"a": "}"}
    assert json_payload('{broken {"b": 2}') == {"b": 2}
    assert json_payload("<think>{\"x\": 1}</think>{\"y\": 2}") == {"y": 2}
    assert json_payload("nothing here") is None
    assert json_payload("[1, 2]", "[") == [1, 2]


def test_strip_wrapping_handles_an_unclosed_think_span():
    assert strip_wrapping("<think>still thinking") == ""
    assert strip_wrapping("```json\n{}\n```") == "{}"


def test_salvage_keeps_complete_entries_only():
    text = '{"verdicts": [{"id": "a", "n": [1, 2]}, {"id": "b\\"]", "n": 3}, {"id": "c", "n'
    assert salvage_array_objects(text) == [{"id": "a", "n": [1, 2]}, {"id": 'b"]', "n": 3}]
    assert salvage_array_objects("[]") == []
    assert salvage_array_objects("no array") == []


def test_fit_to_budget_takes_the_first_rung_that_fits_else_the_last():
    build = lambda n: "x" * n  # noqa: E731
    assert fit_to_budget(build, [{"n": 10}, {"n": 5}, {"n": 1}], 6) == ("x" * 5, {"n": 5})
    assert fit_to_budget(build, [{"n": 10}, {"n": 8}], 6) == ("x" * 8, {"n": 8})


def test_clip():
    assert clip("a  b\nc", 10) == "a b c"
    assert clip("abcdefghij", 6) == "abc..."
    assert clip("abc", 0) == ""
