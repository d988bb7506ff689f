"""The measured builds as records: dev/measurements.py checks them and renders book/measurements.md from them,
and dev/cold_book.py fills a record from what a cold build printed."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone

import pytest

from dev import cold_book, measurements

XEON = {"cpu": "Intel Xeon (6/167/8)", "cores": 2}


def record(**changes):
    base = {"kind": "cold-book", "date": "2026-12-04", "commit": "abc1234", "profile": "cpu",
            "command": "python -m dev.cold_book", "machine": XEON, "conditions": {"cpuid_mask": None, "slowdown": None},
            "steps": [{"step": "install", "seconds": 120.0},
                      {"step": "01_readiness_gap", "seconds": 90.0, "checks": {"OK": 48}, "model_calls": 0},
                      {"step": "02_main_results", "seconds": 540.0, "checks": {"OK": 150, "FAIL": 4},
                       "model_calls": 93},
                      {"step": "html", "seconds": 6.0}],
            "totals": {"seconds": 756.0, "checks": {"OK": 198, "FAIL": 4}, "model_calls": 93, "model_seconds": 531.0}}
    return {**base, **changes}


def test_the_committed_records_render_a_page_with_every_build(tmp_path):
    page = tmp_path / "measurements.md"
    assert measurements.main(["--page", str(page)]) == 0
    text = page.read_text()
    for r in measurements.load_records():
        assert f"`{r['commit']}`" in text
    assert measurements.main(["--check", "--page", str(page)]) == 0


def test_the_page_says_it_is_generated_and_shows_each_build_and_its_steps(tmp_path):
    slowed = record(commit="def5678", date="2026-12-05", conditions={"cpuid_mask": "x86-64-v3", "slowdown": 1.6})
    for r in (record(), slowed):
        measurements.write_record(r, tmp_path)
    page = measurements.render(measurements.load_records(tmp_path))
    assert "do not edit" in page and "python -m dev.measurements" in page
    assert "| 2026-12-04 | `abc1234` | cpu | Intel Xeon (6/167/8), 2 cores | fresh clone, empty HOME | 2.0 | 12.6 | " \
           "198 OK, 4 FAIL | 93 | 8.8 |" in page
    assert "CPUID masked to x86-64-v3; 1.6 times slower (dev/slow_cpu.py)" in page
    assert "| 02 main results | 9.0 | 9.0 |" in page  # minutes per step, one column per build
    assert page.index("`abc1234`") < page.index("`def5678`")  # oldest first


def test_a_record_that_lacks_a_field_is_named_with_its_file(tmp_path):
    (tmp_path / "bad.json").write_text(json.dumps(record(totals={})))
    with pytest.raises(measurements.RecordError, match=r"bad\.json: field 'totals.seconds': expected a number"):
        measurements.load_records(tmp_path)
    (tmp_path / "bad.json").write_text(json.dumps(record(date="4 December")))
    with pytest.raises(measurements.RecordError, match="field 'date': expected YYYY-MM-DD"):
        measurements.load_records(tmp_path)
    assert measurements.main(["--records", str(tmp_path), "--page", str(tmp_path / "p.md")]) == 2


def test_record_names_say_the_conditions():
    assert measurements.record_name(record()) == "2026-12-04-abc1234-cold-book.json"
    masked = record(conditions={"cpuid_mask": "x86-64-v3", "slowdown": 1.6})
    assert measurements.record_name(masked) == "2026-12-04-abc1234-cold-book-masked-slow1.6.json"


def test_cold_book_builds_unmasked_unless_asked():
    parsed = argparse.Namespace(tests=False, mask=None, slowdown=1.0, profile="cpu", note=None)
    started = datetime(2026, 12, 4, 10, 0, tzinfo=timezone.utc)
    made = cold_book.base_record(parsed, "abc1234", started, {"cpu": "Xeon", "cores (this process may use)": "2"})
    assert made["command"] == "python -m dev.cold_book" and made["conditions"]["cpuid_mask"] is None
    assert made["machine"]["cores"] == 2 and made["date"] == "2026-12-04"
    masked = cold_book.base_record(argparse.Namespace(**{**vars(parsed), "mask": "x86-64-v3", "slowdown": 1.6}),
                                   "abc1234", started, {})
    assert masked["command"] == "python -m dev.cold_book --mask x86-64-v3 --slowdown 1.6"


def test_cold_book_fills_the_record_from_the_chapter_costs(monkeypatch, tmp_path):
    costs = [{"chapter": "01_readiness_gap", "seconds": 100.0, "checks": {"OK": 48, "OK*": 0, "FAIL": 0, "NEW": 0},
              "model": {"calls": 0, "tokens_in": 0, "tokens_out": 0, "seconds": 0.0}},
             {"chapter": "02_main_results", "seconds": 500.0, "checks": {"OK": 154, "OK*": 0, "FAIL": 0, "NEW": 0},
              "model": {"calls": 93, "tokens_in": 90000, "tokens_out": 4000, "seconds": 530.0}}]
    monkeypatch.setattr(cold_book.subprocess, "run",
                        lambda *a, **k: argparse.Namespace(stdout=json.dumps(costs), returncode=0))
    made = {"commit": "abc1234"}
    text, not_ok = cold_book.book_record(made, tmp_path, {}, "python", install=120.0, book=610.0, cpu={})
    assert not not_ok and "| **total** | **730.0** | 202 OK | 93 |" in text
    assert made["steps"][-1] == {"step": "html", "seconds": 10.0}
    assert made["totals"] == {"seconds": 730.0, "checks": {"OK": 202}, "model_calls": 93, "model_seconds": 530.0,
                              "prompt_tokens": 90000, "reply_tokens": 4000}


def test_pytest_counts_read_the_last_summary_line():
    log = "....\n=== 1233 passed, 1 skipped, 1 deselected in 1368.2s (0:22:48) ===\n"
    assert cold_book.pytest_counts(log) == {"passed": 1233, "skipped": 1, "deselected": 1}


def test_suite_time_runs_each_tier_and_writes_a_record_the_page_renders(tmp_path):
    from dev import suite_time

    said = {"not model and not data": "1348 passed, 1 skipped, 96 deselected in 170.2s",
            "data and not model": "1 failed, 80 passed, 1364 deselected in 300.0s",
            "model": "60 passed, 1385 deselected in 240.0s"}
    asked = []

    commands, envs = [], []

    def run(command, env=None, **_):
        marker = command[command.index("-m", 2) + 1]
        asked.append(marker)
        commands.append(command)
        envs.append(env or {})
        return argparse.Namespace(stdout=said[marker] + "\n", stderr="", returncode=1 if "failed" in said[marker] else 0)

    assert suite_time.main(["--record-dir", str(tmp_path), "--note", "a shared machine", "--cores", "2"],
                           run=run) == 1  # a failure
    assert asked == list(suite_time.TIERS.values())  # every tier of make test, each once
    assert [command[command.index("-n") + 1] for command in commands] == ["4", "4", "2"]  # as make test's phases
    assert commands[2][-2:] == ["--dist", "loadscope"]
    assert [env.get("FHS_LLAMA_THREADS") for env in envs] == [None, None, "1"]  # model workers: one thread each
    [path] = tmp_path.glob("*-suite.json")
    record = json.loads(path.read_text())
    assert [(s["step"], s["tests"]) for s in record["steps"]] == [
        ("fast", {"passed": 1348, "skipped": 1, "deselected": 96}),
        ("data", {"failed": 1, "passed": 80, "deselected": 1364}), ("model", {"passed": 60, "deselected": 1385})]
    assert record["totals"]["tests"]["passed"] == 1348 + 80 + 60
    assert record["conditions"]["note"] == "a shared machine" and "load_average" in record["conditions"]
    page = measurements.render(measurements.load_records(tmp_path))
    assert "## The test suite per tier" in page and "fast min (tests)" in page
    assert "1,348 passed, 1 skipped, 96 deselected, 4 workers" in page and "a shared machine" in page
    assert "60 passed, 1,385 deselected, 2 workers)" in page
    envs.clear()
    suite_time.main(["--record-dir", str(tmp_path / "one"), "--tiers", "model", "--cores", "1"], run=run)
    assert envs == [{}]  # in one process, at the default threads
    page = measurements.render(measurements.load_records(tmp_path / "one"))
    assert "60 passed, 1,385 deselected)" in page  # one process: no workers said
    with pytest.raises(SystemExit):
        suite_time.main(["--tiers", "slow"], run=run)


def test_suite_time_keeps_each_tiers_output_with_its_slowest_tests(tmp_path):
    from dev import suite_time

    commands = []

    def run(command, **_):
        commands.append(command)
        return argparse.Namespace(stdout="slowest 5 durations\n3 passed in 1.0s\n", stderr="", returncode=0)

    assert suite_time.main(["--tiers", "fast", "--no-record", "--durations", "5", "--log-dir", str(tmp_path)],
                           run=run) == 0
    assert "--durations=5" in commands[0]
    assert "slowest 5 durations" in (tmp_path / "fast.log").read_text()
