"""The free-text ensemble + verifier end to end through ``fhs run`` with the real SmolLM2-135M (smoke profile).

It runs after ``parallel`` on the same cache, as chapter 03 does: the J samples
come from parallel's calls, only the verifier asks the model, and a second
variant (another beta, a smaller window) is served by the cache and the ledger.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fhs.cli import main
from fhs.run.records import read_records

pytestmark = [pytest.mark.model, pytest.mark.data, pytest.mark.slow]

FACTS = 1


def run(method: str, out: Path, cache: Path, capsys, *extra: str) -> tuple[dict, list[dict]]:
    code = main(["run", "--dataset", "fincl", "--quiet", "--method", method, "--profile", "smoke",
                 "--limit", str(FACTS), "--selector", "off", "--out", str(out), "--cache", str(cache), *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return json.loads(captured.out[captured.out.index("{"):]), read_records(out / "records.jsonl")


def test_parallel_verified_on_smollm2_replays_parallel_and_then_the_ledger(tmp_path, capsys):
    cache = tmp_path / "responses.sqlite"
    _, plain = run("parallel", tmp_path / "parallel", cache, capsys)
    metrics, records = run("parallel-verified", tmp_path / "verified", cache, capsys)
    assert metrics["n_facts"] == FACTS and len(records) == FACTS
    for record, before in zip(records, plain):
        samples = [c for c in record["llm_calls"] if c["purpose"] == "parallel"]
        verifier = [c for c in record["llm_calls"] if c["purpose"] == "verifier"]
        assert len(samples) == 2 and all(c["cached"] for c in samples)  # parallel's answers, replayed
        assert record["rounds"] == before["rounds"] and record["pool"] == before["pool"]
        readable = sum(c["parsed"] for c in samples)
        assert len(record["hypotheses"]) == readable
        assert len(verifier) == (readable if record["pool"]["ids"] else 0)
        assert all(not c["cached"] for c in verifier)
        assert sorted(record["ranking"]) == sorted(record["pool"]["ids"])  # Eq. 3 only reorders the pool
        if record["verifier"] is not None:
            assert set(record["verifier"]["vbar"]) == set(record["verifier"]["window"]["ids"])

    # another beta: the same windows under the same descriptions; only answers that did not parse are asked again
    unparsed = sum(not c["parsed"] for r in records for c in r["llm_calls"] if c["purpose"] == "verifier")
    again, variant = run("parallel-verified", tmp_path / "variant", cache, capsys, "--beta", "0.3")
    assert again["llm_calls"] == unparsed
    for record, first in zip(variant, records):
        assert all(c["cached"] for c in record["llm_calls"] if c["purpose"] == "parallel")
        if record["verifier"] is not None:
            assert record["verifier"]["window"] == first["verifier"]["window"]
