"""The simulated OpenAI-compatible server: schema-valid answers, Qwen token counts, a batching server's timing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import jsonschema
import pytest

from fhs.data.domain import load_domain
from fhs.llm.contract import Message, Request
from fhs.llm.openai import OpenAIBackend
from fhs.llm.tokens import count_messages, default_counter
from fhs.method.hypotheses import hypothesis_schema
from fhs.method.verifier import verifier_schema
from fhs.plan.sim_server import COMMAND, Level, running, stats
from llama_server import free_port

EVIDENCE = "Value: 1,234\nDatatype: monetaryItemType\nSource context: Total revenue from contracts with customers"


def ask(url: str, content: str = EVIDENCE, **body) -> httpx.Response:
    payload = {"model": "Qwen/Qwen3-32B", "messages": [{"role": "user", "content": content}], "max_tokens": 256,
               "temperature": 0.0, **body}
    return httpx.post(f"{url}/chat/completions", json=payload, timeout=30, trust_env=False)


@pytest.fixture(scope="module")
def fixed(tmp_path_factory):
    log = tmp_path_factory.mktemp("sim") / "requests.jsonl"
    with running(free_port(), "--fixed-latency", "0.3", "--max-model-len", "4096", "--log", str(log)) as url:
        yield url, log


def test_answers_follow_the_requests_schema_with_qwen_usage(fixed):
    url, _ = fixed
    schema = hypothesis_schema(load_domain("us-gaap"))
    reply = ask(url, response_format={"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}).json()
    choice = reply["choices"][0]
    jsonschema.validate(json.loads(choice["message"]["content"]), schema)
    assert choice["finish_reason"] == "stop"
    counter = default_counter()
    expected = count_messages(counter, [{"role": "user", "content": EVIDENCE}], thinking_off=False)
    assert reply["usage"]["prompt_tokens"] == expected
    assert reply["usage"]["completion_tokens"] == counter.count(choice["message"]["content"]) + 1


def test_greedy_ignores_the_seed_and_sampling_follows_it(fixed):
    url, _ = fixed
    schema = verifier_schema(load_domain("us-gaap"), ["us-gaap:A", "us-gaap:B", "us-gaap:C"])
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": schema}}

    def text(**body):
        return ask(url, response_format=fmt, **body).json()["choices"][0]["message"]["content"]

    assert text(seed=1) == text(seed=2)
    sampled = {text(seed=s, temperature=0.8) for s in range(6)}
    assert len(sampled) > 1


def test_an_answer_longer_than_max_tokens_is_cut_with_finish_reason_length(fixed):
    url, _ = fixed
    reply = ask(url, max_tokens=3).json()
    assert reply["choices"][0]["finish_reason"] == "length" and reply["usage"]["completion_tokens"] == 3


def test_a_prompt_over_the_context_is_refused_as_vllm_does(fixed):
    url, _ = fixed
    reply = ask(url, content="revenue " * 5000)
    assert reply.status_code == 400 and "maximum context length is 4096 tokens" in reply.text
    assert ask(url, n=2).status_code == 400  # n > 1 with greedy decoding, as vLLM


def test_models_lists_the_context_length(fixed):
    url, _ = fixed
    model = httpx.get(f"{url}/models", trust_env=False).json()["data"][0]
    assert (model["id"], model["max_model_len"]) == ("Qwen/Qwen3-32B", 4096)


def test_requests_in_flight_are_counted_and_logged_with_purpose_and_prefix_hashes(fixed):
    url, log = fixed
    httpx.post(url.removesuffix("/v1") + "/stats/reset", trust_env=False)
    shared = "Instructions: " + "tag the fact with its concept. " * 30
    backend = OpenAIBackend([url], "Qwen/Qwen3-32B", max_in_flight=10)
    asked = [Request(messages=(Message("user", f"{shared}\nValue: {i}" + f" row {i} of the table" * 20),),
                     sample_index=i, purpose="verifier") for i in range(10)]
    backend.complete(asked)
    summary = stats(url)
    assert summary["requests"] == 10 and summary["max_in_flight"] == 10 and summary["in_flight_now"] == 0
    assert 0 < summary["mean_in_flight"] <= 10
    lines = [json.loads(line) for line in log.read_text().splitlines()][-10:]
    assert {line["purpose"] for line in lines} == {"verifier"}
    assert all(line["arrival"] <= line["start"] <= line["finish"] for line in lines)
    # ten at once, not one after another: the last arrived before the first finished (the server's clock,
    # so a busy test machine cannot make it flaky as a wall-clock bound did)
    assert max(line["arrival"] for line in lines) < min(line["finish"] for line in lines)
    first, second = lines[0]["prefix_hashes"], lines[1]["prefix_hashes"]
    shared_blocks = next(i for i, (a, b) in enumerate(zip(first, second)) if a != b)  # the suffixes differ
    assert shared_blocks * 16 >= 0.8 * default_counter().count(shared)  # the instructions are a shared prefix
    assert lines[0]["prompt_sha256"] != lines[1]["prompt_sha256"]


def test_requests_beyond_max_num_seqs_queue_and_latency_follows_the_decode_rate():
    # 2 sequences; decode 40 tok/s for a full batch -> 20 tok/s a sequence; prefill nearly free
    with running(free_port(), "--max-num-seqs", "2", "--decode-tps", "40", "--prefill-tps", "1e9") as url:
        backend = OpenAIBackend([url], "Qwen/Qwen3-32B", max_in_flight=8)
        asked = [Request(messages=(Message("user", f"{EVIDENCE} {i}"),), sample_index=i, max_tokens=8)
                 for i in range(6)]
        started = time.perf_counter()
        out = backend.complete(asked)
        elapsed = time.perf_counter() - started
        summary = stats(url, timeline=True)
    assert summary["max_running"] == 2 and summary["max_in_flight"] == 6
    per_request = max(r.tokens_out for r in out) / 20  # seconds at 20 tok/s a sequence
    assert elapsed >= 3 * min(r.tokens_out for r in out) / 20 * 0.9  # three waves of two
    assert elapsed < 3 * per_request + 2
    assert 0.5 < summary["utilisation"] <= 1.0
    assert summary["in_flight_timeline"][0][1] == 1


def test_time_scale_divides_latency():
    with running(free_port(), "--fixed-latency", "2", "--time-scale", "10") as url:
        started = time.perf_counter()
        assert ask(url).status_code == 200
        assert time.perf_counter() - started < 2.0  # unscaled, the server alone would take 2 s


def test_time_scale_divides_a_busy_servers_retry_after_and_drip():
    """A busy server runs on the same compressed clock as a healthy one (tests/test_server_runs.py's do)."""
    with running(free_port(), "--fixed-latency", "0", "--time-scale", "10", "--busy", "1", "--retry-after", "2") as url:
        refused = ask(url)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "0.2"
    with running(free_port(), "--fixed-latency", "0", "--time-scale", "10", "--drip", "4") as url:
        started = time.perf_counter()
        assert ask(url).status_code == 200
        elapsed = time.perf_counter() - started
    assert 0.3 < elapsed < 4.0  # dripped over 0.4 s; unscaled, over 4 s


def test_sigterm_prints_the_in_flight_summary():
    port = free_port()
    process = subprocess.Popen([*COMMAND, "--port", str(port),
                                "--fixed-latency", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert "sim_server: http://127.0.0.1:" in process.stdout.readline()
        assert ask(f"http://127.0.0.1:{port}/v1").status_code == 200
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=10)
    summary = json.loads(err.strip().splitlines()[-1].removeprefix("sim_server: "))
    assert summary["requests"] == 1 and "mean_in_flight" in summary and process.returncode == 0


def test_time_weighted_means_of_a_level():
    level = Level()
    for at, by in [(1.0, +1), (2.0, +1), (3.0, -1), (4.0, -1)]:
        level.move(at, by)
    assert level.mean(1.0, 4.0) == pytest.approx((1 + 2 + 1) / 3)
    assert level.share_at_least(2, 1.0, 4.0) == pytest.approx(1 / 3) and level.peak == 2


def test_many_clients_at_once_do_not_need_a_thread_each(fixed):
    url, _ = fixed
    with ThreadPoolExecutor(max_workers=32) as pool:
        codes = list(pool.map(lambda i: ask(url, content=f"{EVIDENCE} {i}").status_code, range(64)))
    assert codes == [200] * 64
