"""One interface to language models: requests in, responses out, every call cached.

This top part is the contract the method modules (hypotheses, verifier,
selector, relocation) program against. Backends (OpenAI-compatible HTTP,
in-process llama.cpp, in-process vLLM) and the persistent cache implement it
below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Request:
    """One model call.

    Each of the J samples of one prompt is its own request, told apart by
    ``sample_index``; that index is part of the cache key and of the seed, so
    samples differ from each other but replay identically.
    ``schema`` asks for structured JSON output where the backend supports it.
    ``purpose`` labels the call for the cost tables; it is not part of the key.
    ``attempt`` counts retries of a failed parse: it is part of the key and the
    seed, so a retry is a new sample instead of a replay of the cached failure,
    and it cannot collide with another sample's key as a shifted
    ``sample_index`` or ``seed`` could.
    """

    messages: tuple[Message, ...]
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    sample_index: int = 0
    schema: Mapping[str, Any] | None = None
    purpose: str = ""
    attempt: int = 0


@dataclass(frozen=True)
class Response:
    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    cached: bool = False
    model: str = ""


class LLM(Protocol):
    """Anything that answers a batch of requests, in order."""

    name: str

    def complete(self, requests: Sequence[Request]) -> list[Response]: ...


@dataclass
class CallStats:
    """Running totals for one run: what the cost chapter and metrics.json report."""

    calls: int = 0  # model calls actually made (not served by the cache)
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    by_purpose: dict[str, int] = field(default_factory=dict)

    def add(self, request: Request, response: Response) -> None:
        if response.cached:
            self.cache_hits += 1
        else:
            self.calls += 1
            self.seconds += response.seconds
        self.tokens_in += response.tokens_in
        self.tokens_out += response.tokens_out
        key = request.purpose or "other"
        self.by_purpose[key] = self.by_purpose.get(key, 0) + 1
