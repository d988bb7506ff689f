"""Prompt templates as files, the order of their parts, and fitting a prompt into its token budget.

Templates live in ``fhs/method/prompts/*.txt`` so a reader can see every word the
model sees, and a prompt change shows up as a diff of a text file. They use
``$name`` placeholders (``string.Template``) because the templates themselves
contain JSON braces.

Order (book/deviations.md, "Instructions first"; book/engineering.md): every stage's user
message states the fixed instructions first (task, dimension glosses, rules,
answer format: the same for every fact of a taxonomy), then the source context
(the same for every fact of one table or document), then the located value's
own fields, then what differs between calls (the hypothesis, the candidates,
earlier readings). A server's prefix cache reuses whatever beginning requests
share (``dev/prefix_reuse.py`` measures how much). ``prompt_order="evidence-first"``
restores the authors' order, the evidence before the task, from
``prompts/evidence_first/``.

Budgets are tokens of the served model's vocabulary (``fhs.llm.tokens``), counted
over the whole chat request, and a prompt must also leave room for its reply in
the model's context window. ``fit_to_budget`` walks a stage's ladder (context
first, then definitions, then the last-resort field cuts) and refuses a prompt
that fits no rung rather than sending it.

Reading JSON out of a reply lives in ``fhs.llm.jsonout``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from string import Template
from typing import Any

from fhs.data.evidence import ORDERS
from fhs.llm.contract import Message, RequestRefused
from fhs.llm.line_tokens import LineCounter
from fhs.llm.tokens import TokenCounter, count_messages, default_counter

PROMPTS_DIR = Path(__file__).resolve().parent / "prompts"
DEFAULT_ORDER = ORDERS[0]
# Templates whose authors'-order version differs live here under the same name.
EVIDENCE_FIRST_DIR = PROMPTS_DIR / "evidence_first"


def template_path(name: str, order: str = DEFAULT_ORDER) -> Path:
    """``prompts/<name>.txt``, or its authors'-order version when ``order`` asks for it and one exists."""
    if order not in ORDERS:
        raise ValueError(f"prompt order must be one of {ORDERS}, got {order!r}")
    own = EVIDENCE_FIRST_DIR / f"{name}.txt"
    return own if order == "evidence-first" and own.is_file() else PROMPTS_DIR / f"{name}.txt"


@cache
def load_template(name: str, order: str = DEFAULT_ORDER) -> Template:
    """The template ``fhs/method/prompts/<name>.txt`` (see ``template_path``)."""
    return Template(template_path(name, order).read_text(encoding="utf-8"))


def render(name: str, *, order: str = DEFAULT_ORDER, **fields: str) -> str:
    """Fill a template; a missing field is a programming error and raises KeyError."""
    return load_template(name, order).substitute(**fields).strip() + "\n"


def fact_messages(user: str, order: str = DEFAULT_ORDER) -> tuple[Message, Message]:
    """Every call about a fact: the one shared system message, then the stage's user message."""
    return Message("system", render("system", order=order)), Message("user", user)


# ---- budgets --------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """How many prompt tokens one request may take.

    ``stage_tokens`` is the stage's own budget (``FHSConfig.*_prompt_tokens``);
    ``window`` the model's context length (``FHSConfig.context_tokens``), which
    must also hold the reply's ``max_tokens``.
    """

    stage_tokens: int
    max_tokens: int
    window: int | None = None

    @property
    def limit(self) -> int:
        if self.window is None:
            return self.stage_tokens
        return min(self.stage_tokens, self.window - self.max_tokens)

    def describe(self) -> str:
        if self.window is not None and self.window - self.max_tokens < self.stage_tokens:
            return (
                f"{self.limit:,} tokens (the model's {self.window:,}-token context less "
                f"{self.max_tokens:,} for the reply)"
            )
        return f"the stage's budget of {self.stage_tokens:,} tokens"


_PROMPT_COUNTER: list[LineCounter] = []


def prompt_counter() -> LineCounter:
    """The counter budgets use: the served vocabulary (``default_counter``), line by line (``fhs.llm.line_tokens``)."""
    if not _PROMPT_COUNTER:
        _PROMPT_COUNTER.append(LineCounter(default_counter()))
    return _PROMPT_COUNTER[0]


class PromptTooLong(RequestRefused):
    """No rung of the ladder fits the budget: the fact fails with this message and nothing is sent."""


@dataclass(frozen=True)
class Fitted:
    """A prompt that fits, and how: the ladder rung used (0 = as configured) and its token count
    (0 when its bytes alone showed that it fits, see ``bytes_bound``)."""

    messages: tuple[Message, ...]
    rung: int
    setting: Mapping[str, Any] = field(default_factory=dict)
    tokens: int = 0
    limit: int = 0
    rungs: int = 1

    @property
    def shortened(self) -> dict[str, Any] | None:
        """What a call record says about a shortened prompt; None when it fitted as configured."""
        if self.rung == 0:
            return None
        return {"rung": self.rung, "of": self.rungs - 1, **self.setting, "tokens": self.tokens, "limit": self.limit}


def distinct_rungs(ladder: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ladder without repeated settings (a small ``context_chars`` makes several rungs equal)."""
    out: list[dict[str, Any]] = []
    for rung in ladder:
        if dict(rung) not in out:
            out.append(dict(rung))
    return out


def bytes_bound(messages: Sequence[Message]) -> int:
    """At least the prompt's token count under a byte-level vocabulary (each token is a byte or more).

    Most prompts are far below their budget, so this bound spares counting them
    (counting was half of a run's client CPU); only those near it are counted.
    """
    return count_messages(_BYTES, messages)


class _Utf8Bytes:
    name, exact = "utf-8 bytes", False

    @staticmethod
    def count(text: str) -> int:
        return len(text.encode("utf-8"))


_BYTES = _Utf8Bytes()


def fit_to_budget(
    build: Callable[..., Sequence[Message]],
    ladder: Sequence[Mapping[str, Any]],
    budget: Budget,
    *,
    what: str,
    counter: TokenCounter | None = None,
) -> Fitted:
    """The messages of the first rung of ``ladder`` whose token count fits ``budget``.

    ``build(**rung)`` returns the chat messages; they are counted with the
    served vocabulary, ChatML wrapping included (``fhs.llm.tokens``). If even
    the last rung is too long, ``PromptTooLong`` names ``what`` and the sizes:
    the runner records the fact as failed instead of sending a request the
    server would refuse on every rerun.
    """
    # the default counters (Qwen's vocabulary, or the estimate) never count more tokens than bytes
    bounded = getattr(counter, "bytes_bound", False) if counter is not None else True
    rungs = distinct_rungs(ladder)
    tokens = 0
    for index, setting in enumerate(rungs):
        messages = tuple(build(**setting))
        if index == 0 and bounded and bytes_bound(messages) <= budget.limit:
            return Fitted(messages, 0, setting, 0, budget.limit, len(rungs))  # fits: no count needed
        counter = counter or prompt_counter()
        tokens = count_messages(counter, messages)
        if tokens <= budget.limit:
            return Fitted(messages, index, setting, tokens, budget.limit, len(rungs))
    raise PromptTooLong(
        f"{what}: {tokens:,} prompt tokens even at the shortest of {len(rungs)} budget rungs "
        f"({rungs[-1]}); the limit is {budget.describe()}. Raise the server's --max-model-len "
        "or the stage's *_prompt_tokens, or show fewer candidates"
    )


# Rungs tried after a stage's own ladder, for a fact whose value, headers or candidates are
# themselves too long: they cut every field, not only the context. A prompt that fitted
# one of the earlier rungs never reaches these, so it stays byte for byte what it was.
LAST_RESORT = (
    {"context_chars": 2_500, "field_chars": 1_000, "label_chars": 400},
    {"context_chars": 1_000, "field_chars": 200, "label_chars": 120},
)


def context_ladder(context_chars: int, steps: Sequence[int] = (12_000, 8_000, 5_000, 2_500)) -> list[dict[str, int]]:
    """The configured context length, then the authors' cuts below it (rung 0 is always as configured)."""
    return [{"context_chars": c} for c in (context_chars, *(c for c in steps if c < context_chars))]


def last_resort(context_chars: int, *, labels: bool, **more: Any) -> list[dict[str, Any]]:
    """``LAST_RESORT`` with its context never longer than the configured one (and ``label_chars``
    only for prompts that list candidates), plus ``more`` on each rung."""
    return [
        {
            "context_chars": min(rung["context_chars"], context_chars),
            "field_chars": rung["field_chars"],
            **({"label_chars": rung["label_chars"]} if labels else {}),
            **more,
        }
        for rung in LAST_RESORT
    ]


def clip(text: str, limit: int) -> str:
    """Whitespace-collapsed text cut to at most ``limit`` characters ('...' marks a cut)."""
    text = " ".join((text or "").split())
    if limit <= 0:
        return ""
    if len(text) <= limit:
        return text
    return text[: max(limit - 3, 0)].rstrip() + "..."
