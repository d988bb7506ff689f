"""Prompt budgets and clipping (JSON parsing is tested in test_jsonout.py)."""

from fhs.method.prompting import clip, fit_to_budget


def test_fit_to_budget_takes_the_first_rung_that_fits_else_the_last():
    build = lambda n: "x" * n  # noqa: E731
    assert fit_to_budget(build, [{"n": 10}, {"n": 5}, {"n": 1}], 6) == ("x" * 5, {"n": 5})
    assert fit_to_budget(build, [{"n": 10}, {"n": 8}], 6) == ("x" * 8, {"n": 8})


def test_clip():
    assert clip("a  b\nc", 10) == "a b c"
    assert clip("abcdefghij", 6) == "abc..."
    assert clip("abc", 0) == ""
