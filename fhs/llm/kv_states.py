"""Saved KV caches of recent prompts, for llama.cpp in process.

llama.cpp keeps one KV cache and, before a call, evaluates only the prompt
tokens after its longest common prefix with what that cache holds: the previous
call's prompt and answer. With prompts ordered for prefix caching
(``fhs/method/prompting.py``) consecutive calls of different stages share only
the system message, while the next call of the same stage (the next fact of the
table, the next method's generator on the same fact) shares the instructions
and often the context. ``PromptStates`` keeps the KV cache of the last few calls
(llama.cpp's ``llama_state_seq_get_data``, the sequence's cells only, no
logits) and, just before llama.cpp evaluates a prompt, restores the saved state
that shares the longest prefix with it when that beats the live cache.

llama-cpp-python's own ``LlamaRAMCache`` does the same job but copies the
model's whole logits buffer (``n_batch`` x vocabulary floats, 311 MB for
Qwen2.5 at n_batch 512) on every save and does not count it in its capacity.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

SEQUENCE = 0  # llama-cpp-python decodes everything as sequence 0


@dataclass(frozen=True)
class SavedState:
    tokens: tuple[int, ...]
    data: Any  # the ctypes buffer llama.cpp wrote
    size: int


def common_prefix(a: Sequence, b: Sequence) -> int:
    """How many leading items (tokens, characters) ``a`` and ``b`` share."""
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


class PromptStates:
    """Up to ``capacity`` saved KV states of one ``llama_cpp.Llama`` (at most ``max_bytes`` in all), most recent first.

    ``restore_for(tokens)`` runs just before llama.cpp evaluates ``tokens``;
    ``save()`` after a call. A restore pays when the saved prefix is at least
    ``min_gain`` tokens longer than the live one (copying the cells back costs
    far less than evaluating that many tokens). ``restored`` counts restores.
    """

    def __init__(
        self, llama: Any, llama_cpp: Any, capacity: int = 16, min_gain: int = 32, max_bytes: int = 512 << 20
    ) -> None:
        self.llama = llama
        self.api = llama_cpp
        self.capacity = capacity
        self.min_gain = min_gain
        self.max_bytes = max_bytes
        self.saved: list[SavedState] = []
        self.restored = 0

    def _ctx(self) -> Any:
        return self.llama._ctx.ctx

    def live_tokens(self) -> list[int]:
        return list(self.llama.input_ids[: self.llama.n_tokens])

    def save(self) -> None:
        """Keep the live cache (prompt and answer); a saved state it extends is dropped."""
        tokens = tuple(self.live_tokens())
        if not tokens or self.capacity < 1:
            return
        size = int(self.api.llama_state_seq_get_size(self._ctx(), SEQUENCE))
        data = (ctypes.c_uint8 * size)()
        written = int(self.api.llama_state_seq_get_data(self._ctx(), data, size, SEQUENCE))
        if written <= 0:
            return
        kept = [s for s in self.saved if s.tokens != tokens[: len(s.tokens)]]
        self.saved = [SavedState(tokens, data, written), *kept][: self.capacity]
        while len(self.saved) > 1 and sum(s.size for s in self.saved) > self.max_bytes:
            self.saved.pop()

    def restore_for(self, tokens: Sequence[int]) -> int:
        """Load the saved state sharing the longest prefix with ``tokens`` if it beats the live cache.

        Returns the prefix length now in the cache. After a load the live cache
        holds that state's tokens, so llama.cpp's own prefix match drops the rest.
        """
        live = common_prefix(self.live_tokens(), tokens)
        best, best_len = None, live
        for state in self.saved:
            shared = common_prefix(state.tokens, tokens)
            if shared > best_len:
                best, best_len = state, shared
        if best is None or best_len < live + self.min_gain:
            return live
        self.llama._ctx.kv_cache_seq_rm(-1, 0, -1)
        if int(self.api.llama_state_seq_set_data(self._ctx(), best.data, best.size, SEQUENCE)) <= 0:
            self.llama.reset()  # the cache is empty now; llama.cpp evaluates the whole prompt
            return 0
        self.llama.input_ids[: len(best.tokens)] = best.tokens
        self.llama.n_tokens = len(best.tokens)
        self.llama._requires_eval = True  # the logits are not the restored state's
        self.restored += 1
        return best_len
