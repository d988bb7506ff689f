"""Measuring the prefix requests share: vLLM's block cache, llama.cpp's saved states, request logs."""

from __future__ import annotations

import json

import pytest

from dev.prefix_reuse import (IM_END, IM_START, BlockCache, RequestLog, SavedStates, chat_tokens, measure,
                              read_request_log, tokenized)
from fhs.core.errors import InputError
from fhs.data.domain import load_domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.line_tokens import LineTokenizer
from fhs.llm.tokens import CharEstimate, default_counter
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.run.ledger import MemoryLedger
from fhs.method.registry import get_method
from fhs.plan.simulated import SimulatedBackend
from fhs.retrieval.bm25 import RetrievalConfig, Retriever


def test_block_cache_reuses_whole_leading_blocks_seen_before_but_never_the_last_token():
    cache = BlockCache(block=4)
    first = list(range(10))  # two full blocks and a partial one
    assert cache.reuse(first) == 0
    assert cache.reuse(list(range(8)) + [99, 98]) == 8  # both full blocks, the tail is new
    assert cache.reuse(list(range(8))) == 4  # a repeat still computes its last block
    assert cache.reuse([0, 1, 2, 7] + list(range(4, 10))) == 0  # a block is keyed by all blocks before it
    assert cache.reuse([0, 1, 2]) == 0  # shorter than a block


def test_an_lru_block_cache_forgets_the_oldest_blocks():
    cache = BlockCache(block=2, capacity_blocks=2)
    cache.reuse([1, 1, 1, 1, 0])
    cache.reuse([2, 2, 2, 2, 0])  # evicts the first request's blocks
    assert cache.reuse([1, 1, 1, 1, 5]) == 0
    assert cache.reuse([1, 1, 1, 1, 6]) == 4


def test_saved_states_reuse_the_longest_common_prefix_of_the_last_n_prompts():
    one, several = SavedStates(1), SavedStates(3)
    stream = [[1, 2, 3, 4], [9, 9, 9], [1, 2, 3, 5], [1, 2, 3, 5]]
    assert [one.reuse(t) for t in stream] == [0, 0, 0, 3]  # the last prompt only
    assert [several.reuse(t) for t in stream] == [0, 0, 3, 3]  # a repeat keeps its last token to evaluate


def test_chat_tokens_lay_out_chatml():
    ids = chat_tokens([{"role": "system", "content": "ab"}, {"role": "user", "content": "cd"}], lambda s: list(map(ord, s)))
    text = [chr(i) if i >= 0 else {IM_START: "<s>", IM_END: "</s>"}[i] for i in ids]
    assert "".join(text) == "<s>system\nab</s>\n<s>user\ncd</s>\n<s>assistant\n"


def test_measure_reports_by_purpose_and_cache_model():
    stream = [("a", list(range(40))), ("b", list(range(32)) + [7] * 8), ("a", list(range(40)))]
    result = measure(stream, block=16, states=(1, 2))
    assert result["vllm"].total.reused_tokens == 32 + 32
    assert result["vllm"].by_purpose["b"].reused_tokens == 32 and result["vllm"].by_purpose["a"].requests == 2
    assert result["llama_cpp_1"].total.reused_tokens == 32 + 32
    assert result["llama_cpp_2"].total.reused_tokens == 32 + 39
    assert result["vllm"].to_dict()["share"] == round(64 / 120, 4)


TAXONOMY = Taxonomy.from_concepts("toy", [
    Concept("Revenues", "Revenues", "Amount of revenue recognized.", "monetaryItemType"),
    Concept("OtherRevenue", "Other Revenue", "Amount of other revenue.", "monetaryItemType"),
    Concept("CostOfRevenue", "Cost Of Revenue", "Cost of goods and services sold.", "monetaryItemType"),
])
TABLE = "Revenues | 2024 | 2023 Product revenues | 120 | 110 Other revenues | 19 | 17 Cost of revenue | 60 | 55 " * 12
FACTS = [Fact(id=f"f{i}", context_id="t", modality="table", value=value, datatype="monetaryItemType", context=TABLE,
              gold=("OtherRevenue",), row_header=row, column_header=year)
         for i, (value, row, year) in enumerate([("19", "Other revenues", "2024"), ("110", "Product revenues", "2023"),
                                                 ("55", "Cost of revenue", "2023")])]


def simulated_log(order: str) -> RequestLog:
    log = RequestLog(SimulatedBackend(counter=CharEstimate()))
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()), llm=log,
                        domain=load_domain("us-gaap"), config=FHSConfig(prompt_order=order), ledger=MemoryLedger())
    for method in ("structured", "fhs", "free-text"):
        for fact in FACTS:
            get_method(method)(fact, ctx)
    return log


@pytest.mark.model
def test_facts_of_one_table_share_more_prefix_in_the_new_order_and_logs_round_trip(tmp_path):
    tokenize = LineTokenizer(default_counter().tokenize) if default_counter().exact else (lambda s: list(s.encode()))
    shares = {}
    for order in ("evidence-first", "shared-first"):
        log = simulated_log(order)
        path = log.write(tmp_path / f"{order}.jsonl")
        entries = list(read_request_log(path))
        assert entries == log.entries and len(entries) == 3 * (2 + 5 + 2)  # structured, fhs, free-text
        shares[order] = measure(tokenized(entries, tokenize), states=(1, 8))
    old, new = shares["evidence-first"], shares["shared-first"]
    assert new["vllm"].total.prompt_tokens == pytest.approx(old["vllm"].total.prompt_tokens, rel=0.05)
    # a prefix cache that keeps every block gains: instructions are shared by every fact, the table by its facts
    assert new["vllm"].total.share > old["vllm"].total.share
    for purpose in ("hypothesis", "verifier", "free-text"):
        assert new["vllm"].by_purpose[purpose].share > old["vllm"].by_purpose[purpose].share, purpose
    # llama.cpp's one cache of the last call loses: consecutive calls are different stages, whose
    # instructions now differ from the first line on; saved states of several calls win it back
    assert new["llama_cpp_1"].total.share < old["llama_cpp_1"].total.share
    assert new["llama_cpp_8"].total.share > old["llama_cpp_8"].total.share


def test_a_bad_request_log_names_its_line(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps({"purpose": "x", "messages": [{"role": "user", "content": "hi"}]}) + "\n{oops\n")
    with pytest.raises(InputError, match=r"log.jsonl:2"):
        list(read_request_log(path))
    with pytest.raises(InputError, match="request log not found"):
        list(read_request_log(tmp_path / "missing.jsonl"))


@pytest.mark.model  # the Qwen vocabulary from the shipped GGUF
def test_bench_prefix_measures_request_logs_side_by_side(tmp_path):
    from dev.bench_prefix import bench_prefix, format_table

    paths = [simulated_log(order).write(tmp_path / f"{order}.jsonl") for order in ("evidence-first", "shared-first")]
    result = bench_prefix([], logs=paths)
    assert list(result["shares"]) == ["evidence-first", "shared-first"]
    old, new = (result["shares"][name]["vllm"] for name in result["shares"])
    assert old["requests"] == new["requests"] == 27 and new["share"] > old["share"]
    table = format_table(result)
    assert "vLLM prefix cache (16-token blocks, unbounded)" in table and f"{new['share']:.1%}" in table
