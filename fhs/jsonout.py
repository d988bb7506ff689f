"""Reading JSON out of model text, and the one-retry policy around it (reference §2, §4 step 6).

Models wrap JSON in prose, code fences or a ``<think>`` span, and a capped
generation can cut a list short. The paper's code parses tolerantly; so do we:
strip the think span and fences, take the first balanced ``{...}`` (or
``[...]``) that ``json.loads`` accepts, and return ``None`` when nothing does.
A failed parse is retried once as a new sample; after that the caller applies
its documented fallback. Nothing here raises on bad model output.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from fhs.llm import LLM, CallStats, Request, Response

_THINK_SPAN = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)```", re.DOTALL)
_MAX_CANDIDATES = 64  # start positions tried before giving up; outputs are short


def strip_think(text: str) -> str:
    """Drop ``<think>…</think>`` spans.

    An unclosed ``<think>`` means the answer never came, so everything after it
    goes; a lone ``</think>`` (the template opened the span in the prompt)
    keeps only what follows it.
    """
    text = _THINK_SPAN.sub("", text)
    lowered = text.lower()
    if "</think>" in lowered:
        text = text[lowered.rindex("</think>") + len("</think>") :]
        lowered = text.lower()
    if "<think>" in lowered:
        text = text[: lowered.index("<think>")]
    return text


def strip_fences(text: str) -> str:
    """The inside of the first fenced code block, or the text unchanged if there is none.

    An opening fence with no closing one (a capped generation) loses just the fence line.
    """
    match = _FENCE.search(text)
    if match:
        return match.group(1)
    start = text.find("```")
    if start >= 0:
        newline = text.find("\n", start)
        return text[newline + 1 :] if newline >= 0 else text[start + 3 :]
    return text


def _balanced_end(text: str, start: int) -> int | None:
    """Index just past the bracket that closes ``text[start]``, respecting JSON strings."""
    closer = {"{": "}", "[": "]"}
    stack = [closer[text[start]]]
    in_string = False
    escaped = False
    for pos in range(start + 1, len(text)):
        char = text[pos]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in closer:
            stack.append(closer[char])
        elif char in "}]":
            if char != stack.pop():
                return None
            if not stack:
                return pos + 1
    return None


def first_balanced(text: str, opener: str = "{") -> Any | None:
    """The first balanced ``{...}`` / ``[...]`` in ``text`` that parses as JSON, decoded."""
    if opener not in "{[" or len(opener) != 1:
        raise ValueError(f"opener must be '{{' or '[', got {opener!r}")
    start = text.find(opener)
    tried = 0
    while start >= 0 and tried < _MAX_CANDIDATES:
        tried += 1
        end = _balanced_end(text, start)
        if end is not None:
            try:
                return json.loads(text[start:end])
            except ValueError:
                pass
        start = text.find(opener, start + 1)
    return None


def salvage_array(text: str) -> list[Any] | None:
    """The complete elements of a JSON array that was cut short (reference §4 step 6).

    Decodes element after element from the first ``[`` and stops at the first
    one that does not decode; ``None`` if not even one element is complete.
    """
    start = text.find("[")
    if start < 0:
        return None
    decoder = json.JSONDecoder()
    items: list[Any] = []
    pos = start + 1
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            item, pos = decoder.raw_decode(text, pos)
        except ValueError:
            break
        items.append(item)
    return items or None


def _clean(text: str) -> str:
    return strip_fences(strip_think(text or ""))


def parse_object(text: str) -> dict[str, Any] | None:
    """Tolerant parse of a JSON object; ``None`` on failure."""
    found = first_balanced(_clean(text), "{")
    return found if isinstance(found, dict) else None


def parse_array(text: str, *, salvage: bool = True) -> list[Any] | None:
    """Tolerant parse of a JSON array; a truncated array keeps its complete elements."""
    cleaned = _clean(text)
    found = first_balanced(cleaned, "[")
    if isinstance(found, list):
        return found
    return salvage_array(cleaned) if salvage else None


# --- a small JSON-schema check, for the shapes our prompts ask for ------------------------

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int,),
}


def schema_errors(value: Any, schema: Mapping[str, Any], where: str = "$") -> list[str]:
    """Why ``value`` does not fit ``schema``: an empty list when it does.

    Covers the keywords our prompts use (type, properties, required,
    additionalProperties, items, enum, minItems, maxItems, minLength); a full
    validator would be a dependency for little gain. Tests check it against
    ``jsonschema`` on the same cases.
    """
    errors: list[str] = []
    kinds = schema.get("type")
    if kinds is not None:
        allowed = [kinds] if isinstance(kinds, str) else list(kinds)
        ok = False
        for kind in allowed:
            types = _TYPES.get(kind, ())
            if isinstance(value, bool) and kind in ("number", "integer"):
                continue
            if isinstance(value, types):
                ok = True
        if not ok:
            return [f"{where}: expected {kinds}, got {type(value).__name__}"]
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{where}: {value!r} is not one of {list(schema['enum'])}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for name in schema.get("required", ()):
            if name not in value:
                errors.append(f"{where}: missing required '{name}'")
        for name, item in value.items():
            if name in props:
                errors.extend(schema_errors(item, props[name], f"{where}.{name}"))
            elif schema.get("additionalProperties") is False:
                errors.append(f"{where}: unexpected property '{name}'")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(f"{where}: fewer than {schema['minItems']} items")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(f"{where}: more than {schema['maxItems']} items")
        if isinstance(schema.get("items"), Mapping):
            for index, item in enumerate(value):
                errors.extend(schema_errors(item, schema["items"], f"{where}[{index}]"))
    if isinstance(value, str) and "minLength" in schema and len(value) < schema["minLength"]:
        errors.append(f"{where}: shorter than {schema['minLength']} characters")
    return errors


def parse_with_schema(schema: Mapping[str, Any]) -> Callable[[str], Any | None]:
    """A ``parse`` for :func:`complete_json`: tolerant parse, then the schema check."""
    want_array = schema.get("type") == "array"

    def parse(text: str) -> Any | None:
        value = parse_array(text) if want_array else parse_object(text)
        if value is None or schema_errors(value, schema):
            return None
        return value

    return parse


# --- one call, one retry ------------------------------------------------------------------


def complete_json_batch(
    llm: LLM,
    requests: Sequence[Request],
    parse: Callable[[str], Any | None] = parse_object,
    stats: CallStats | None = None,
    retries: int = 1,
) -> list[tuple[Any | None, list[Response]]]:
    """:func:`complete_json` for many requests: each round is one batch, so backends stay busy.

    A retry is the same request with ``attempt`` raised by one: a new cache key
    and a new seed, so it is a fresh sample rather than a replay of the failure.
    """
    parsed: list[Any | None] = [None] * len(requests)
    history: list[list[Response]] = [[] for _ in requests]
    pending = list(range(len(requests)))
    for round_index in range(retries + 1):
        if not pending:
            break
        batch = [replace(requests[i], attempt=requests[i].attempt + round_index) for i in pending]
        responses = llm.complete(batch)
        still_failing = []
        for index, request, response in zip(pending, batch, responses):
            history[index].append(response)
            if stats is not None:
                stats.add(request, response)
            value = parse(response.text)
            if value is None:
                still_failing.append(index)
            else:
                parsed[index] = value
        pending = still_failing
    return list(zip(parsed, history))


def complete_json(
    llm: LLM,
    request: Request,
    parse: Callable[[str], Any | None] = parse_object,
    stats: CallStats | None = None,
    retries: int = 1,
) -> tuple[Any | None, list[Response]]:
    """Ask once, parse tolerantly, retry once on failure; ``None`` means use the fallback.

    ``parse`` turns text into the caller's value or ``None`` (tolerant parse plus
    any validation, e.g. :func:`parse_with_schema`). Every response, failed or
    not, is returned for the run's records.
    """
    return complete_json_batch(llm, [request], parse, stats, retries)[0]
