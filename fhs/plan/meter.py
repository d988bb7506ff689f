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


class PrefixShare:
    """The share of prompt text a server's prefix cache could serve: blocks of ``BLOCK`` characters,
    hashed in a chain as vLLM hashes its blocks of tokens, counted when an earlier prompt held the
    same chain. Measured in characters (counting tokens per block would cost the plan minutes) and
    with an unbounded cache: an upper bound on what a server that evicts blocks reuses."""

    BLOCK = 64  # characters, about vLLM's 16 tokens

    def __init__(self) -> None:
        self.seen: set[int] = set()
        self.shared = self.total = 0

    def add(self, request: Request) -> None:
        text = "".join(f"<|{m.role}|>{m.content}" for m in request.messages)
        chain, whole = 0, len(text) - len(text) % self.BLOCK
        self.total += len(text)
        for start in range(0, whole, self.BLOCK):
            chain = hash((chain, text[start : start + self.BLOCK]))
            if chain in self.seen:
                self.shared += self.BLOCK
            else:
                self.seen.add(chain)

    @property
    def share(self) -> float:
        return self.shared / self.total if self.total else 0.0


class Meter:
    """The simulated model behind the plan's cache: every request reaching it is one a server answers."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend
        self.kind, self.model, self.name = backend.kind, backend.model, backend.name
        self.calls: list[tuple[str, int, int]] = []  # (purpose, prompt tokens, output tokens)
        self.prefix = PrefixShare()

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        answers = self.backend.complete(requests)
        self.calls += [(r.purpose or "other", a.tokens_in, a.tokens_out) for r, a in zip(requests, answers)]
        for request in requests:
            self.prefix.add(request)
        return answers
