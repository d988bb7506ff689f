"""Grammar sampling that asks about the likeliest tokens first answers exactly as llama.cpp's own chain."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

from fhs.llm.contract import Message, Request
from fhs.llm.likeliest_first import _enough_rule, likeliest_first

FREE = {"type": "object", "properties": {"label": {"type": "string"}, "reason": {"type": "string"}},
        "required": ["label", "reason"]}
# an enum forces most positions: fewer allowed tokens than top-k reads, so the whole array is checked
FORCED = {"type": "object", "properties": {"verdict": {"enum": ["accept", "reject", "unsure"]},
                                           "score": {"type": "integer"}}, "required": ["verdict", "score"]}


def requests() -> list[Request]:
    # two asks, 24 tokens each: every schema and temperature still meets each ask, greedy and sampled
    asks = ("Name a US-GAAP concept for revenue from software licences.",
            "Is 'Accrued interest payable' a liability? Judge it.")
    return [Request(messages=(Message("user", ask + " Reply as JSON."),), max_tokens=24, schema=schema,
                    temperature=temperature, seed=seed, purpose="t")
            for ask in asks for schema in (FREE, FORCED) for temperature, seed in ((0.0, 0), (0.8, 7))]


@pytest.mark.model
@pytest.mark.parametrize("model", ["smollm2-135m", "qwen2.5-0.5b"])
def test_the_same_replies_as_llama_cpps_own_chain_greedy_and_sampled(model):
    import llama_cpp
    from llama_cpp import _internals

    from fhs.llm.likeliest_first import install
    from fhs.llm.llama_cpp import LlamaCppBackend
    from fhs.llm.models import model_path

    plain = LlamaCppBackend(model_path(model), n_ctx=1024, kv_states=0, likeliest_first=False)
    first = LlamaCppBackend(model_path(model), n_ctx=1024, kv_states=0)
    # asking about only 16 tokens leaves the array whole more often: that way is checked too
    narrow = LlamaCppBackend(model_path(model), n_ctx=1024, kv_states=0, likeliest_first=False)
    install(narrow._llm, llama_cpp, _internals, candidates=16, counts=narrow.sampled)
    asked = requests()
    before = [plain.complete([r])[0] for r in asked]
    for backend in (first, narrow):
        after = [backend.complete([r])[0] for r in asked]
        assert [a.text for a in after] == [b.text for b in before]
        assert [a.tokens_out for a in after] == [b.tokens_out for b in before]
        # one sampled token per generated token, and the end-of-generation token of each reply that stopped
        stopped = sum(a.finish_reason == "stop" for a in after)
        assert sum(backend.sampled.values()) == sum(a.tokens_out for a in after) + stopped
    assert plain.sampled == {}  # off means off
    assert first.sampled["narrowed"] > narrow.sampled["narrowed"] > 0 and narrow.sampled["whole"] > 0


def test_what_follows_the_grammar_decides_how_many_allowed_tokens_are_enough():
    grammar = object()
    few, many = np.array([3.0, 1.0], dtype=np.float32), np.zeros(40, dtype=np.float32)
    greedy = _enough_rule({"grammar": grammar, "temp": 0.0})
    assert greedy(few[:1], 2.9)  # one allowed token decides greedy, whatever lies below
    sampled = {"grammar": grammar, "temp": 0.8, "top_k": 40, "top_p": 1.0, "min_p": 0.05, "typical_p": 1.0}
    enough = _enough_rule(sampled)
    assert enough(many, 0.0)  # k allowed: top-k's set
    assert enough(few, -0.1)  # fewer, but everything not asked about is below 3 + log(0.05) = 0.004
    assert not enough(few, 0.1)  # a token not asked about could pass min-p
    assert not _enough_rule({**sampled, "top_p": 0.95})(few, -5.0)  # top-p reads the rest's mass
    assert not _enough_rule({**sampled, "min_p": 0.0})(few, -50.0)
    assert _enough_rule({**sampled, "top_p": 0.95})(many, 0.0)
    assert _enough_rule({"grammar": None, "temp": 0.0}) is None
    assert _enough_rule({**sampled, "top_k": 0}) is None  # no top-k: dist reads every token
    assert _enough_rule({**sampled, "mirostat_mode": 2}) is None
    assert _enough_rule({"grammar": grammar, "temp": -1.0}) is None
    assert _enough_rule({"grammar": grammar, "temp": 0.0, "logits_processor": [abs]}) is None


def at_least(k: int):
    return lambda allowed, floor: len(allowed) >= k


class TokenData(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("logit", ctypes.c_float), ("p", ctypes.c_float)]


class TokenArray(ctypes.Structure):
    _fields_ = [("data", ctypes.POINTER(TokenData)), ("size", ctypes.c_size_t), ("selected", ctypes.c_int64),
                ("sorted", ctypes.c_bool)]


class EvenTokensOnly:
    """Stands in for llama.cpp here: a 'grammar' that allows even token ids, applied as llama.cpp applies it."""

    llama_token_data = TokenData
    llama_token_data_array = TokenArray

    def __init__(self) -> None:
        self.asked = 0

    def llama_sampler_apply(self, grammar, view) -> None:
        array = view._obj
        self.asked += array.size
        for i in range(array.size):
            if array.data[i].id % 2:
                array.data[i].logit = -np.inf


def token_array(logits: np.ndarray):
    items = (TokenData * len(logits))(*[TokenData(i, float(x), 0.0) for i, x in enumerate(logits)])
    return items, TokenArray(ctypes.cast(items, ctypes.POINTER(TokenData)), len(logits), -1, False)


def test_the_narrowed_array_holds_the_allowed_likeliest_tokens_in_token_order():
    logits = np.random.default_rng(0).normal(size=5000).astype(np.float32)
    fake, counts = EvenTokensOnly(), {}
    items, array = token_array(logits)
    likeliest_first(fake, None, at_least(40), candidates=100, counts=counts)(ctypes.pointer(array))
    kept = [items[i].id for i in range(array.size)]
    best = np.argsort(-logits, kind="stable")[:100]
    assert kept == sorted(int(i) for i in best if i % 2 == 0)  # every allowed one of the 100 best, by id
    assert [items[i].logit for i in range(array.size)] == [float(logits[i]) for i in kept]
    assert counts == {"narrowed": 1} and fake.asked == 100  # the grammar saw 100 tokens, not 5,000


def test_too_few_allowed_among_the_likeliest_leaves_the_array_whole():
    logits = np.random.default_rng(1).normal(size=5000).astype(np.float32)
    fake, counts = EvenTokensOnly(), {}
    items, array = token_array(logits)
    likeliest_first(fake, None, at_least(80), candidates=100, counts=counts)(ctypes.pointer(array))
    assert array.size == 5000 and [items[i].logit for i in range(5000)] == [float(x) for x in logits]
    assert counts == {"whole": 1}


def test_ties_at_the_cut_are_all_asked_about():
    logits = np.zeros(1000, dtype=np.float32)
    logits[:10] = 5.0
    fake = EvenTokensOnly()
    items, array = token_array(logits)
    likeliest_first(fake, None, at_least(1), candidates=50)(ctypes.pointer(array))
    assert fake.asked == 1000  # the 50th largest is 0.0, which every other token shares
    assert array.size == 500 and items[0].id == 0
