"""Reading JSON out of model text.

Models wrap JSON in prose, code fences or a ``<think>`` span, and a capped
generation can cut a list short. The paper's code parses tolerantly; so do we:
strip the think span and fences, take the first ``{...}`` (or ``[...]``)
that decodes as JSON, and return ``None`` when nothing does.
Each caller decides what a failed parse means (a retry as a new sample, then
its documented fallback). Nothing here raises on bad model output, and every
step is linear in the reply's length, which is capped (``MAX_REPLY_CHARS``):
a degenerate reply costs milliseconds, never a hung run.
"""

from __future__ import annotations

import json
import re
from typing import Any

# Replies longer than this are not parsed: they are treated as unparseable (``None``). The
# largest budget any stage asks for is 2,816 tokens (the paper's verifier), a few ten thousand
# characters at most; a reply of 100,000 characters can only come from a server that ignored
# max_tokens or misbehaved, and parsing it could only cost time (book/deviations.md).
MAX_REPLY_CHARS = 100_000
_THINK_TAG = re.compile(r"<(/?)think>", re.IGNORECASE)
_FENCE_INFO = re.compile(r"[A-Za-z0-9_+-]*[ \t]*\n?")
_MAX_CANDIDATES = 64  # start positions tried before giving up; outputs are short


def strip_think(text: str) -> str:
    """Drop ``<think>…</think>`` spans, in one pass over the tags (linear in the text).

    A span runs from an opening tag to the first closing tag after it. An
    unclosed ``<think>`` means the answer never came, so everything after it
    goes; a lone ``</think>`` (the template opened the span in the prompt)
    keeps only what follows it.
    """
    kept: list[str] = []
    position = 0  # start of the text not yet copied or dropped
    opened = -1  # where the open span began, or -1 outside a span
    for tag in _THINK_TAG.finditer(text):
        closing = bool(tag.group(1))
        if opened < 0 and not closing:
            opened = tag.start()
        elif opened >= 0 and closing:
            kept.append(text[position:opened])
            position, opened = tag.end(), -1
        elif closing:  # a lone closing tag: what came before it was the prompt's open span
            kept, position = [], tag.end()
    kept.append(text[position:opened] if opened >= 0 else text[position:])
    return "".join(kept)


def strip_fences(text: str) -> str:
    """The inside of the first fenced code block, or the text unchanged if there is none.

    An opening fence with no closing one (a capped generation) loses just the fence line.
    """
    start = text.find("```")
    if start < 0:
        return text
    info = _FENCE_INFO.match(text, start + 3)  # the info string (``json``) and its line end
    assert info is not None  # the pattern matches the empty string too
    body = info.end()
    end = text.find("```", body)
    if end >= 0:
        return text[body:end]
    newline = text.find("\n", start)
    return text[newline + 1 :] if newline >= 0 else text[start + 3 :]


def first_balanced(text: str, opener: str = "{") -> Any | None:
    """The first JSON value opening with ``opener`` (``{`` or ``[``) somewhere in ``text``, decoded.

    Each candidate start is decoded in place by the C scanner of ``json``, which
    stops at the first character that cannot continue a JSON value, so a
    candidate costs what its valid prefix is long, never a scan of the rest.
    """
    if opener not in "{[" or len(opener) != 1:
        raise ValueError(f"opener must be '{{' or '[', got {opener!r}")
    decoder = json.JSONDecoder()
    start = text.find(opener)
    tried = 0
    while start >= 0 and tried < _MAX_CANDIDATES:
        tried += 1
        try:
            return decoder.raw_decode(text, start)[0]
        except (ValueError, RecursionError):  # not JSON here, or nested past the interpreter's limit
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
        except (ValueError, RecursionError):
            break
        items.append(item)
    return items or None


def _clean(text: str) -> str:
    """The reply with its think span and fences gone; empty when it is over ``MAX_REPLY_CHARS``."""
    text = text or ""
    return "" if len(text) > MAX_REPLY_CHARS else strip_fences(strip_think(text))


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
