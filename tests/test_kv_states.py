"""Saved KV states in llama.cpp: a prompt that shares a longer prefix with an earlier call than with the last one."""

from __future__ import annotations

import pytest

from fhs.llm.contract import Message, Request

SHARED = "Read the instructions below with care; they are the same for every question. " * 12


def ask(tail: str) -> Request:
    return Request(messages=(Message("system", "Answer in a few words."), Message("user", SHARED + tail)),
                   max_tokens=8)


OTHER = Request(messages=(Message("user", "Name one planet."),), max_tokens=8)


@pytest.mark.model
def test_a_restored_state_evaluates_only_the_new_tail_and_answers_as_a_fresh_model():
    from fhs.llm.llama_cpp import LlamaCppBackend
    from fhs.llm.models import smollm2_path

    stream = [ask("Question: what is two plus two?"), OTHER, ask("Question: name a colour.")]
    plain = LlamaCppBackend(smollm2_path(), n_ctx=2048, n_threads=2)
    saved = LlamaCppBackend(smollm2_path(), n_ctx=2048, n_threads=2, kv_states=4)
    without = [plain.complete([r])[0] for r in stream]
    with_states = [saved.complete([r])[0] for r in stream]
    # the third prompt shares the long instructions with the first, not with the second
    assert without[2].prompt_evaluated > with_states[2].tokens_in - 20
    assert with_states[2].prompt_evaluated < 20 and saved.states.restored == 1
    fresh = LlamaCppBackend(smollm2_path(), n_ctx=2048, n_threads=2).complete([stream[2]])[0]
    assert [a.text for a in with_states] == [a.text for a in without] and with_states[2].text == fresh.text


@pytest.mark.model
def test_the_kv_benchmark_replays_a_stream_per_setting():
    from fhs.run.bench_kv import Setting, replay

    entries = [("q", [{"role": m.role, "content": m.content} for m in r.messages])
               for r in (ask("Question: what is two plus two?"), OTHER, ask("Question: name a colour."))]
    settings = [Setting("shared-first", 0), Setting("shared-first", 4)]
    totals = replay({"shared-first": entries}, settings, model="smollm2-135m", n_ctx=2048, progress=False)
    plain, saved = (totals[s.name] for s in settings)
    assert plain.requests == saved.requests == 3 and plain.prompt_tokens == saved.prompt_tokens
    assert saved.evaluated < plain.evaluated - 100 and saved.restores == 1 and plain.restores == 0
