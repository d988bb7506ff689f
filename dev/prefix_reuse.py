"""How much of each request a prefix cache can reuse, over a stream of requests in send order.

vLLM's automatic prefix caching keeps the KV cache of full blocks of 16 tokens
(its default ``block_size``), each keyed by a hash of its tokens and of every
block before it. A new request reuses the longest run of leading blocks that an
earlier request computed, but always computes its own last token, so a prompt
that repeats an earlier one whole still evaluates its last block. ``measure``
counts those reusable tokens with an unbounded cache by default (what the order
of the prompts allows), or with ``capacity_blocks`` blocks evicted least
recently used (what a server with that much free KV memory keeps).

llama.cpp in process reuses the longest common token prefix with the KV cache
it holds: the previous call's (``states=1``), or the best of several saved
states (``fhs/llm/llama_cpp.py``); it too evaluates at least the last token.

Requests are laid out as the served chat template does (Qwen's ChatML: each
message between ``<|im_start|>`` and ``<|im_end|>``, then the generation
prompt), with token ids from :class:`fhs.llm.tokens.QwenVocab`. A request log
is a JSONL file of ``{"purpose", "messages": [{"role", "content"}]}`` in send
order; :class:`RequestLog` writes one from any backend.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.core.files import write_text_atomic
from fhs.llm.contract import Request, Response, chat_messages
from fhs.llm.kv_states import common_prefix

BLOCK_TOKENS = 16  # vLLM's default block_size
IM_START, IM_END = -1, -2  # stand-ins for ChatML's special tokens (never a vocabulary id)

Tokenize = Callable[[str], list[int]]


def chat_tokens(messages: Iterable[Mapping[str, str]], tokenize: Tokenize) -> list[int]:
    """A chat request's prompt tokens as the ChatML template lays them out."""
    ids: list[int] = []
    for message in messages:
        ids += [IM_START, *tokenize(f"{message['role']}\n{message['content']}"), IM_END, *tokenize("\n")]
    return ids + [IM_START, *tokenize("assistant\n")]


@dataclass
class Tally:
    """Prompt tokens, and how many of them a cache could reuse, for one group of requests."""

    requests: int = 0
    prompt_tokens: int = 0
    reused_tokens: int = 0

    @property
    def share(self) -> float:
        return self.reused_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    def add(self, prompt: int, reused: int) -> None:
        self.requests += 1
        self.prompt_tokens += prompt
        self.reused_tokens += reused

    def to_dict(self) -> dict[str, Any]:
        return {"requests": self.requests, "prompt_tokens": self.prompt_tokens,
                "reused_tokens": self.reused_tokens, "share": round(self.share, 4)}


@dataclass
class PrefixShare:
    """What a cache could reuse over a stream, in total and per request purpose."""

    model: str
    total: Tally = field(default_factory=Tally)
    by_purpose: dict[str, Tally] = field(default_factory=dict)

    def add(self, purpose: str, prompt: int, reused: int) -> None:
        self.total.add(prompt, reused)
        self.by_purpose.setdefault(purpose or "other", Tally()).add(prompt, reused)

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, **self.total.to_dict(),
                "by_purpose": {p: t.to_dict() for p, t in sorted(self.by_purpose.items())}}


class BlockCache:
    """vLLM's prefix cache: chained hashes of full blocks, unbounded or LRU over ``capacity_blocks``."""

    def __init__(self, block: int = BLOCK_TOKENS, capacity_blocks: int | None = None) -> None:
        self.block = block
        self.capacity = capacity_blocks
        self._blocks: OrderedDict[int, None] = OrderedDict()

    def reuse(self, tokens: Sequence[int]) -> int:
        """Tokens of ``tokens`` served from earlier requests; then its own full blocks are cached."""
        keys, parent = [], 0
        for start in range(0, len(tokens) - self.block + 1, self.block):
            parent = hash((parent, tuple(tokens[start:start + self.block])))
            keys.append(parent)
        usable = (len(tokens) - 1) // self.block  # the last token is always computed
        hits = 0
        while hits < min(usable, len(keys)) and keys[hits] in self._blocks:
            hits += 1
        for key in keys:
            self._blocks[key] = None
            self._blocks.move_to_end(key)
        if self.capacity is not None:
            while len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)
        return hits * self.block


class SavedStates:
    """llama.cpp's reuse: the longest common prefix with the best of the last ``states`` prompts."""

    def __init__(self, states: int = 1) -> None:
        self.states = states
        self._kept: list[Sequence[int]] = []

    def reuse(self, tokens: Sequence[int]) -> int:
        best = max((common_prefix(tokens, kept) for kept in self._kept), default=0)
        self._kept = [tokens, *[k for k in self._kept if k is not tokens]][: self.states]
        return min(best, max(len(tokens) - 1, 0))


def measure(stream: Iterable[tuple[str, Sequence[int]]], *, block: int = BLOCK_TOKENS,
            capacity_blocks: int | None = None, states: tuple[int, ...] = (1,)) -> dict[str, PrefixShare]:
    """Reusable tokens of each ``(purpose, tokens)`` request, under vLLM's block cache and llama.cpp's states."""
    blocks = BlockCache(block, capacity_blocks)
    kept = {n: SavedStates(n) for n in states}
    size = "unbounded" if capacity_blocks is None else f"{capacity_blocks:,} blocks"
    result = {"vllm": PrefixShare(f"vLLM prefix cache ({block}-token blocks, {size})")}
    result.update({f"llama_cpp_{n}": PrefixShare(f"llama.cpp, best of the last {n} prompt state(s)") for n in states})
    for purpose, tokens in stream:
        result["vllm"].add(purpose, len(tokens), blocks.reuse(tokens))
        for n, model in kept.items():
            result[f"llama_cpp_{n}"].add(purpose, len(tokens), model.reuse(tokens))
    return result


# ---- request logs -------------------------------------------------------------------

def read_request_log(path: str | Path) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """``(purpose, messages)`` per line of a request log, in send order."""
    if not Path(path).is_file():
        raise InputError("request log not found", path=path, fix="pass a JSONL file written by RequestLog.write")
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
                messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in entry["messages"]]
            except (ValueError, KeyError, TypeError) as error:
                raise InputError(f"not a request-log line ({error})", path=path, line=number,
                                 fix='each line must be {"purpose": ..., "messages": [{"role": ..., '
                                     '"content": ...}]}') from None
            yield str(entry.get("purpose", "")), messages


def tokenized(entries: Iterable[tuple[str, list[dict[str, str]]]],
              tokenize: Tokenize) -> Iterator[tuple[str, list[int]]]:
    for purpose, messages in entries:
        yield purpose, chat_tokens(messages, tokenize)


def qwen_tokenizer() -> Tokenize:
    """Token ids of the Qwen vocabulary, line by line with a memo (``fhs.llm.line_tokens``)."""
    from fhs.llm.line_tokens import LineTokenizer
    from fhs.llm.tokens import QwenVocab

    return LineTokenizer(QwenVocab().tokenize)


class RequestLog:
    """A backend that records every request it forwards, in order (``entries``; ``write`` saves JSONL)."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.kind = getattr(backend, "kind", type(backend).__name__)
        self.model = getattr(backend, "model", "")
        self.name = getattr(backend, "name", f"{self.kind}:{self.model}")
        self.entries: list[tuple[str, list[dict[str, str]]]] = []
        self.requests: list[Request] = []  # the requests themselves (schema, temperature, seed): to replay
        self._lock = threading.Lock()

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        with self._lock:
            self.entries += [(r.purpose, chat_messages(r)) for r in requests]
            self.requests += requests
        return self.backend.complete(requests)

    def write(self, path: str | Path) -> Path:
        lines = (json.dumps({"purpose": purpose, "messages": messages}, ensure_ascii=False)
                 for purpose, messages in self.entries)
        return write_text_atomic(Path(path), "".join(line + "\n" for line in lines))
