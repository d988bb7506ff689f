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
same grammar sampler about them, and when enough of them are allowed hands the
chain only those allowed tokens, in token-id order as llama.cpp itself lists
them. Every token outside has a lower logit than every token inside, so greedy
(enough: one) selects the same token and top-k (enough: ``k``) keeps the same
set; the grammar then checks the few tokens left and everything after it runs
unchanged. Fewer than ``k`` are enough when min-p is the only cut after top-k
and every token outside lies below it: min-p would drop them whatever the
grammar said (``_enough_rule``). Otherwise (a position the grammar all but
forces, with candidates close behind) the step leaves the array whole and the
chain runs as before. Whether a token is allowed depends only on the grammar's
state and the token, never on the other candidates, so asking about fewer
tokens cannot change an answer.

The one difference left is the order of tokens whose logits are exactly equal
inside top-k's result (``std::partial_sort`` does not promise one), which could
pick a different one of two equally likely tokens; greedy is exact even then.
``python -m dev.bench_cpu --part sampling`` replays real requests both ways and reports
whether every reply is the same.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable
from typing import Any

import numpy as np

CANDIDATES = 512  # tokens asked about first; the step pays for itself when the grammar allows enough of them
_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])  # llama_token_data


Enough = Callable[[np.ndarray, float], bool]  # (allowed tokens' logits, lowest logit asked about) -> decided?


def likeliest_first(
    llama_cpp: Any, grammar: Any, enough: Enough, candidates: int = CANDIDATES, counts: dict[str, int] | None = None
):
    """The apply function of the step before ``grammar`` (a ``llama_sampler *``): see the module docstring.
    ``counts`` tallies the tokens sampled from the narrowed array and from the whole one."""
    counts = {} if counts is None else counts

    def apply(cur_p: Any) -> None:
        array = cur_p.contents
        size = int(array.size)
        if size <= 2 * candidates or array.sorted:
            return
        address = ctypes.addressof(array.data.contents)
        buffer = (ctypes.c_byte * (size * _TOKEN_DATA.itemsize)).from_address(address)
        data = np.frombuffer(buffer, _TOKEN_DATA)  # type: ignore[call-overload]  # a ctypes array is a buffer
        logits = data["logit"]
        floor = float(np.partition(logits, size - candidates)[size - candidates])
        subset = data[np.flatnonzero(logits >= floor)]  # a copy, in the array's (token-id) order
        view = llama_cpp.llama_token_data_array(
            data=subset.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
            size=len(subset),
            selected=-1,
            sorted=False,
        )
        llama_cpp.llama_sampler_apply(grammar, ctypes.byref(view))
        allowed = subset[np.isfinite(subset["logit"])]
        if len(allowed) and enough(allowed["logit"], floor):
            data[: len(allowed)] = allowed
            array.size = len(allowed)
            counts["narrowed"] = counts.get("narrowed", 0) + 1
        else:
            counts["whole"] = counts.get("whole", 0) + 1

    return apply


_MARGIN = 1e-3  # logits: far more than float32 rounding of max + log(min_p), far less than any real gap


def _enough_rule(kwargs: dict[str, Any]) -> Enough | None:
    """When the allowed tokens among the likeliest decide what follows the grammar (llama-cpp-python's
    ``_init_sampler`` arguments); None where the step cannot help.

    Greedy: one allowed token. Top-k: ``k`` of them; or fewer, when min-p is the only other cut
    (top-p and typical off, as every request here sends) and every token not asked about lies below
    it: min-p keeps only tokens within ``log(min_p)`` of the best allowed one, so tokens that
    unlikely never reach the draw, whatever the grammar says about them.
    """
    if kwargs.get("grammar") is None or kwargs.get("logits_processor") is not None:
        return None
    temp = kwargs.get("temp", 0.8)
    if temp == 0.0:
        return lambda allowed, floor: True
    top_k = int(kwargs.get("top_k", 40))
    if not (temp > 0.0 and kwargs.get("mirostat_mode", 0) == 0 and top_k > 0):
        return None  # dist over every allowed token, or mirostat: they read the whole array
    min_p = float(kwargs.get("min_p", 0.05))
    only_min_p = min_p > 0.0 and kwargs.get("top_p", 0.95) >= 1.0 and kwargs.get("typical_p", 1.0) >= 1.0
    cut = math.log(min_p) - _MARGIN if only_min_p else None

    def enough(allowed: np.ndarray, floor: float) -> bool:
        return len(allowed) >= top_k or (cut is not None and floor < float(allowed.max()) + cut)

    return enough


def install(
    llm: Any, llama_cpp: Any, internals: Any, candidates: int = CANDIDATES, counts: dict[str, int] | None = None
) -> None:
    """Make ``llm`` (a ``llama_cpp.Llama``) build its grammar chains with the likeliest-first step."""
    build = llm._init_sampler

    def init_sampler(**kwargs: Any) -> Any:
        chain = build(**kwargs)
        enough = _enough_rule(kwargs)
        if enough is not None:
            _insert_before_grammar(
                chain,
                llama_cpp,
                internals,
                lambda grammar: likeliest_first(llama_cpp, grammar, enough, candidates, counts),
            )
        return chain

    llm._init_sampler = init_sampler


def _insert_before_grammar(chain: Any, llama_cpp: Any, internals: Any, make_step: Any) -> None:
    """Rebuild llama-cpp-python's chain with ``make_step(grammar)`` just before its grammar sampler."""
    handle = chain.sampler
    if chain.custom_samplers:  # a custom sampler has no name to read; leave such chains alone
        return
    names = [
        llama_cpp.llama_sampler_name(llama_cpp.llama_sampler_chain_get(handle, i))
        for i in range(llama_cpp.llama_sampler_chain_n(handle))
    ]
    if b"grammar" not in names:
        return
    at = names.index(b"grammar")
    tail = [llama_cpp.llama_sampler_chain_remove(handle, at) for _ in range(at, len(names))]
    step = internals.CustomSampler(make_step(tail[0]))
    llama_cpp.llama_sampler_chain_add(handle, step.get_sampler())
    chain.custom_samplers.append((at, step))  # the chain removes it before it frees the rest
    for sampler in tail:
        llama_cpp.llama_sampler_chain_add(handle, sampler)
