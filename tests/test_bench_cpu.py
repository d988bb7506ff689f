"""python -m dev.bench_cpu and the CPU record: instruction-set levels, CPUID masking, real encoder and model runs."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dev.bench_cpu import (EncoderSetting, LlamaSetting, bench_encoder, bench_llama, bench_sampling, encoder_grid,
                           format_sampling, sampling_requests)
from dev.cpuid_mask import can_mask, isa_environment
from fhs.core.errors import InputError
from fhs.run.cpu_info import cpu_record, level, mlas_kernels
from fhs.run.profiles import PROFILES

V3 = {"sse4_2", "popcnt", "ssse3", "avx", "avx2", "fma", "f16c", "bmi2", "movbe"}
V4 = V3 | {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"}


def test_levels_follow_the_x86_64_definitions():
    assert level(V4) == "x86-64-v4"
    assert level(V3) == "x86-64-v3"
    assert level(V4 - {"avx512cd"}) == "x86-64-v3"  # one AVX-512 part missing: not v4
    assert level({"sse4_2", "popcnt", "ssse3"}) == "x86-64-v2"


def test_mlas_kernels_name_what_onnx_runtime_picks():
    assert mlas_kernels({"AVX2", "FMA3"}) == "fp32 GEMM FMA3 (the encoder's), int8 GEMM AVX2"
    wide = {"AVX2", "FMA3", "AVX512F", "AVX512BW", "AVX512DQ", "AVX512VL", "AVX512VNNI"}
    assert mlas_kernels(wide) == "fp32 GEMM AVX512F (the encoder's), int8 GEMM AVX512-VNNI"


def test_cpu_record_names_the_cpu_and_its_cores():
    record = cpu_record()
    assert record["cpu"] and int(record["cores (this process may use)"]) >= 1
    assert record["x86-64 level"].startswith("x86-64") or record["x86-64 level"]
    assert record["CPUID in this process"] == "as the CPU reports"


def test_an_unknown_isa_is_a_one_line_error(tmp_path):
    with pytest.raises(InputError, match="x86-64-v3"):
        isa_environment("x86-64-v9", tmp_path)


def test_the_preload_hides_avx512_from_cpuid(tmp_path):
    if not can_mask():  # no CPUID faulting here: the level is refused with a reason, not faked
        with pytest.raises(InputError, match="CPUID faulting"):
            isa_environment("x86-64-v3", tmp_path)
        return
    code = "from fhs.run.cpu_info import cpu_record, process_simd; import json; " \
           "print(json.dumps([cpu_record()['CPUID in this process'], process_simd()]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=isa_environment("x86-64-v3", tmp_path))
    seen, simd = json.loads(out.stdout)
    assert "masked" in seen
    assert "AVX2" in simd and not [name for name in simd if name.startswith("AVX512")]


def test_programs_with_their_own_segv_handler_run_masked_and_still_see_real_faults(tmp_path):
    """Python's faulthandler (and gcc's cc1) install a SIGSEGV handler: the mask keeps working and
    a real fault still reaches theirs."""
    if not can_mask():
        pytest.skip("this CPU has no CPUID faulting, so nothing runs masked (the refusal is tested above)")
    env = isa_environment("x86-64-v3", tmp_path)
    code = ("import faulthandler, json, sys; faulthandler.enable(); "
            "from fhs.run.cpu_info import process_simd; print(json.dumps(sorted(process_simd()))); sys.stdout.flush(); "
            "import ctypes; ctypes.string_at(0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == -11  # the real fault killed it, after faulthandler spoke
    assert "Fatal Python error: Segmentation fault" in out.stderr
    simd = json.loads(out.stdout.strip().splitlines()[-1])
    assert "AVX2" in simd and not [name for name in simd if name.startswith("AVX512")]
    source = tmp_path / "empty.c"
    source.write_text("int main(void) { return 0; }\n")
    target = subprocess.run(["cc", "-march=native", "-Q", "--help=target"], capture_output=True, text=True,
                            env=env, check=True).stdout  # cc1 runs under the mask; -march=native reads it
    flags = {line.split()[0]: line.split()[-1] for line in target.splitlines() if line.strip().startswith("-mavx")}
    assert flags["-mavx2"] == "[enabled]" and flags["-mavx512f"] == "[disabled]"
    subprocess.run(["cc", "-O2", "-o", str(tmp_path / "empty"), str(source)], env=env, check=True)


def test_the_grid_compares_the_old_cut_and_batching_on_every_level():
    grid = encoder_grid(["native", "x86-64-v3"])
    assert grid[0] == EncoderSetting("minilm-int8-d64") and grid[1] == EncoderSetting(order="chars")
    assert grid[2] == EncoderSetting() and EncoderSetting().model == PROFILES["cpu"].dense_model_for("icd-10-cm")
    assert EncoderSetting("minilm-int8-d64", isa="x86-64-v3") in grid
    assert EncoderSetting(order="chars", isa="x86-64-v3") in grid and EncoderSetting(isa="x86-64-v3") in grid
    assert len({s.label() for s in grid}) == len(grid)
    for isa in ("native", "x86-64-v3"):  # a build's chunks in one session and in two processes, per level
        assert EncoderSetting(isa=isa, chunk=128) in grid and EncoderSetting(isa=isa, chunk=128, processes=2) in grid


@pytest.mark.model
def test_bench_encoder_runs_the_real_model_in_workers_and_compares_vectors():
    texts = ["Revenue from contracts with customers.", "Nausea and vomiting.",
             "Assets held for sale, carrying amount, current and noncurrent, at the end of the period."] * 4
    isas = ["native", "x86-64-v3"] if can_mask() else ["native"]
    settings = [EncoderSetting(order="chars", batch_size=4)] + [EncoderSetting(batch_size=4, isa=i) for i in isas]
    settings += [EncoderSetting(batch_size=4, chunk=5), EncoderSetting(batch_size=4, chunk=5, processes=2)]
    result = bench_encoder(texts, settings, rounds=1)
    rows = result["rows"]
    assert [row["setting"] for row in rows] == [s.label() for s in settings]
    assert all(row["concepts_per_s"] > 0 for row in rows)
    assert rows[1]["max_abs_diff"] < 1e-5  # batching by tokens: the same vectors
    assert rows[-1]["max_abs_diff"] == 0.0  # two processes: the vectors of one session, chunk by chunk
    assert all(row["min_cosine"] > 0.99999 for row in rows)  # AVX2 kernels: float rounding only
    if can_mask():
        assert "masked" in result["cpu"]["x86-64-v3"]["CPUID in this process"]


@pytest.mark.model
def test_bench_llama_times_prompt_and_generation_on_smollm2():
    result = bench_llama([LlamaSetting(), LlamaSetting(n_ubatch=64)], model="smollm2-135m", prompt_tokens=160,
                         suffix_tokens=20, generate=6, rounds=1)
    rows = result["rows"]
    assert rows[0]["same_tokens"] is True
    assert all(row["prompt_tok_s"] > 0 and row["suffix_tok_s"] > 0 and row["gen_tok_s"] > 0 for row in rows)
    assert "AVX2" in result["llama_cpp"]


@pytest.mark.model
def test_bench_sampling_replays_a_methods_requests_both_ways_on_smollm2():
    requests = sampling_requests(("fincl",), ("structured",), facts=1)
    assert requests and all(r.schema is not None for r in requests)  # what the cpu profile sends
    # the first request of each purpose: every schema the method sends, each answered both ways
    purposes = dict.fromkeys(r.purpose for r in requests)
    requests = [next(r for r in requests if r.purpose == purpose) for purpose in purposes]
    result = bench_sampling(requests, model="smollm2-135m", n_ctx=4096)
    every, first = result["rows"]
    assert every["setting"] == "every token" and first["setting"] == "likeliest first"
    assert first["same_replies"] == every["same_replies"] == len(requests) == result["requests"]
    assert every["tokens_out"] == first["tokens_out"] > 0 and first["gen_tok_s"] > 0
    assert every["narrowed"] == every["whole"] == 0 and first["narrowed"] + first["whole"] > 0
    assert "sampling" in format_sampling(result)
