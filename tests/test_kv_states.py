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
    plain = LlamaCppBackend(smollm2_path(), n_ctx=2048, kv_states=0)
    saved = LlamaCppBackend(smollm2_path(), n_ctx=2048, kv_states=4)
    without = [plain.complete([r])[0] for r in stream]
    with_states = [saved.complete([r])[0] for r in stream]
    # the third prompt shares the long instructions with the first, not with the second
    assert without[2].prompt_evaluated > with_states[2].tokens_in - 20
    assert with_states[2].prompt_evaluated < 20 and saved.states.restored == 1
    fresh = LlamaCppBackend(smollm2_path(), n_ctx=2048).complete([stream[2]])[0]
    assert [a.text for a in with_states] == [a.text for a in without] and with_states[2].text == fresh.text


@pytest.mark.model
def test_the_kv_benchmark_replays_a_stream_per_setting():
    from dev.bench_kv import Setting, replay

    entries = [("q", [{"role": m.role, "content": m.content} for m in r.messages])
               for r in (ask("Question: what is two plus two?"), OTHER, ask("Question: name a colour."))]
    settings = [Setting("shared-first", 0), Setting("shared-first", 4)]
    totals = replay({"shared-first": entries}, settings, model="smollm2-135m", n_ctx=2048, progress=False)
    plain, saved = (totals[s.name] for s in settings)
    assert plain.requests == saved.requests == 3 and plain.prompt_tokens == saved.prompt_tokens
    assert saved.evaluated < plain.evaluated - 100 and saved.restores == 1 and plain.restores == 0


class FakeLlama:
    """The parts of llama_cpp.Llama that PromptStates touches: input ids, token count, the cache's cells."""

    def __init__(self) -> None:
        self.input_ids = [0] * 64
        self.n_tokens = 0
        self._requires_eval = False
        self.cells: list[int] = []
        self._ctx = self

    ctx = "ctx"

    def kv_cache_seq_rm(self, seq, start, end):
        self.cells = self.cells[:start]
        return True

    def reset(self):
        self.n_tokens = 0
        self.cells = []

    def evaluate(self, tokens):
        self.input_ids[: len(tokens)] = tokens
        self.n_tokens = len(tokens)
        self.cells = list(tokens)


class FakeApi:
    """llama_state_seq_*: a state is the cells' tokens, one byte each."""

    def __init__(self, llama: FakeLlama, fail_loads: bool = False) -> None:
        self.llama = llama
        self.fail_loads = fail_loads

    def llama_state_seq_get_size(self, ctx, seq):
        return len(self.llama.cells)

    def llama_state_seq_get_data(self, ctx, data, size, seq):
        data[:size] = self.llama.cells
        return size

    def llama_state_seq_set_data(self, ctx, data, size, seq):
        if self.fail_loads:
            return 0
        self.llama.cells = list(data[:size])
        return size


def test_states_restore_the_longest_saved_prefix_and_keep_within_their_bounds():
    from fhs.llm.kv_states import PromptStates

    llama = FakeLlama()
    states = PromptStates(llama, FakeApi(llama), capacity=3, min_gain=2, max_bytes=30)
    for prompt in ([1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6, 7, 8], [9, 9, 9]):
        states.restore_for(prompt)
        llama.evaluate(prompt)
        states.save()
    assert [s.tokens for s in states.saved] == [(9, 9, 9), (1, 2, 3, 4, 5, 6, 7, 8)]  # a prefix of a newer one goes
    assert states.restore_for([1, 2, 3, 4, 5, 6, 7, 0]) == 7 and states.restored == 1
    assert llama.cells == [1, 2, 3, 4, 5, 6, 7, 8] and llama.n_tokens == 8 and llama._requires_eval
    assert states.restore_for([1, 2, 3, 4, 5, 6, 7, 1]) == 7 and states.restored == 1  # the live cache is as good
    llama.evaluate([9, 9, 1])
    assert states.restore_for([9, 9, 9, 5]) == 2 and states.restored == 1  # one token more is below min_gain
    for n in range(20, 24):  # 12 cells each: the 30-byte bound keeps the newest two
        llama.evaluate(list(range(n, n + 12)))
        states.save()
    assert sum(s.size for s in states.saved) <= 30 and len(states.saved) == 2


def test_a_state_that_fails_to_load_leaves_an_empty_cache():
    from fhs.llm.kv_states import PromptStates

    llama = FakeLlama()
    states = PromptStates(llama, FakeApi(llama, fail_loads=True), min_gain=1)
    llama.evaluate([1, 2, 3, 4])
    states.save()
    llama.evaluate([7])
    assert states.restore_for([1, 2, 3, 5]) == 0 and llama.n_tokens == 0 and llama.cells == []
