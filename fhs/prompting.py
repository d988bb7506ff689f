"""Prompt templates as files, and reading JSON out of a model's reply.

Templates live in ``fhs/prompts/*.txt`` so a reader can see every word the
model sees, and a prompt change shows up as a diff of a text file. They use
``$name`` placeholders (``string.Template``) because the templates themselves
contain JSON braces.

The JSON readers are deliberately forgiving about wrapping (thinking spans,
code fences, prose around the object) and strict about content: the callers'
``parse_*`` functions decide what a valid answer is.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Any

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"

_THINK = re.compile(r"<think>.*?(</think>|$)", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?")


@lru_cache(maxsize=None)
def load_template(name: str) -> Template:
    """The template ``fhs/prompts/<name>.txt``."""
    path = PROMPTS_DIR / f"{name}.txt"
    return Template(path.read_text(encoding="utf-8"))


def render(name: str, **fields: str) -> str:
    """Fill a template; a missing field is a programming error and raises KeyError."""
    return load_template(name).substitute(**fields).strip() + "\n"


def strip_wrapping(text: str) -> str:
    """Drop ``<think>`` spans and code fences that models put around JSON."""
    return _FENCE.sub("", _THINK.sub("", text or "")).strip()


def _balanced_spans(text: str, opener: str) -> Iterator[str]:
    """Every balanced ``{...}`` or ``[...]`` starting at an ``opener``, in order, honouring strings."""
    closer = "}" if opener == "{" else "]"
    start = text.find(opener)
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for position in range(start, len(text)):
            char = text[position]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char in "{[":
                depth += 1
            elif char in "}]":
                depth -= 1
                if depth == 0:
                    if char == closer:
                        yield text[start:position + 1]
                    break
        start = text.find(opener, start + 1)


def json_payload(text: str, opener: str = "{") -> Any | None:
    """The first balanced JSON value starting with ``opener`` that parses, or None."""
    cleaned = strip_wrapping(text)
    try:
        value = json.loads(cleaned)
        if (opener == "{" and isinstance(value, dict)) or (opener == "[" and isinstance(value, list)):
            return value
    except json.JSONDecodeError:
        pass
    for span in _balanced_spans(cleaned, opener):
        try:
            return json.loads(span)
        except json.JSONDecodeError:
            continue
    return None


def salvage_array_objects(text: str) -> list[Any]:
    """Complete ``{...}`` entries of the first JSON array, even if the array was cut off.

    A verifier reply that hit its token cap ends mid-entry; the entries before
    the cut are still valid and worth keeping.
    """
    cleaned = strip_wrapping(text)
    start = cleaned.find("[")
    if start == -1:
        return []
    entries: list[Any] = []
    depth, in_string, escaped, entry_start = 0, False, False, -1
    for position in range(start + 1, len(cleaned)):
        char = cleaned[position]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            if depth == 0 and char == "{":
                entry_start = position
            depth += 1
        elif char in "}]":
            if depth == 0:  # the array itself closed
                break
            depth -= 1
            if depth == 0 and char == "}" and entry_start >= 0:
                try:
                    entries.append(json.loads(cleaned[entry_start:position + 1]))
                except json.JSONDecodeError:
                    pass
                entry_start = -1
    return entries


def fit_to_budget(build: Callable[..., str], ladder: Sequence[dict[str, Any]], max_chars: int) -> tuple[str, dict[str, Any]]:
    """Build a prompt with the first setting of ``ladder`` whose result fits ``max_chars``.

    The last rung is used even if it is still too long: a long prompt is better
    than no call at all, and the backend reports the real token count.
    """
    prompt, used = "", dict(ladder[-1])
    for setting in ladder:
        prompt = build(**setting)
        used = dict(setting)
        if len(prompt) <= max_chars:
            break
    return prompt, used


def clip(text: str, limit: int) -> str:
    """Whitespace-collapsed text cut to at most ``limit`` characters ('...' marks a cut)."""
    text = " ".join((text or "").split())
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return text[: max(limit - 3, 0)].rstrip() + "..."
