"""Counting what the plan's dry run asks: the simulated model metered, prompt tokens counted line by line.

``fhs plan`` (:mod:`fhs.plan.dry_run`) asks the simulated model hundreds of thousands of
times; the line memo keeps that to minutes on two cores without changing a count (the
domain itself remembers each candidate's category profile).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from fhs.llm.contract import Request, Response
from fhs.llm.tokens import TokenCounter


class LineMemo:
    """A token counter that counts a prompt line by line and remembers each line's count.

    The plan renders hundreds of thousands of prompts whose lines repeat (the
    selector's 200 candidate lines, the instructions). Qwen's pre-tokenizer never
    joins a newline to the text after it, so cutting where a newline meets
    non-space text gives the same total as counting the whole; the first
    ``checks`` texts are counted both ways, and any difference turns the memo off.
    """

    # where a newline meets text, and after the "]" of a candidate's "[rank]" (so a candidate's
    # line is counted once whatever its rank): no pre-token of Qwen's spans either cut
    _CUT = re.compile(r"(?<=[\r\n])(?=\S)|(?<=\])(?= )")

    def __init__(self, counter: TokenCounter, checks: int = 50) -> None:
        self.counter, self.checks = counter, checks
        self.name, self.exact = counter.name, counter.exact
        self.bytes_bound = getattr(counter, "bytes_bound", False)
        self.memo: dict[str, int] = {}
        self.enabled = True

    def _pieces(self, text: str) -> int:
        total = 0
        for piece in self._CUT.split(text):
            count = self.memo.get(piece)
            if count is None:
                count = self.memo[piece] = self.counter.count(piece)
            total += count
        return total

    def count(self, text: str) -> int:
        if not self.enabled or not text:
            return self.counter.count(text)
        if self.checks > 0:
            self.checks -= 1
            whole = self.counter.count(text)
            if whole != self._pieces(text):
                self.enabled = False
            return whole
        return self._pieces(text)


class Meter:
    """The simulated model behind the plan's cache: every request reaching it is one a server answers."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.kind, self.model, self.name = backend.kind, backend.model, backend.name
        self.calls: list[tuple[str, int, int]] = []  # (purpose, prompt tokens, output tokens)

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        answers = self.backend.complete(requests)
        self.calls += [(r.purpose or "other", a.tokens_in, a.tokens_out) for r, a in zip(requests, answers)]
        return answers
