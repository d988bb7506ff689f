"""Runs against a server: the paper's settings without a profile, and results that do not depend on concurrency."""

from __future__ import annotations

import json

import pytest

from fhs.run.profiles import default_profile, get_profile
from llama_server import free_port
from server_runs import TIMING, fhs_run, records_of, without, write_inputs
from sim_server import running, stats


@pytest.fixture(scope="module")
def sim():
    with running(free_port(), "--fixed-latency", "0.05") as url:
        yield url


def test_the_default_profile_is_the_papers_for_a_gpu_backend():
    assert default_profile("openai") == default_profile("vllm") == "paper"
    assert default_profile(None) == default_profile("llama_cpp") == "cpu"


def test_a_server_run_without_a_profile_takes_every_fact_and_the_papers_budgets(sim, tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path)
    code, metrics, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai",
                                 "--base-url", sim, "--cache", str(tmp_path / "c.sqlite"))
    assert code == 0, err
    assert err.splitlines()[0] == "fhs: facts.jsonl: all 6 facts, no sample taken (profile paper)".replace(
        "facts.jsonl", str(facts))
    assert metrics["n_facts"] == 6
    paper = get_profile("paper").fhs_config()
    fhs = json.loads((tmp_path / "run" / "run-config.json").read_text())["fhs"]
    assert (fhs["context_chars"], fhs["selector_candidates"]) == (paper.context_chars, paper.selector_candidates)
    assert fhs["context_chars"] != get_profile("cpu").fhs_config().context_chars  # not the laptop's budget


def test_a_sample_is_said_on_the_first_line(sim, tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path)
    code, metrics, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--profile", "cpu",
                                 "--base-url", sim, "--cache", str(tmp_path / "c.sqlite"))
    assert code == 0, err
    first = err.splitlines()[0]
    assert f"a context-level sample of {metrics['n_facts']} of 6 facts (profile cpu" in first


def test_records_and_metrics_are_the_same_at_one_and_at_128_requests_in_flight(sim, tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path)
    runs = {}
    for limit, workers in ((1, 1), (128, 6)):
        out = tmp_path / f"limit{limit}"
        code, metrics, err = fhs_run(capsys, facts, concepts, out, "--backend", "openai", "--base-url", sim,
                                     "--max-in-flight", str(limit), "--workers", str(workers),
                                     "--cache", str(tmp_path / f"cache{limit}" / "responses.sqlite"))  # own ledger too
        assert code == 0, err
        assert metrics["llm_calls"] > 0 and metrics["cache_hits"] == 0  # every call asked the server
        runs[limit] = (records_of(out), metrics)
    (one, one_metrics), (many, many_metrics) = runs[1], runs[128]
    assert without(one, TIMING) == without(many, TIMING)
    assert without(one_metrics, TIMING | {"model_seconds", "recorded_seconds"}) == \
        without(many_metrics, TIMING | {"model_seconds", "recorded_seconds"})


def test_the_in_flight_limit_reaches_the_server(tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path)
    with running(free_port(), "--fixed-latency", "0.3") as url:
        code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--base-url", url,
                               "--max-in-flight", "3", "--workers", "6", "--cache", str(tmp_path / "c.sqlite"))
        assert code == 0, err
        assert stats(url)["max_in_flight"] == 3



def test_a_server_run_without_workers_fills_the_in_flight_limit(tmp_path, capsys):
    """The profile runs enough facts at once that the server sees the whole limit, not a few per fact."""
    facts, concepts = write_inputs(tmp_path)
    rows = [json.loads(line) for line in facts.read_text().splitlines()]
    many = [{**row, "id": f"{row['id']}-{k}", "context_id": f"{row['context_id']}-{k}", "value": f"{row['value']}{k}"}
            for k in range(7) for row in rows]  # each its own prompts (identical requests in flight are asked once)
    facts.write_text("".join(json.dumps(row) + "\n" for row in many))
    limit = 32
    assert len(many) > limit  # more facts than requests allowed at once, each with its own first request
    with running(free_port(), "--fixed-latency", "2") as url:
        code, metrics, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--base-url", url,
                                     "--max-in-flight", str(limit), "--cache", str(tmp_path / "c.sqlite"))
        assert code == 0, err
        assert metrics["n_facts"] == len(many)
        assert stats(url)["max_in_flight"] == limit
