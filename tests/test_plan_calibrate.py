"""A plan calibrated on a server (fhs.plan.calibrate): the simulated server's known rates, KV capacity and
tokenizer, recovered through the project's client."""

from __future__ import annotations

import httpx
import pytest

from fhs.llm.tokens import ServerTokens, default_counter
from fhs.plan.calibrate import kv_capacity, probe
from fhs.plan.sim_server import running
from llama_server import free_port
from test_plan import run_plan

PREFILL, DECODE, SEQS, KV = 20_000.0, 1_500.0, 16, 100_000
TOLERANCE = 0.10  # HTTP, the simulator's own tokenizing and a shared 2-core machine add to the wall time


@pytest.fixture(scope="module")
def sim():
    with running(free_port(), "--prefill-tps", str(PREFILL), "--decode-tps", str(DECODE), "--max-num-seqs",
                 str(SEQS), "--kv-tokens", str(KV)) as url:
        yield url


def test_the_servers_tokenizer_counts_as_the_plans_vocabulary(sim):
    text = "NetIncomeLoss | Net Income (Loss) Attributable to Parent\n[12] us-gaap:Revenues | monetary"
    reply = httpx.post(sim.removesuffix("/v1") + "/tokenize", json={"model": "Qwen/Qwen3-32B", "prompt": text},
                       timeout=10, trust_env=False).json()
    assert reply["count"] == len(reply["tokens"]) == default_counter().count(text)
    assert ServerTokens(sim, "Qwen/Qwen3-32B").count(text) == reply["count"]


def test_the_kv_capacity_is_read_from_the_servers_metrics(sim):
    assert kv_capacity(sim) == KV // 16 * 16


def test_the_probe_recovers_the_servers_prefill_and_decode_rates(sim):
    measured = probe(sim, "Qwen/Qwen3-32B", default_counter(), prompt_tokens=4_000, batch=SEQS, prompts=8)
    assert measured.prefill_tps == pytest.approx(PREFILL, rel=TOLERANCE)
    assert measured.decode_tps == pytest.approx(DECODE, rel=TOLERANCE)
    assert measured.kv_tokens == KV // 16 * 16
    assert measured.detail["decode"]["output_tokens"] == SEQS * 256  # ignore_eos: every answer ran its length


def test_fhs_plan_prints_days_at_the_measured_rates_beside_the_published_ones(monkeypatch, capsys):
    small_kv = 4_096  # a decode batch of a few of the fixture's requests keeps the probe short
    with running(free_port(), "--prefill-tps", str(PREFILL), "--decode-tps", str(DECODE), "--max-num-seqs",
                 str(SEQS), "--kv-tokens", str(small_kv), "--time-scale", "4") as url:
        code, out, err = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--quiet", "--gpu", "h100",
                                  "--precision", "fp8", "--base-url", url, "--calibrate")
    assert code == 0, err
    assert "tokens counted with the server's tokenizer" in out
    published, measured = out.split("server (published rates):")[1].split("server (measured):")
    assert "KV cache: 309,031 tokens" in published and f"KV cache: {small_kv:,} tokens" in measured
    assert f"measured at {url}" in measured and "days" in measured


def test_a_vllm_bench_result_file_gives_the_throughput(monkeypatch, capsys, tmp_path):
    result = tmp_path / "bench.json"
    result.write_text('{"completed": 500, "duration": 600.0, "total_input_tokens": 2000000, '
                      '"total_output_tokens": 100000, "total_token_throughput": 3500.0, "mean_tpot_ms": 40.0}')
    code, out, err = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--quiet", "--bench-json", str(result))
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith("wall time at")]
    assert "3,500 tok/s in all (measured: vllm bench serve (bench.json): 500 requests of 4,000 in and 200 out" in line


@pytest.mark.parametrize("text", ["[1, 2]", "{not json", '{"completed": 5, "total_input_tokens": 10}',
                                  '{"completed": 5, "total_input_tokens": 10, "total_output_tokens": 2, '
                                  '"total_token_throughput": "fast"}'])
def test_a_file_that_is_no_bench_result_is_refused_in_one_line(monkeypatch, capsys, tmp_path, text):
    result = tmp_path / "bench.json"
    result.write_text(text)
    code, out, err = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--quiet", "--bench-json", str(result))
    assert code == 2 and out == ""
    (line,) = err.strip().splitlines()
    assert "bench.json" in line and "vllm bench serve --save-result" in line
