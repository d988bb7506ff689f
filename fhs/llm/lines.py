"""Counting and tokenizing prompts line by line, exactly, remembering lines already seen.

Prompts repeat most of their lines: a stage's instructions, a table's context, a
concept's candidate line. Qwen's pre-tokenizer (the byte-level BPE regex that
llama.cpp applies for the qwen2 vocabulary) never joins text across the last
line break of a whitespace run: the run up to that break is one piece (or
closes the punctuation before it), and what follows starts afresh. So a text
split right after such a break tokenizes into the concatenation of its parts'
tokens, and each distinct line is tokenized once. ``tests/test_prompting.py``
checks the equality on every stage's prompt and on adversarial whitespace.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from fhs.llm.tokens import TokenCounter

_LINE_ENDS = re.compile(r"(?<=[\r\n])(?=[^\S\r\n]*\S)")


def split_lines(text: str) -> list[str]:
    """``text`` cut after every line break that is the last of its whitespace run."""
    return _LINE_ENDS.split(text or "")


class _Memo:
    def __init__(self, compute: Callable[[str], object], max_lines: int) -> None:
        self.compute = compute
        self.max_lines = max_lines
        self._known: dict[str, object] = {}
        self._lock = threading.Lock()

    def get(self, line: str) -> object:
        known = self._known.get(line)
        if known is None:
            known = self.compute(line)
            with self._lock:
                if len(self._known) >= self.max_lines:
                    self._known.clear()
                self._known[line] = known
        return known

    def __len__(self) -> int:
        return len(self._known)


class LineCounter:
    """``counter``, line by line (the sum equals the whole text's count for the Qwen vocabulary).

    An estimating counter (``CharEstimate``) rounds each line up, so it can only over-count.
    """

    def __init__(self, counter: TokenCounter, max_lines: int = 200_000) -> None:
        self.counter = counter
        self.name = counter.name
        self.exact = counter.exact
        self.max_lines = max_lines
        self._memo = _Memo(counter.count, max_lines)

    @property
    def lines_held(self) -> int:
        """Lines in the memo now (at most ``max_lines``: it starts afresh when full, so memory stays bounded)."""
        return len(self._memo)

    def count(self, text: str) -> int:
        return sum(self._memo.get(line) for line in split_lines(text))  # type: ignore[misc]


class LineTokenizer:
    """Token ids of a text, line by line, from ``tokenize`` (e.g. ``QwenVocab.tokenize``)."""

    def __init__(self, tokenize: Callable[[str], list[int]], max_lines: int = 200_000) -> None:
        self._memo = _Memo(lambda line: tuple(tokenize(line)), max_lines)

    def __call__(self, text: str) -> list[int]:
        ids: list[int] = []
        for line in split_lines(text):
            ids.extend(self._memo.get(line))  # type: ignore[arg-type]
        return ids
