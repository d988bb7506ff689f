"""Replies no stage can use: degenerate ones parse in milliseconds, cut ones count as unparsed and as truncations.

A degenerate reply (thousands of ``<think>`` tags, brackets that never close)
must never hang a run, and a cached one must not hang the rerun. An answer
the backend says was cut at ``max_tokens`` (``finish_reason == "length"``) is
never taken as complete: its stage treats it as unparsed (retried where the
stage retries, marked in the cache), and ``metrics.json`` counts it under
``truncations``. One test does the same on SmolLM2 with a tiny budget.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace

import pytest

from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import Message, Request, Response
from fhs.llm.jsonout import parse_array, parse_object
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.method.fhs import run_fhs_fact
from fhs.method.hypotheses import hypotheses_from_records
from fhs.run.ledger import MemoryLedger
from fhs.run.runner import run_method
from scripted_llm import OverlapRetriever, ScriptedLLM
from test_pipeline import DOMAIN, FACT, H1, H2, TAXONOMY, hypothesis_reply

GOOD_HYPOTHESIS = hypothesis_reply(H1, "Number of nonvested share awards at period end.")
SELECTION = '{"selected_index": 1, "ranked_indices": [1]}'


class Cut(ScriptedLLM):
    """The scripted model, saying ``finish_reason: length`` for the replies listed in ``cut``."""

    def __init__(self, scripts, cut=()):
        super().__init__(scripts)
        self.cut = set(cut)

    def complete(self, requests):
        return [replace(r, finish_reason="length" if r.text in self.cut else "stop")
                for r in super().complete(requests)]


# ---- degenerate replies ---------------------------------------------------------------------

DEGENERATE = {
    "think tags": "<think>" * 14_000,
    "open braces": "{" * 99_000,
    "open brackets": "[" * 99_000,
    "unclosed fence": "```" + "a" * 99_000,
    "nested keys": '{"a":[' * 16_000,
    "over the cap": "<think>" * 300_000,
}


@pytest.mark.parametrize("text", DEGENERATE.values(), ids=DEGENERATE.keys())
def test_a_degenerate_reply_parses_in_well_under_a_second(text):
    started = time.perf_counter()
    assert parse_object(text) is None and parse_array(text) is None
    assert time.perf_counter() - started < 1.0  # quadratic handling took 20 s for the think tags


def test_a_cached_degenerate_reply_never_hangs_the_rerun(tmp_path):
    cache = tmp_path / "responses.sqlite"
    bad = ScriptedLLM({"hypothesis": [DEGENERATE["over the cap"]] * 2, "selector": [SELECTION] * 2})

    def run(backend, out):
        llm = CachedLLM(backend, ResponseCache(cache))
        ctx = MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=llm, domain=DOMAIN,
                            config=FHSConfig())
        started = time.perf_counter()
        result = run_method([FACT], "structured", ctx, tmp_path / out, progress=False)
        return result, time.perf_counter() - started

    first, seconds = run(bad, "a")
    assert seconds < 10 and first["fallbacks"]["hypothesis"] == 1
    assert ResponseCache(cache).unparsed_count() >= 1  # marked when stored, before any stage parsed it
    fixed = ScriptedLLM({"hypothesis": [GOOD_HYPOTHESIS], "selector": [SELECTION]})
    second, seconds = run(fixed, "b")
    assert seconds < 10 and len(fixed.calls("hypothesis")) == 1  # the server was asked again
    assert second["parse_failures"]["hypothesis"] == 0 and second["fallbacks"]["hypothesis"] == 0


# ---- answers cut at max_tokens ----------------------------------------------------------------

CUT_VERDICTS = '{"verdicts": ["SSSSSS", "CCCCCC", '


def test_a_cut_verifier_reply_is_a_truncation_and_its_missing_candidates_are_asked_again(tmp_path):
    backend = Cut({"hypothesis": [GOOD_HYPOTHESIS, hypothesis_reply(H2, "Other equity instruments.")],
                   "verifier": [CUT_VERDICTS] * 2, "selector": [SELECTION]}, cut={CUT_VERDICTS})
    cache = ResponseCache(tmp_path / "responses.sqlite")
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=CachedLLM(backend, cache),
                        domain=DOMAIN, config=FHSConfig(k_v=4), ledger=MemoryLedger())
    result = run_method([FACT], "fhs", ctx, tmp_path / "run", progress=False)
    assert result["truncations"]["verifier"] == 2 and result["parse_failures"]["verifier"] == 2
    assert result["truncations"]["hypothesis"] == 0
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["truncations"] == result["truncations"] and saved["stages"]["verifier"]["truncations"] == 2
    record = json.loads((tmp_path / "run" / "records.jsonl").read_text())
    calls = [c for c in record["llm_calls"] if c["purpose"] == "verifier"]
    assert all(c["truncated"] and not c["parsed"] for c in calls)
    window = record["verifier"]["window"]["ids"]
    assert len(window) == 4
    for verdicts in record["verifier"]["verdicts"]:
        assert verdicts["truncated"] and len(verdicts["entries"]) == 2  # the complete entries are kept
    assert cache.unparsed_count() == 2  # marked: the next run asks again

    # the ledger holds only the two judged candidates, so a rerun asks about the other two alone
    again = Cut({"verifier": ['{"verdicts": ["SSSSSS", "SSSSSS"]}'] * 2})
    hypotheses = hypotheses_from_records(record["hypotheses"])
    rerun = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), CachedLLM(again, cache), DOMAIN, TAXONOMY,
                         FHSConfig(k_v=4, selector=False), hypotheses=hypotheses, ledger=ctx.ledger)
    asked = again.calls("verifier")
    assert len(asked) == 2
    assert all(re.findall(r"^\[\d+\] (\S+) /", r.messages[-1].content, flags=re.M) == window[2:] for r in asked)
    assert [v["from_ledger"] for v in rerun["verifier"]["verdicts"]] == [2, 2]
    assert all(len(v["entries"]) == 4 and not v["truncated"] for v in rerun["verifier"]["verdicts"])


def test_a_cut_hypothesis_is_retried_even_when_it_parses(tmp_path):
    backend = Cut({"hypothesis": [GOOD_HYPOTHESIS, GOOD_HYPOTHESIS.replace("period end", "year end")],
                   "selector": [SELECTION]}, cut={GOOD_HYPOTHESIS})
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=backend, domain=DOMAIN,
                        config=FHSConfig())
    result = run_method([FACT], "structured", ctx, tmp_path / "run", progress=False)
    attempts = [r.attempt for r in backend.calls("hypothesis")]
    assert attempts == [0, 1]  # the cut sample was asked again as a new sample
    assert result["truncations"]["hypothesis"] == 1 and result["fallbacks"]["hypothesis"] == 0


def test_a_cut_selector_answer_keeps_the_methods_order(tmp_path):
    backend = Cut({"hypothesis": [GOOD_HYPOTHESIS], "selector": ['{"selected_index": 3, "ranked_indices": [3]}']},
                  cut={'{"selected_index": 3, "ranked_indices": [3]}'})
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=backend, domain=DOMAIN,
                        config=FHSConfig())
    result = run_method([FACT], "structured", ctx, tmp_path / "run", progress=False)
    record = json.loads((tmp_path / "run" / "records.jsonl").read_text())
    assert record["selection"] is None and record["selected"] == record["ranking"][0]
    assert result["truncations"]["selector"] == 1 and result["fallbacks"]["selector"] == 1


def test_the_cache_keeps_the_finish_reason_and_an_older_file_gains_it(tmp_path):
    import sqlite3

    path = tmp_path / "responses.sqlite"
    db = sqlite3.connect(path)  # a cache written before finish reasons were kept
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, kind TEXT NOT NULL, model TEXT NOT NULL, "
               "purpose TEXT NOT NULL, text TEXT NOT NULL, tokens_in INTEGER NOT NULL, tokens_out INTEGER NOT NULL, "
               "seconds REAL NOT NULL, created REAL NOT NULL)")
    db.execute("INSERT INTO responses VALUES ('old', 'k', 'm', 'p', 'an old answer', 1, 2, 0.5, 0)")
    db.commit()
    db.close()
    cache = ResponseCache(path)
    assert cache.get_many(["old"])["old"].finish_reason is None  # unknown, as before
    request = Request(messages=(Message("user", "hi"),))
    backend = Cut({"": ["cut", "whole"]}, cut={"cut"})
    llm = CachedLLM(backend, cache)
    assert llm.complete([request])[0].finish_reason == "length"
    assert cache.unparsed_count() == 1  # a cut answer is stored already marked
    served = llm.complete([request])[0]  # so it is asked again
    assert (served.text, served.finish_reason, served.cached) == ("whole", "stop", False)
    assert llm.complete([request])[0].finish_reason == "stop" and cache.unparsed_count() == 0


@pytest.mark.model
def test_smollm2_cut_at_a_tiny_budget_reports_length_and_counts_truncations(tmp_path):
    from fhs.llm.llama_cpp import LlamaCppBackend
    from fhs.llm.models import smollm2_path

    backend = LlamaCppBackend(smollm2_path(), n_ctx=4096, model_name="smollm2-135m")
    cache = ResponseCache(tmp_path / "responses.sqlite")
    llm = CachedLLM(backend, cache)
    # the verifier on two known hypotheses, with room for three tokens of its answer
    hypotheses = hypotheses_from_records([{"dimensions": H1, "retrieval_query": "nonvested share awards"},
                                          {"dimensions": H2, "retrieval_query": "equity instruments"}])
    config = FHSConfig(k_v=3, max_tokens_verifier=3, selector=False, context_chars=400)
    record = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, config, hypotheses=hypotheses)
    calls = [c for c in record["llm_calls"] if c["purpose"] == "verifier"]
    assert len(calls) == 2 and all(c["truncated"] and not c["parsed"] for c in calls)
    assert all(v["truncated"] for v in record["verifier"]["verdicts"])
    assert cache.unparsed_count() == 2
    # and through the runner: four tokens cannot hold a hypothesis, so every sample is cut and retried
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=llm, domain=DOMAIN,
                        config=FHSConfig(num_hypotheses=2, max_tokens_hypothesis=4, selector=False,
                                         context_chars=400))
    result = run_method([FACT], "fhs", ctx, tmp_path / "run", progress=False)
    assert result["truncations"]["hypothesis"] == result["stages"]["hypothesis"]["calls"] == 4
    assert result["fallbacks"]["hypothesis"] == 1
