"""Each rewriting baseline end to end through ``fhs run`` with the real SmolLM2-135M (smoke profile).

A 135M model often writes something the parser cannot use; whatever it writes,
the run must finish, keep one record per fact with every round's query and
ranking, and issue the direct query where the reply was unusable. The tests
share one response cache, as the book does, so the refinements' first round
comes from free-text's call.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fhs.cli import main
from fhs.run.records import read_records

pytestmark = [pytest.mark.model, pytest.mark.data, pytest.mark.slow]

EXPECTED_CALLS = {"free-text": 1, "parallel": 2, "parallel-diverse": 2, "decomposed": 1,
                  "self-refine": 4, "feedback-refine": 4}
FACTS = 2


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache") / "responses.sqlite"


def run(method: str, out: Path, cache: Path, capsys) -> tuple[dict, list[dict]]:
    code = main(["run", "--dataset", "fincl", "--quiet", "--method", method, "--profile", "smoke",
                 "--limit", str(FACTS), "--out", str(out), "--cache", str(cache)])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    metrics = json.loads(captured.out[captured.out.index("{"):])
    return metrics, read_records(out / "records.jsonl")


def queries_of(record: dict) -> list[dict]:
    """Every issued query of a record, whatever the method's shape (rounds, slots or hypotheses)."""
    found = []
    for entry in record["rounds"]:
        found.extend(entry.get("queries") or [entry])
    return found


@pytest.mark.parametrize("method", ["free-text", "parallel", "parallel-diverse", "decomposed",
                                    "self-refine", "feedback-refine"])
def test_baseline_runs_end_to_end_on_smollm2(method, tmp_path, cache, capsys):
    metrics, records = run(method, tmp_path / method, cache, capsys)
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
        if method in ("self-refine", "feedback-refine"):
            assert [r["round"] for r in record["rounds"]] == [1, 2, 3, 4]
        if method == "feedback-refine":
            for k in (1, 2, 3):
                assert record["rounds"][k]["shown_candidates"] == record["rounds"][k - 1]["ranking"][:10]


def test_refinements_first_round_is_served_by_free_texts_call(tmp_path, capsys):
    cache = tmp_path / "responses.sqlite"
    _, free = run("free-text", tmp_path / "free", cache, capsys)
    _, refined = run("self-refine", tmp_path / "self", cache, capsys)
    for a, b in zip(free, refined):
        first = a["llm_calls"][0]
        if first["parsed"] and not first.get("truncated"):
            assert b["llm_calls"][0]["cached"] is True
            assert b["rounds"][0]["query"] == a["rounds"][0]["query"]
        else:  # an answer free-text could not use (or that was cut at max_tokens) is asked again, never replayed
            assert b["llm_calls"][0]["cached"] is False
