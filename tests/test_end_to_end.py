"""``fhs run`` end to end with a real model: in process, through a server, and after failures.

These run SmolLM2-135M on the CPU (the smoke profile) over two or three FinCL
facts. What they check is the plumbing the book relies on: every stage's record
is written, a rerun is served from the response cache with zero model calls,
and a failed or killed run keeps its finished facts and continues.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from cli_in_process import fhs
from fhs.run.records import read_records
from llama_server import free_port, serve_smollm2
from run_copy import copy_folder

pytestmark = [pytest.mark.model, pytest.mark.data]


def run_cli(folder: Path, *args: str) -> tuple[int, dict | None, str]:
    """``fhs run --dataset fincl --quiet ARGS`` in this process, from ``folder``: exit status, metrics, stderr."""
    done = fhs("run", "--dataset", "fincl", "--quiet", *args, cwd=folder)
    text = done.stdout
    return done.returncode, json.loads(text[text.index("{"):]) if done.returncode == 0 else None, done.stderr


def fhs_args(out: Path, cache: Path, limit: int = 2, *extra: str) -> list[str]:
    # one hypothesis a fact (J = 1): the plumbing is the same for one as for two, at about half the model's time
    return ["--method", "fhs", "--profile", "smoke", "--limit", str(limit), "--j", "1", "--out", str(out),
            "--cache", str(cache), *extra]


def assert_full_records(path: Path, n: int) -> list[dict]:
    records = read_records(path / "records.jsonl")
    assert len(records) == n
    for record in records:
        assert len(record["hypotheses"]) >= 1
        assert record["queries"] and record["rankings"] and record["pool"]["ids"]
        assert record["verifier"] is None or record["verifier"]["window"]["ids"]
        assert len(record["ranking"]) <= 200 and "selected" in record
        purposes = {call["purpose"] for call in record["llm_calls"]}
        assert {"hypothesis", "selector"} <= purposes
    return records


@dataclass(frozen=True)
class FirstRun:
    """The in-process FHS run over the first two facts: its exit code, metrics, stderr, folder and cache."""

    code: int
    metrics: dict | None
    err: str
    out: Path
    cache: Path

    def cache_copy(self, folder: Path) -> Path:
        """A test's own copy of the cache's folder (the response cache and the verdict ledger beside it)."""
        return copy_folder(self.cache.parent, folder / "cache") / self.cache.name


@pytest.fixture(scope="module")
def first_run(tmp_path_factory) -> FirstRun:
    """One real-model run that two tests read: the cache rerun replays it, the killed run starts on its cache."""
    folder = tmp_path_factory.mktemp("first-run")
    cache = folder / "cache" / "responses.sqlite"  # its own folder, which a test copies whole
    code, metrics, err = run_cli(folder, *fhs_args(folder / "a", cache))
    return FirstRun(code, metrics, err, folder / "a", cache)


class Server:
    """The module's SmolLM2 server on one port: started when a test needs it, stopped and started again by
    the test of an unreachable server, so the module starts it twice rather than three times."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._running: contextlib.ExitStack | None = None

    def up(self) -> str:
        if self._running is None:
            running = contextlib.ExitStack()
            running.enter_context(serve_smollm2(n_ctx=4096, port=self.port))
            self._running = running
        return self.url

    def down(self) -> None:
        running, self._running = self._running, None
        if running is not None:
            running.close()


@pytest.fixture(scope="module")
def server():
    shared = Server()
    try:
        yield shared
    finally:
        shared.down()


def ledger_served(records: list[dict]) -> int:
    """Parsed verdicts come back from the verdict ledger without a request; all else from the cache."""
    return sum(c["purpose"] == "verifier" and c["parsed"] for r in records for c in r["llm_calls"])


def test_fhs_in_process_then_entirely_from_the_cache(first_run, tmp_path):
    cache = first_run.cache_copy(tmp_path)
    code, first, err = first_run.code, first_run.metrics, first_run.err
    assert code == 0, err
    assert first["llm_calls"] > 0
    assert first["n_facts"] == 2 and first["tokens_in"] > 0 and "accuracy" in first
    records = assert_full_records(first_run.out, 2)

    code, second, err = run_cli(tmp_path, *fhs_args(tmp_path / "b", cache, 2, "--cache-unparsed"))  # SmolLM2's unparseable answers too
    assert code == 0, err
    assert second["llm_calls"] == 0
    again = read_records(tmp_path / "b" / "records.jsonl")
    assert second["cache_hits"] == first["llm_calls"] + first["cache_hits"] - ledger_served(records)
    assert [r["ranking"] for r in again] == [r["ranking"] for r in records]
    assert [r["selected"] for r in again] == [r["selected"] for r in records]


def test_fhs_through_the_llama_cpp_server_then_from_the_cache(server, tmp_path):
    cache = tmp_path / "responses.sqlite"
    url = server.up()
    served = ["--backend", "openai", "--base-url", url, "--schema-transport", "json_object", "--workers", "2"]
    code, first, err = run_cli(tmp_path, *fhs_args(tmp_path / "a", cache, 2, *served))
    assert code == 0, err
    assert first["llm_calls"] > 0
    records = assert_full_records(tmp_path / "a", 2)
    code, second, err = run_cli(tmp_path, *fhs_args(tmp_path / "b", cache, 2, *served, "--cache-unparsed"))
    assert code == 0, err
    assert second["llm_calls"] == 0
    assert second["cache_hits"] == first["llm_calls"] + first["cache_hits"] - ledger_served(records)


def test_an_unreachable_server_keeps_finished_facts_and_the_rerun_continues(server, tmp_path):
    cache, out = tmp_path / "responses.sqlite", tmp_path / "run"
    url = server.up()
    served = ["--backend", "openai", "--base-url", url, "--schema-transport", "json_object"]
    code, _, err = run_cli(tmp_path, *fhs_args(out, cache, 1, *served))
    assert code == 0, err
    server.down()
    finished = read_records(out / "records.jsonl")
    assert len(finished) == 1

    # the server is gone. A new process names it after 5 quick tries (13.8 s measured); a rerun in
    # this same process waited for it to come back until the give-up time (600 s), so it is short here
    code, _, err = run_cli(tmp_path, *fhs_args(out, cache, 2, *served, "--give-up-after", "1"))
    assert code == 3
    assert url in err and "run the same command again" in err and err.count("\n") == 2
    assert err.startswith("fhs: fincl: the first 2 of")  # the run's first line: which facts, no sample
    assert read_records(out / "records.jsonl") == finished

    server.up()  # back on the same port
    code, resumed, err = run_cli(tmp_path, *fhs_args(out, cache, 2, *served))
    assert code == 0, err
    assert resumed["n_new"] == 1 and resumed["n_facts"] == 2
    assert read_records(out / "records.jsonl")[0] == finished[0]


def test_a_killed_run_keeps_its_records_and_the_next_run_finishes_the_rest(first_run, tmp_path):
    # the first two facts' answers are in the cache, so the model's time goes to the third, where the kill lands
    cache, out = first_run.cache_copy(tmp_path), tmp_path / "run"
    command = [sys.executable, "-m", "fhs.cli", "run", "--dataset", "fincl", "--quiet",
               *fhs_args(out, cache, 3)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    records_file = out / "records.jsonl"
    deadline = time.monotonic() + 600
    while not (records_file.exists() and records_file.read_text().count("\n") >= 1):
        assert process.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    survivors = read_records(records_file)
    assert 1 <= len(survivors) < 3

    code, resumed, err = run_cli(tmp_path, *fhs_args(out, cache, 3))
    assert code == 0, err
    assert resumed["n_new"] == 3 - len(survivors)
    records = read_records(records_file)
    assert [r["id"] for r in records][: len(survivors)] == [r["id"] for r in survivors]
    assert len({r["id"] for r in records}) == 3
