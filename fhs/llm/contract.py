"""The contract with language models: requests in, responses out.

The method modules (hypotheses, verifier, selector, relocation) program
against these types. The backends implement them (``openai.py``,
``llama_cpp.py``, ``vllm.py``), ``cache.py`` keeps every answer, and
``factory.make_llm`` puts the two together.
"""

from __future__ import annotations

import hashlib
import json
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
    ``shortened`` says how the prompt was cut to fit its token budget (None when it
    fitted as configured); a label for the call record, not part of the key.
    ``attempt`` counts retries of a failed parse: it is part of the key and the
    seed, so a retry is a new sample instead of a replay of the cached failure,
    and it cannot collide with another sample's key as a shifted
    ``sample_index`` or ``seed`` could.
    ``fact_id`` and ``shown`` say what the prompt is about: the fact, and the
    concept ids it lists in order (the verifier's window, the selector's list).
    They are labels like ``purpose``, not part of the key, and no served model
    reads them; the oracle (``fhs.llm.oracle``) answers from them and
    the experiment's gold, which it is given, never from the prompt.
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
    shortened: Mapping[str, Any] | None = None
    fact_id: str = ""
    shown: tuple[str, ...] = ()


@dataclass(frozen=True)
class Response:
    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    cached: bool = False
    model: str = ""
    # Where the backend can tell (llama.cpp in process): prompt tokens actually evaluated
    # after reusing the KV cache of the previous call, and the seconds that took.
    prompt_evaluated: int | None = None
    prompt_seconds: float | None = None
    # Why generation stopped, as the backend reports it: "stop", "length" (cut at max_tokens)
    # or None where the backend does not say (and for answers cached before it was kept).
    finish_reason: str | None = None

    @property
    def cut_short(self) -> bool:
        """Generation stopped at ``max_tokens``: the answer is incomplete, whatever it parses to."""
        return self.finish_reason == "length"


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


class BackendError(RuntimeError):
    """A backend could not answer: server unreachable or failing, engine not installed."""


class RequestRefused(BackendError):
    """The server refused this one request for good (a non-retryable 4xx, e.g. a prompt over its window).

    Other requests may well succeed, so the runner records the fact as failed and goes on.
    """


def derive_seed(seed: int, sample_index: int = 0, attempt: int = 0) -> int:
    """The seed a backend actually uses, one per (run seed, sample, attempt).

    Separate requests with separate seeds are how the J samples differ (``n>1``
    is not reliable across servers); hashing keeps nearby run seeds from
    sharing samples, and 31 bits fit every engine's seed type.
    """
    digest = hashlib.sha256(f"{seed}:{sample_index}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def as_json_types(value: Any) -> Any:
    """Mappings and tuples as dicts and lists, so a schema serializes the same every time."""
    if isinstance(value, Mapping):
        return {str(k): as_json_types(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json_types(v) for v in value]
    return value


def chat_messages(request: Request) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in request.messages]


CACHE_KEY_VERSION = 1


def cache_key(kind: str, model: str, request: Request, *, provenance: str = "") -> str:
    """SHA-256 over everything that changes the answer; ``purpose`` is only a label.

    ``provenance`` names where answers come from when kind and model do not
    (a server's base URLs); empty leaves the key as it always was.
    """
    payload = {
        "v": CACHE_KEY_VERSION,
        "kind": kind,
        "model": model,
        "messages": [[m.role, m.content] for m in request.messages],
        "temperature": float(request.temperature),
        "top_p": float(request.top_p),
        "max_tokens": int(request.max_tokens),
        "seed": int(request.seed),
        "sample_index": int(request.sample_index),
        "attempt": int(request.attempt),
        "schema": as_json_types(request.schema) if request.schema is not None else None,
    }
    if provenance:
        payload["provenance"] = provenance
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()
