"""Reading JSON out of model text.

Models wrap JSON in prose, code fences or a ``<think>`` span, and a capped
generation can cut a list short. The paper's code parses tolerantly; so do we:
strip the think span and fences, take the first balanced ``{...}`` (or
``[...]``) that ``json.loads`` accepts, and return ``None`` when nothing does.
Each caller decides what a failed parse means (a retry as a new sample, then
its documented fallback). Nothing here raises on bad model output.
"""

from __future__ import annotations

import json
import re
from typing import Any

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
    """The complete elements of a JSON array that was cut short.

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
