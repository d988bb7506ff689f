"""Each rewriting baseline end to end through ``fhs run`` with the real SmolLM2-135M (smoke profile).

A 135M model often writes something the parser cannot use; whatever it writes,
the run must finish, keep one record per fact with every round's query and
ranking, and issue the direct query where the reply was unusable. The tests
share one response cache, as the book does, so the refinements' first round
comes from free-text's call.
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from fhs.cli import main
from fhs.run.records import read_records

pytestmark = [pytest.mark.model, pytest.mark.data, pytest.mark.slow]

EXPECTED_CALLS = {"free-text": 1, "parallel": 2, "parallel-diverse": 2, "decomposed": 1,
                  "self-refine": 4, "feedback-refine": 4}
REFINEMENTS = ("self-refine", "feedback-refine")
# One fact: every assertion is about each record, and each record costs its method's calls and a selector
FACTS = 1


Run = tuple[dict, list[dict]]  # a run's printed metrics and its records


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Run]:
    """Each method's run, made once and shared by the tests (one response cache, as the book's);
    a refinement runs after free-text, so its first round can come from free-text's call."""
    folder = tmp_path_factory.mktemp("baselines")
    made: dict[str, Run] = {}

    def run_of(method: str) -> Run:
        if method in REFINEMENTS:
            run_of("free-text")
        if method not in made:
            made[method] = run(method, folder / method, folder / "cache" / "responses.sqlite")
        return made[method]

    return run_of


def run(method: str, out: Path, cache: Path) -> Run:
    printed, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(err):
        code = main(["run", "--dataset", "fincl", "--quiet", "--method", method, "--profile", "smoke",
                     "--limit", str(FACTS), "--out", str(out), "--cache", str(cache)])
    assert code == 0, err.getvalue()
    metrics = json.loads(printed.getvalue()[printed.getvalue().index("{"):])
    return metrics, read_records(out / "records.jsonl")


def queries_of(record: dict) -> list[dict]:
    """Every issued query of a record, whatever the method's shape (rounds, slots or hypotheses)."""
    found = []
    for entry in record["rounds"]:
        found.extend(entry.get("queries") or [entry])
    return found


@pytest.mark.parametrize("method", ["free-text", "parallel", "parallel-diverse", "decomposed",
                                    "self-refine", "feedback-refine"])
def test_baseline_runs_end_to_end_on_smollm2(method: str, runs: Callable[[str], Run]) -> None:
    metrics, records = runs(method)
    assert metrics["n_facts"] == FACTS and len(records) == FACTS
    for record in records:
        own = [c for c in record["llm_calls"] if c["purpose"] != "selector"]
        assert len(own) == EXPECTED_CALLS[method]
        assert all(c["purpose"] == method or (method in ("self-refine", "feedback-refine") and c is own[0])
                   for c in own)
        assert record["parse_failures"] == sum(not c["parsed"] for c in own)
        assert record["ranking"] and len(record["ranking"]) <= 200
        assert "selected" in record and record["wall_seconds"] > 0
        prefix = f"{record['rounds'][0].get('query', queries_of(record)[0]['query']).split()[0]}"
        for query in queries_of(record):
            assert query["query"].startswith(prefix)  # every query starts with the fact's value
            assert query["source"] in ("model", "fallback") and query["ranking"]
        if method in REFINEMENTS:
            assert [r["round"] for r in record["rounds"]] == [1, 2, 3, 4]
        if method == "feedback-refine":
            for k in (1, 2, 3):
                assert record["rounds"][k]["shown_candidates"] == record["rounds"][k - 1]["ranking"][:10]


def test_refinements_first_round_is_served_by_free_texts_call(runs: Callable[[str], Run]) -> None:
    _, free = runs("free-text")
    _, refined = runs("self-refine")
    for a, b in zip(free, refined):
        first = a["llm_calls"][0]
        if first["parsed"] and not first.get("truncated"):
            assert b["llm_calls"][0]["cached"] is True
            assert b["rounds"][0]["query"] == a["rounds"][0]["query"]
        else:  # an answer free-text could not use (or that was cut at max_tokens) is asked again, never replayed
            assert b["llm_calls"][0]["cached"] is False
