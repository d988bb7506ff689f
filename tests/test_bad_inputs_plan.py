"""fhs plan refuses servers that cannot run (issue 53, case 13): one line, exit 2, what would fit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from fhs.plan import server as server_model
from test_plan import run_plan


def refused(monkeypatch, capsys, *argv) -> str:
    code, out, err = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--quiet", *argv)
    assert code == 2, (out, err)
    assert out == "" and "Traceback" not in err
    (line,) = err.strip().splitlines()
    return line


def test_a_tensor_parallel_width_beyond_a_node_is_refused_before_any_planning(monkeypatch, capsys):
    loaded: list = []
    line = refused(monkeypatch, capsys, "--gpu", "h100", "--tensor-parallel", "1000000000")
    assert "--tensor-parallel 1000000000" in line and "at most 8" in line and "1, 2, 4, 8" in line
    assert not loaded


def test_a_width_the_heads_do_not_split_over_is_refused(monkeypatch, capsys):
    line = refused(monkeypatch, capsys, "--gpu", "h200", "--tensor-parallel", "3")
    assert "64 attention heads" in line and "1, 2, 4, 8" in line


@pytest.mark.parametrize("flag", [["--precision", "fp8"], ["--tensor-parallel", "8"], ["--calibrate"]])
def test_server_flags_without_a_gpu_are_refused_not_ignored(monkeypatch, capsys, flag):
    line = refused(monkeypatch, capsys, *flag)
    assert flag[0] in line and "--gpu" in line


def test_weights_that_do_not_fit_are_refused_with_what_fits(monkeypatch, capsys):
    small = replace(server_model.GPUS["h100"], memory_mib=70_000)  # 0.9 of it is under BF16's 61 GiB of weights
    monkeypatch.setitem(server_model.GPUS, "h100", small)
    line = refused(monkeypatch, capsys, "--gpu", "h100")
    assert "BF16" in line and "less than one" in line and "fits: --precision fp8 --tensor-parallel 1" in line


def test_a_kv_cache_that_cannot_hold_the_longest_request_is_refused(monkeypatch, capsys):
    """Weights fit, but not one selector prompt: the plan says so instead of printing days."""
    model = server_model.QWEN3_32B
    fits_weights = (model.weight_bytes("bf16") + 2 * 1024 ** 3 + 100 * model.kv_bytes_per_token("bf16")) / 0.9
    tight = replace(server_model.GPUS["h100"], memory_mib=int(fits_weights // 1024 ** 2) + 1)
    monkeypatch.setitem(server_model.GPUS, "h100", tight)
    assert 0 < server_model.Server("h100").kv_tokens() < 200
    line = refused(monkeypatch, capsys, "--gpu", "h100")
    assert "less than one" in line and "-token request" in line and "fits:" in line


@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "ftp://host/v1", "http://[::1"])
def test_a_base_url_that_is_no_http_url_is_refused(monkeypatch, capsys, url):
    line = refused(monkeypatch, capsys, "--base-url", url)
    assert "--base-url" in line and "not an http(s) URL" in line


def test_calibrate_needs_a_server(monkeypatch, capsys):
    line = refused(monkeypatch, capsys, "--gpu", "h100", "--precision", "fp8", "--calibrate")
    assert "--calibrate" in line and "--base-url" in line
