"""scripts/rehearsal.py: what it measures of a child process, and how its report compares with the plan."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rehearsal():
    spec = importlib.util.spec_from_file_location("rehearsal", ROOT / "scripts" / "rehearsal.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measure_reports_the_childs_cpu_and_peak_memory(tmp_path):
    module = rehearsal()
    out = tmp_path / "m.json"
    code = "x = bytearray(80 * 2**20); x[::4096] = b'1' * len(x[::4096]); sum(range(3_000_000))"
    result = module.measure([sys.executable, "-c", code], tmp_path, {}, out)
    assert result["returncode"] == 0
    assert result["peak_rss_mb"] >= 80  # the 80 MB the child touched
    assert result["cpu_seconds"] >= 0 and result["wall_seconds"] >= 0


def test_report_sets_the_servers_counts_beside_the_plan_and_judges_the_kill(tmp_path):
    module = rehearsal()
    plan = {"rows": [
        {"chapter": "02_main_results", "dataset": "fincl", "facts": 10, "requests": 100, "prompt_tokens": 1000,
         "output_tokens": 50, "asks_model": True},
        {"chapter": "02_main_results", "dataset": "codiesp", "facts": 30, "requests": 300, "prompt_tokens": 3000,
         "output_tokens": 150, "asks_model": True},
        {"chapter": "01_readiness_gap", "dataset": "fincl", "facts": 500, "requests": 0, "prompt_tokens": 0,
         "output_tokens": 0, "asks_model": False}]}
    chapter = {"returncode": 0, "cpu_seconds": 80.0, "peak_rss_mb": 900.0, "requests": 440, "prompt_tokens": 4400,
               "output_tokens": 100, "cache_mb": 9.0, "records_mb": 40.0}
    kill = {"chapter": "02_main_results", "killed": True, "requests_before_kill": 160, "in_flight_at_kill": 4,
            "requests": 403, "distinct_requests": 400, "distinct_requests_uninterrupted": 400, "asked_twice": 3,
            "asked_twice_although_answered_before_the_kill": 0, "cache_entries": 400, "resume_returncode": 0,
            "run_folders": 30, "run_folders_short_of_the_uninterrupted_run": {}}
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "rehearsal.json").write_text(json.dumps({
        "fraction": 0.02, "server": "fhs.plan.sim_server", "server_args": "", "plan_sample": 20,
        "chapters": {"02_main_results": chapter}, "kill": kill}))
    text = module.report(tmp_path)
    row = next(line for line in text.splitlines() if line.startswith("02_main_results"))
    assert "440" in row and "1.10" in row and "0.50" in row  # requests and prompt 1.10 of the plan, output 0.50
    assert "2.00" in row  # 80 CPU seconds over the 40 facts the chapter sends to a model
    assert "kill -9 and resume (02_main_results): OK" in text
    kill["asked_twice_although_answered_before_the_kill"] = 1  # an answer lost at the kill
    (tmp_path / "rehearsal.json").write_text(json.dumps({
        "fraction": 0.02, "server": "s", "server_args": "", "plan_sample": 20,
        "chapters": {"02_main_results": chapter}, "kill": kill}))
    assert "PROBLEM" in module.report(tmp_path)


def test_a_logged_request_is_identified_by_its_prompt_and_sampling():
    module = rehearsal()
    a = {"prompt_sha256": "x", "seed": 1, "temperature": 0.8, "max_tokens": 10, "arrival": 1.0}
    assert module.identity(a) == module.identity({**a, "arrival": 2.0})
    assert module.identity(a) != module.identity({**a, "seed": 2})


def test_the_rehearsals_own_cache_keeps_model_answers_out_of_the_users(tmp_path, monkeypatch):
    module = rehearsal()
    user = tmp_path / "user-cache"
    (user / "relocation").mkdir(parents=True)
    (user / "relocation" / "codiesp-test-dp--deterministic-ab.jsonl").write_text("{}\n")
    (user / "relocation" / "codiesp-test-dp--llm-openai_Qwen_Qwen3-32B-cd.jsonl").write_text("{}\n")
    (user / "taxonomies").mkdir()
    (user / "taxonomies" / "us-gaap.json").write_text("[]")
    (user / "llm").mkdir()
    (user / "llm" / "verdicts.sqlite").write_text("")
    monkeypatch.setenv("FHS_CACHE", str(user))
    own = module.own_cache(tmp_path / "rehearsal" / "fhs-cache")
    assert sorted(p.name for p in (own / "relocation").iterdir()) == ["codiesp-test-dp--deterministic-ab.jsonl"]
    assert (own / "taxonomies" / "us-gaap.json").read_text() == "[]"  # built from data: shared, not rebuilt
    assert not (own / "llm").exists()
    (own / "relocation" / "codiesp-test-dp--llm-openai_Qwen_Qwen3-32B-ef.jsonl").write_text("{}\n")
    assert len(list((user / "relocation").iterdir())) == 2  # what the rehearsal's model answers stays in its own
    assert module.own_cache(own) == own and len(list((own / "relocation").iterdir())) == 1  # made afresh each time


def test_the_simulated_server_is_started_from_the_package_not_from_the_tests():
    module = rehearsal()
    assert module.server_command("fhs.plan.sim_server") == [sys.executable, "-m", "fhs.plan.sim_server"]
    assert module.server_command("no.such.server") == [] and module.server_command("tests/no_such.py") == []
    source = (ROOT / "scripts" / "rehearsal.py").read_text()
    assert "tests/sim_server" not in source and "from sim_server" not in source
