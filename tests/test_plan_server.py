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
    assert fp8["days"] < bf16["days"] and fp8["floor_days"]["60%"] < bf16["floor_days"]["60%"]
    assert bf16["range_days"][0] <= bf16["days"] == bf16["range_days"][1]


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
