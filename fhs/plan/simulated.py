"""A simulated model: answers valid under each request's own JSON schema, varied by seed.

Sizing a GPU run (``fhs plan``) and rehearsing it on a CPU need a model that
answers every stage the way the stage expects, instantly and reproducibly,
without pretending to be right. Each answer is an instance of the request's
JSON schema built from words of the request's own evidence, so queries retrieve
plausible candidates, verdict codes have the window's length and selector
indices point into the list shown. A greedy request (temperature 0) gets the
same answer whatever its seed, as from a real server; a sampled one varies
with the seed. Answers carry no knowledge of the gold: the metrics of a
simulated run are meaningless; its request and token counts are the point.

The HTTP simulator of the tests (``fhs/plan/sim_server.py``) answers with
:func:`simulated_answer` too, so an in-process plan and an over-the-wire
rehearsal send and receive the same things.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fhs.llm.contract import Request, Response, as_json_types, chat_messages, derive_seed
from fhs.llm.tokens import TokenCounter, count_messages, default_counter

UNRESOLVED_SHARE = 0.15  # the paper's verifier saw 5.12 of 6 dimensions resolved per hypothesis
CODE_WEIGHTS = {"S": 0.4, "C": 0.35, "A": 0.25}
_EVIDENCE_LINES = ("Source context:", "Row context:", "Column context:", "Sentence:", "Value:")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")
_CODE_PATTERN = re.compile(r"\^\[([A-Za-z]+)\]\{(\d+)\}\$")
# free-text fields and how many words they get
_LONG_FIELDS = {"retrieval_query": (8, 20), "query": (8, 20), "critique": (10, 30), "assessment": (10, 30)}


def _evidence_words(messages: Sequence[Mapping[str, str]]) -> list[str]:
    """Words of the evidence lines of the last user message (all its words if it has none)."""
    text = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), "")
    lines = [line.split(":", 1)[1] for line in text.splitlines() if line.startswith(_EVIDENCE_LINES)]
    words = _WORD.findall(" ".join(lines)) or _WORD.findall(text)
    return words or ["value"]


def _phrase(rng: random.Random, words: Sequence[str], low: int, high: int) -> str:
    """A contiguous run of ``low``..``high`` evidence words."""
    size = min(rng.randint(low, high), len(words))
    start = rng.randrange(0, len(words) - size + 1)
    return " ".join(words[start : start + size])


def _string(schema: Mapping[str, Any], name: str, rng: random.Random, words: Sequence[str]) -> str:
    if "enum" in schema:
        return str(rng.choice(list(schema["enum"])))
    pattern = schema.get("pattern")
    if pattern:
        match = _CODE_PATTERN.fullmatch(pattern)
        if not match:
            raise ValueError(f"the simulator cannot write strings for pattern {pattern!r}")
        letters, size = match.group(1), int(match.group(2))
        weights = [CODE_WEIGHTS.get(letter, 0.1) for letter in letters]
        return "".join(rng.choices(letters, weights=weights, k=size))
    if name.isupper():  # a dimension value
        return "UNRESOLVED" if rng.random() < UNRESOLVED_SHARE else _phrase(rng, words, 1, 3)
    low, high = _LONG_FIELDS.get(name, (2, 6))
    return _phrase(rng, words, low, high)


def schema_instance(schema: Mapping[str, Any], rng: random.Random, words: Sequence[str], name: str = "") -> Any:
    """A value valid under ``schema`` (the subset this project's stages use)."""
    kind = schema.get("type")
    if isinstance(kind, list):  # e.g. ["string", "null"]: the first non-null type
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        properties = schema.get("properties", {})
        return {key: schema_instance(sub, rng, words, key) for key, sub in properties.items()}
    if kind == "array":
        if "prefixItems" in schema:
            return [schema_instance(sub, rng, words, name) for sub in schema["prefixItems"]]
        items = schema.get("items", {})
        low = int(schema.get("minItems", 0))
        high = int(schema.get("maxItems", max(low, 3)))
        if items.get("type") == "integer" and "minimum" in items and "maximum" in items:
            span = list(range(int(items["minimum"]), int(items["maximum"]) + 1))
            size = min(rng.randint(max(low, 1), max(high, 1)), len(span))
            return rng.sample(span, size)
        if "enum" in items:  # e.g. operators: one or two distinct names
            size = min(rng.randint(max(low, 1), max(min(high, 2), 1)), len(items["enum"]))
            return rng.sample(list(items["enum"]), size)
        return [schema_instance(items, rng, words, name) for _ in range(rng.randint(low, high))]
    if kind == "integer":
        return rng.randint(int(schema.get("minimum", 0)), int(schema.get("maximum", 100)))
    if kind == "number":
        return round(rng.uniform(float(schema.get("minimum", 0)), float(schema.get("maximum", 1))), 3)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    if kind == "string" or "enum" in schema or "pattern" in schema:
        return _string(schema, name, rng, words)
    raise ValueError(f"the simulator cannot answer schema type {kind!r}")


def simulated_answer(
    messages: Sequence[Mapping[str, str]], schema: Mapping[str, Any] | None, *, seed: int, temperature: float
) -> str:
    """The answer text to one chat request, reproducible from its content (and seed, when sampled).

    Without a schema the answer is a short JSON object with a ``query`` field,
    which every free-text stage reads.
    """
    identity = {
        "messages": [[m["role"], m["content"]] for m in messages],
        "schema": as_json_types(schema) if schema is not None else None,
        "seed": seed if temperature > 0 else None,
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode("utf-8")).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    words = _evidence_words(messages)
    value = schema_instance(schema, rng, words) if schema is not None else {"query": _phrase(rng, words, 8, 20)}
    return json.dumps(value, ensure_ascii=False)


class SimulatedBackend:
    """The simulator in process: the ``LLM`` protocol, no latency, token counts from ``counter``."""

    def __init__(self, model: str = "simulated", counter: TokenCounter | None = None) -> None:
        self.model = model
        self.kind = "simulated"
        self.name = f"simulated:{model}"
        self.counter = counter or default_counter()

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        out = []
        for request in requests:
            messages = chat_messages(request)
            seed = derive_seed(request.seed, request.sample_index, request.attempt)
            text = simulated_answer(messages, request.schema, seed=seed, temperature=request.temperature)
            out.append(
                Response(
                    text=text,
                    tokens_in=count_messages(self.counter, messages),
                    tokens_out=self.counter.count(text) + 1,  # + the end-of-turn token
                    model=self.model,
                    finish_reason="stop",
                )
            )
        return out
