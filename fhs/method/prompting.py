"""Prompt templates as files, and fitting a prompt into its budget.

Templates live in ``fhs/method/prompts/*.txt`` so a reader can see every word the
model sees, and a prompt change shows up as a diff of a text file. They use
``$name`` placeholders (``string.Template``) because the templates themselves
contain JSON braces.

Reading JSON out of a reply lives in ``fhs.llm.jsonout``: forgiving about wrapping
(thinking spans, code fences, prose around the object); the callers' ``parse_*``
functions decide what a valid answer is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from string import Template
from typing import Any

from fhs.llm.contract import Message

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"


@lru_cache(maxsize=None)
def load_template(name: str) -> Template:
    """The template ``fhs/method/prompts/<name>.txt``."""
    path = PROMPTS_DIR / f"{name}.txt"
    return Template(path.read_text(encoding="utf-8"))


def render(name: str, **fields: str) -> str:
    """Fill a template; a missing field is a programming error and raises KeyError."""
    return load_template(name).substitute(**fields).strip() + "\n"


def fact_messages(user: str) -> tuple[Message, Message]:
    """Every call about a fact: the one shared system message, then a user message that opens
    with the fact's evidence block and states the stage's task after it.

    llama.cpp reuses the KV cache of the previous call for the longest common token
    prefix, so one fact's generator, verifier and selector calls evaluate the system
    message and the evidence once (``fhs bench llm`` shows the tokens reused).
    """
    return Message("system", render("system")), Message("user", user)


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


# Rungs tried after a stage's own ladder, for a fact whose value, headers or candidates are
# themselves too long: they cut every field, not only the context. A prompt that fitted
# one of the earlier rungs never reaches these, so it stays byte for byte what it was.
LAST_RESORT = ({"context_chars": 2_500, "field_chars": 1_000, "label_chars": 400},
               {"context_chars": 1_000, "field_chars": 200, "label_chars": 120})


def clip(text: str, limit: int) -> str:
    """Whitespace-collapsed text cut to at most ``limit`` characters ('...' marks a cut)."""
    text = " ".join((text or "").split())
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return text[: max(limit - 3, 0)].rstrip() + "..."
