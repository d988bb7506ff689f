"""fhs plan's server model: KV bytes and capacity, concurrency, measured rates, prefix share."""

import pytest

from fhs.llm.contract import Message, Request
from fhs.plan.meter import PrefixShare
from fhs.plan.server import Server, format_server, model_time

PURPOSES = {"selector": {"requests": 1000, "prompt_tokens": 14_600_000, "output_tokens": 58_000,
                         "mean_prompt_tokens": 14_600, "mean_output_tokens": 58},
            "rewrite": {"requests": 3000, "prompt_tokens": 3_000_000, "output_tokens": 150_000,
                        "mean_prompt_tokens": 1000, "mean_output_tokens": 50}}
TOTAL = {"requests": 4000, "prompt_tokens": 17_600_000, "output_tokens": 208_000}


def test_qwen3_32b_holds_256_kib_a_token_in_bf16_and_half_in_fp8():
    assert Server().model.kv_bytes_per_token("bf16") == 256 * 1024
    assert Server().model.kv_bytes_per_token("fp8") == 128 * 1024


def test_one_h100_in_bf16_holds_a_selector_prompt_or_two_fp8_about_twenty():
    bf16 = model_time(Server("h100", "bf16"), PURPOSES, TOTAL, 0.0)
    fp8 = model_time(Server("h100", "fp8"), PURPOSES, TOTAL, 0.0)
    assert 1 <= bf16["selector_prompts_held"] <= 4
    assert 18 <= fp8["selector_prompts_held"] <= 25
    assert fp8["days"] < bf16["days"] and fp8["floor_days"] < bf16["floor_days"]
    assert bf16["range_days"] == [bf16["days"], bf16["no_reuse_days"]]


def test_prefix_share_and_measured_rates_enter_the_days():
    base = model_time(Server("h200"), PURPOSES, TOTAL, 0.0)
    reused = model_time(Server("h200"), PURPOSES, TOTAL, 0.5)
    assert reused["prefill_days"] == pytest.approx(base["prefill_days"] / 2, abs=0.01)
    measured = model_time(Server("h200", prefill_tps=1000.0, decode_tps=100.0), PURPOSES, TOTAL, 0.0)
    assert measured["prefill_tps"] == 1000.0 and measured["decode_source"] == "measured"
    assert measured["prefill_days"] == pytest.approx(17_600_000 / 1000 / 86400, abs=0.01)
    assert any("selector prompts" in line for line in format_server(measured))


def test_an_unknown_gpu_or_precision_is_refused():
    with pytest.raises(ValueError, match="h100"):
        Server("a100")
    with pytest.raises(ValueError, match="fp8"):
        Server("h100", "int4")


def test_prefix_share_counts_blocks_an_earlier_prompt_began_with():
    share = PrefixShare()
    system = "x" * 640
    share.add(Request(messages=(Message("system", system), Message("user", "a" * 640))))
    assert share.share == 0.0
    share.add(Request(messages=(Message("system", system), Message("user", "b" * 640))))
    assert 0.2 < share.share < 0.3  # the second prompt's first half of 1,290 characters was seen


def test_memory_is_what_the_devices_report_not_the_marketing_size():
    """An H100 80GB reports 81,559 MiB (85.5 GB): vLLM's 0.9 share of it, less 61 GiB of BF16 weights and
    2 GiB, leaves KV cache for about 35k tokens, above the 32,768 the recipe's context needs."""
    from fhs.plan.server import GPUS

    assert GPUS["h100"].memory_bytes == 81_559 * 1024 ** 2
    assert 34_000 < Server("h100", "bf16").kv_tokens() < 37_000
    assert Server("h100", "bf16").model.weight_bytes("bf16") / 1024 ** 3 == pytest.approx(61.0, abs=0.1)


@pytest.mark.parametrize("gpu", ["h100", "h200", "b200"])
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
@pytest.mark.parametrize("share", [0.0, 0.3, 0.6])
def test_no_plan_prints_a_floor_above_a_modelled_value(gpu, precision, tp, share):
    """The floor counts the prefix cache, so it sits below the days at full reuse and at none."""
    server = Server(gpu, precision, tp)
    model = model_time(server, PURPOSES, TOTAL, share)
    assert model["floor_days"] <= model["days"] <= model["no_reuse_days"]
    assert model["floor_days"] <= model["prefill_days"] + model["decode_days"] + 0.01
    for line in format_server(model):
        assert "MFU to" not in line  # one floor, not a band that can cross the modelled days


def test_measured_rates_beyond_the_floors_utilisation_lower_the_floor_not_cross_it():
    fast = model_time(Server("h100", "fp8", prefill_tps=60_000.0, decode_tps=20_000.0), PURPOSES, TOTAL, 0.2)
    assert fast["floor_mfu"] > 0.6 and fast["floor_days"] <= fast["days"]


def test_rates_say_where_they_come_from():
    def source(gpu, precision, tp=1):
        return model_time(Server(gpu, precision, tp), PURPOSES, TOTAL, 0.0)["prefill_source"]

    assert source("h100", "bf16") == "published (vLLM, H100)"
    assert "TensorRT-LLM" in source("h100", "fp8") and source("h100", "fp8").startswith("scaled")
    for gpu in ("h200", "b200"):
        assert source(gpu, "bf16").startswith("scaled") and "bandwidth" in source(gpu, "bf16")
    assert "tensor-parallel" in source("h100", "bf16", 2)
