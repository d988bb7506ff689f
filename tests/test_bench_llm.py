"""fhs bench llm: the cost summary's arithmetic, and one real run on SmolLM2."""

import pytest

from fhs.bench.llm import CallCost, call_costs, format_table


def test_summarize_counts_evaluated_prompt_tokens_and_splits_prompt_from_generation_time():
    calls = [CallCost("fhs", "hypothesis", 1000, 100, 5.0, 1000, 1.0),
             CallCost("fhs", "verifier", 1200, 50, 3.0, 200, 0.5)]
    row = call_costs(calls, n_facts=2)
    assert row["calls_per_fact"] == 1 and row["tokens_in_per_fact"] == 1100 and row["tokens_out_per_fact"] == 75
    assert row["prompt_evaluated_per_fact"] == 600
    assert row["prompt_reused_share"] == pytest.approx(1 - 1200 / 2200, abs=1e-3)
    assert row["prompt_tok_s"] == pytest.approx(1200 / 1.5, abs=0.1)
    assert row["generation_tok_s"] == pytest.approx(150 / 6.5, abs=0.1)
    assert row["seconds_per_fact"] == 4.0


def test_summarize_without_backend_timings_leaves_the_speeds_empty():
    row = call_costs([CallCost("direct", "selector", 10, 2, 0.1, None, None)], n_facts=1)
    assert row["prompt_tok_s"] is None and row["generation_tok_s"] is None and row["seconds_per_fact"] == 0.1


@pytest.mark.model
@pytest.mark.data
def test_bench_llm_measures_a_real_model_with_a_fresh_cache():
    from fhs.bench.llm import bench_llm

    result = bench_llm(["fincl"], ["direct", "fhs"], profile="smoke", facts=1, progress=False)
    assert result["fresh_cache"] and result["facts"] == 1
    direct, fhs = result["methods"]["direct"], result["methods"]["fhs"]
    assert direct["calls_per_fact"] == 1 and fhs["calls_per_fact"] >= 3
    assert fhs["tokens_out_per_fact"] > 0 and fhs["generation_tok_s"] > 0
    # the fact's later calls reuse the KV cache of the shared opening (system message + evidence)
    assert fhs["prompt_evaluated_per_fact"] < fhs["tokens_in_per_fact"]
    assert "fhs" in format_table(result)
