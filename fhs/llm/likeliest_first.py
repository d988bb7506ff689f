"""Grammar-constrained sampling in llama.cpp that asks the grammar about the likeliest tokens first.

llama-cpp-python samples a schema-constrained reply with the chain
``penalties -> grammar -> greedy`` (temperature 0) or ``penalties -> grammar ->
top-k -> typical -> top-p -> min-p -> temperature -> dist``. The grammar step
checks every one of Qwen's 151,936 tokens against the grammar, for every
generated token, on one core: on two-core CPUs that costs about as much as the
model's own forward pass.

What follows the grammar only ever looks at the best allowed tokens: greedy
takes the first allowed token of highest logit, top-k the ``k`` allowed tokens
of highest logit. So a step placed just before the grammar takes the tokens
whose logit is at least the ``CANDIDATES``-th largest (ties included), asks the
same grammar sampler about them, and when at least ``need`` of them are
allowed (1 for greedy, ``top_k`` otherwise) hands the chain only those allowed
tokens, in token-id order as llama.cpp itself lists them. Every token outside
has a lower logit than every token inside, so greedy selects the same token
and top-k keeps the same set; the grammar then checks the few tokens left and
everything after it runs unchanged. When fewer are allowed (a position the
grammar all but forces) the step leaves the array whole and the chain runs as
before. Whether a token is allowed depends only on the grammar's state and the
token, never on the other candidates, so asking about fewer tokens cannot
change an answer.

The one difference left is the order of tokens whose logits are exactly equal
inside top-k's result (``std::partial_sort`` does not promise one), which could
pick a different one of two equally likely tokens; greedy is exact even then.
``fhs bench cpu --part sampling`` replays real requests both ways and reports
whether every reply is the same.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

CANDIDATES = 512  # tokens asked about first; the step pays for itself when the grammar allows enough of them
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])  # llama_token_data


def likeliest_first(llama_cpp: Any, grammar: Any, need: int, candidates: int = CANDIDATES,
                    counts: dict[str, int] | None = None):
    """The apply function of the step before ``grammar`` (a ``llama_sampler *``): see the module docstring.
    ``counts`` tallies the tokens sampled from the narrowed array and from the whole one."""
    counts = {} if counts is None else counts

    def apply(cur_p: Any) -> None:
        array = cur_p.contents
        size = int(array.size)
        if size <= 2 * candidates or array.sorted:
            return
        address = ctypes.addressof(array.data.contents)
        data = np.frombuffer((ctypes.c_byte * (size * _TOKEN_DATA.itemsize)).from_address(address), _TOKEN_DATA)
        logits = data["logit"]
        floor = np.partition(logits, size - candidates)[size - candidates]
        subset = data[np.flatnonzero(logits >= floor)]  # a copy, in the array's (token-id) order
        view = llama_cpp.llama_token_data_array(
            data=subset.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
            size=len(subset), selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(view))
        allowed = subset[np.isfinite(subset["logit"])]
        if len(allowed) >= need:
            data[:len(allowed)] = allowed
            array.size = len(allowed)
            counts["narrowed"] = counts.get("narrowed", 0) + 1
        else:
            counts["whole"] = counts.get("whole", 0) + 1

    return apply


def _need(kwargs: dict[str, Any]) -> int | None:
    """How many allowed tokens what follows the grammar reads: None where the step cannot help."""
    if kwargs.get("grammar") is None or kwargs.get("logits_processor") is not None:
        return None
    temp = kwargs.get("temp", 0.8)
    if temp == 0.0:
        return 1
    if temp > 0.0 and kwargs.get("mirostat_mode", 0) == 0 and kwargs.get("top_k", 40) > 0:
        return int(kwargs.get("top_k", 40))
    return None  # dist over every allowed token, or mirostat: they read the whole array


def install(llm: Any, llama_cpp: Any, internals: Any, candidates: int = CANDIDATES,
            counts: dict[str, int] | None = None) -> None:
    """Make ``llm`` (a ``llama_cpp.Llama``) build its grammar chains with the likeliest-first step."""
    build = llm._init_sampler

    def init_sampler(**kwargs: Any) -> Any:
        chain = build(**kwargs)
        need = _need(kwargs)
        if need is not None:
            _insert_before_grammar(chain, llama_cpp, internals,
                                   lambda grammar: likeliest_first(llama_cpp, grammar, need, candidates, counts))
        return chain

    llm._init_sampler = init_sampler


def _insert_before_grammar(chain: Any, llama_cpp: Any, internals: Any, make_step: Any) -> None:
    """Rebuild llama-cpp-python's chain with ``make_step(grammar)`` just before its grammar sampler."""
    handle = chain.sampler
    if chain.custom_samplers:  # a custom sampler has no name to read; leave such chains alone
        return
    names = [llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(handle, i))
             for i in range(llama_cpp.llama_sampler_chain_n(handle))]
    if b"grammar" not in names:
        return
    at = names.index(b"grammar")
    tail = [llama_cpp.llama_sampler_chain_remove(handle, at) for _ in range(at, len(names))]
    step = internals.CustomSampler(make_step(tail[0]))
    llama_cpp.llama_sampler_chain_add(handle, step.get_sampler())
    chain.custom_samplers.append((at, step))  # the chain removes it before it frees the rest
    for sampler in tail:
        llama_cpp.llama_sampler_chain_add(handle, sampler)
