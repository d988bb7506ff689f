"""Runs against a server: the paper's settings without a profile, and results that do not depend on concurrency."""

from __future__ import annotations

import json

import pytest

from cli_in_process import fhs
from fhs.plan.sim_server import running, stats
from fhs.run.profiles import default_profile, get_profile
from llama_server import free_port
from server_runs import TIMING, fhs_run, records_of, without, write_inputs


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


def test_two_runs_in_one_process_from_two_folders_keep_a_relative_cache_in_each(sim, tmp_path):
    """A relative --cache names a file in the folder a run starts from, however long its process has lived."""
    facts, concepts = write_inputs(tmp_path, n=2)
    for folder in (tmp_path / "a", tmp_path / "b"):
        folder.mkdir()
        done = fhs("run", "--facts", str(facts), "--taxonomy", str(concepts), "--domain", "us-gaap", "--method", "fhs",
                   "--backend", "openai", "--base-url", sim, "--out", "run", "--quiet", "--cache", "c/responses.sqlite",
                   cwd=folder)
        assert done.returncode == 0, done.stderr
        metrics = json.loads(done.stdout)
        assert metrics["llm_calls"] > 0 and metrics["cache_hits"] == 0  # asked afresh, into this folder's cache
        assert (folder / "c" / "responses.sqlite").is_file() and (folder / "c" / "verdicts.sqlite").is_file()


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
            for k in range(6) for row in rows]  # each its own prompts (identical requests in flight are asked once)
    facts.write_text("".join(json.dumps(row) + "\n" for row in many))
    limit = 32
    assert len(many) > limit  # more facts than requests allowed at once, each with its own first request
    with running(free_port(), "--fixed-latency", "1") as url:  # each fact's first two requests are sent at once
        code, metrics, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--base-url", url,
                                     "--max-in-flight", str(limit), "--cache", str(tmp_path / "c.sqlite"))
        assert code == 0, err
        assert metrics["n_facts"] == len(many)
        assert stats(url)["max_in_flight"] == limit


def many_facts(facts, n: int) -> None:
    """``n`` facts, each with its own prompts (identical requests in flight are asked once)."""
    rows = [json.loads(line) for line in facts.read_text().splitlines()]
    many = [{**row, "id": f"{row['id']}-{k}", "context_id": f"{row['context_id']}-{k}", "value": f"{row['value']}{k}"}
            for k in range(-(-n // len(rows))) for row in rows][:n]
    facts.write_text("".join(json.dumps(row) + "\n" for row in many))


# Each: the simulator's misbehaviour (in seconds of its own clock), and the client settings a user would pass
# against it. The simulator runs on a compressed clock (--time-scale divides its latency, Retry-After and drip), the
# hung server's clean answers included. A client's deadline is two seconds, well above the clean answers' latency on a
# loaded machine: at one second, with the machine busy, clean answers queued in the client past it and were
# retried, several times the requests the drips and hangs called for, and the run took several times as long (the
# server's /stats counts every answer: at two seconds, as many as the clean run's). So a drip past it is not
# compressed (3 s over 2 s), and the waits after a deadline are shortened instead: a slow fact's chain of hung
# attempts waits its backoff after each, and the backoff is not what these tests are about.
FAST = ["--time-scale", "5"]
SHORT_BACKOFF = ["--retry-backoff", "0.05"]  # a twentieth of fhs.llm.openai.DEFAULT_BACKOFF_S
DEADLINE = ["--request-timeout", "2", *SHORT_BACKOFF]
BUSY_SERVERS = [
    ("60% HTTP 429 with Retry-After", ["--busy", "0.6", "--retry-after", "0.2", *FAST], []),
    ("30% hung connections, a short deadline", ["--hang", "0.3", *FAST], DEADLINE),
    ("slow drip: 30% of answers over 3 s, past a short deadline", ["--drip", "3", "--drip-share", "0.3"], DEADLINE),
    ("slow drip: every answer over 0.3 s, within the deadline", ["--drip", "0.3", *FAST], []),
]


# Facts of the busy-server runs: their first requests (two hypotheses a fact) are more than the 128 allowed in
# flight, so the clean run fills the limit; the busy runs' time is their slowest fact's chain of retries, which
# grows with the facts (200 facts took about three times as long as 100), so no more facts than fill it
BUSY_FACTS = 65
# The clean server's latency, in seconds: long enough that the first 128 requests are all still in flight when a
# loaded client sends the 128th (at 0.01 s a loaded run peaked at 127); the records do not depend on it
CLEAN_LATENCY = "1"


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
    """BUSY_FACTS facts at 128 in flight against a server that behaves: the records every busy server must give.

    Made once per session: under pytest-xdist, by the first worker that needs it, in the session's own folder
    (the workers' folders' parent) and under a lock; the others read its inputs and records there."""
    import fcntl
    import io
    import os
    import shutil

    from fhs.core.files import write_text_atomic

    shared = os.environ.get("PYTEST_XDIST_WORKER") is not None
    folder = tmp_path_factory.getbasetemp().parent if shared else tmp_path_factory.mktemp("clean-run")
    base = folder / "clean-run"
    with open(folder / "clean-run.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        made = folder / "clean-run.json"
        if not made.is_file():
            shutil.rmtree(base, ignore_errors=True)  # what a worker that failed halfway left
            base.mkdir()
            facts, concepts = write_inputs(base)
            many_facts(facts, BUSY_FACTS)
            with running(free_port(), "--fixed-latency", CLEAN_LATENCY) as url:
                code = main_quiet(facts, concepts, base / "run", url, base / "cache" / "responses.sqlite",
                                  io.StringIO())
                peak = stats(url)["max_in_flight"]
            write_text_atomic(made, json.dumps({"code": code, "peak": peak}))
    outcome = json.loads(made.read_text())
    assert outcome["code"] == 0
    assert outcome["peak"] == 128, outcome["peak"]  # the client keeps the whole limit in flight
    return base / "facts.jsonl", base / "concepts.csv", records_of(base / "run")


def main_quiet(facts, concepts, out, url, cache, err, *extra: str) -> int:
    import contextlib

    from fhs.cli import main

    with contextlib.redirect_stdout(err), contextlib.redirect_stderr(err):
        return main(["run", "--facts", str(facts), "--taxonomy", str(concepts), "--domain", "us-gaap",
                     "--method", "fhs", "--out", str(out), "--quiet", "--backend", "openai", "--base-url", url,
                     "--max-in-flight", "128", "--cache", str(cache), *extra])


@pytest.mark.slow
@pytest.mark.parametrize("name, server, client", BUSY_SERVERS, ids=[case[0] for case in BUSY_SERVERS])
def test_65_facts_at_128_in_flight_survive_a_busy_server_with_the_records_of_a_clean_run(
        name, server, client, clean_run, tmp_path):
    import io

    facts, concepts, clean = clean_run
    err = io.StringIO()
    with running(free_port(), "--fixed-latency", "0.05", "--seed", "7", *server) as url:
        code = main_quiet(facts, concepts, tmp_path / "run", url, tmp_path / "cache" / "responses.sqlite", err,
                          *client)
        summary = stats(url)
    assert code == 0, err.getvalue()[-2000:]
    misbehaved = {"--busy": "busy", "--hang": "hung", "--drip": "dripped"}[server[0]]
    assert summary[misbehaved] > 50, summary  # and misbehaved often
    # the same answers to the same requests: only timings differ, and the cache keys, which name the server's URL
    assert without(records_of(tmp_path / "run"), TIMING | {"key"}) == without(clean, TIMING | {"key"})
