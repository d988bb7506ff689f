"""FHS-Seq end to end through ``fhs run`` with SmolLM2-135M (the smoke profile).

A 135M model often returns replies the loop cannot use (an unparsable
revision, a revision that keeps its target, verdicts that leave nothing
net-unsupported); each such case must end the episode with its documented
stop reason and still write a complete record.
"""

from __future__ import annotations

import json

import pytest

from fhs.cli import main
from fhs.method.fhs_seq import STOP_REASONS
from fhs.run.records import read_records

pytestmark = [pytest.mark.model, pytest.mark.data]


def test_fhs_seq_runs_through_fhs_run_and_keeps_every_round(tmp_path, capsys):
    out = tmp_path / "seq"
    code = main(["run", "--dataset", "fincl", "--quiet", "--method", "fhs-seq", "--profile", "smoke",
                 "--limit", "1", "--out", str(out), "--cache", str(tmp_path / "responses.sqlite")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    metrics = json.loads(captured.out[captured.out.index("{"):])
    assert metrics["n_facts"] == 1 and metrics["method"] == "fhs-seq"
    for record in read_records(out / "records.jsonl"):
        assert record["stop_reason"] in STOP_REASONS
        assert 1 <= record["rounds_used"] == len(record["rounds"]) <= 4
        calls = [c["purpose"] for c in record["llm_calls"] if c["purpose"] != "selector"]
        assert calls.count("hypothesis") >= 2 and 4 <= len(calls) <= 19 + 2  # + a retry per failed sample
        assert calls.count("revision") in (record["rounds_used"] - 1, record["rounds_used"])
        for n, rnd in enumerate(record["rounds"], start=1):
            assert rnd["refusion"] and rnd["ranking"] and rnd["tallies"] is not None
            assert rnd["hypotheses"] == len(record["hypotheses"][: rnd["hypotheses"]])
        if record["stop_reason"] in ("revision_failed", "revision_unchanged"):
            assert record["rounds"][-1]["revision_attempt"]["target"] == record["rounds"][-1]["target"]
        assert record["ranking"] == record["rounds"][-1]["ranking"]
        assert "selected" in record
