"""Counting and tokenizing prompts line by line, exactly, remembering lines already seen.

Prompts repeat most of their lines: a stage's instructions, a table's context, a
concept's candidate line. Qwen's pre-tokenizer (the byte-level BPE regex that
llama.cpp applies for the qwen2 vocabulary) never joins text across the last
line break of a whitespace run: the run up to that break is one piece (or
closes the punctuation before it), and what follows starts afresh; nor does a
"]" join the space after it. So a text split at those places tokenizes into the
concatenation of its parts' tokens, and each distinct piece is tokenized once.
``tests/test_prompting.py`` checks the equality on every stage's prompt and on
adversarial whitespace.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable

from fhs.llm.tokens import TokenCounter

# After the last line break of a whitespace run, and between "]" and a space: no pre-token of
# Qwen's spans either, and the second lets a candidate's "[rank] id | ..." line be counted once
# whatever rank it is shown at.
_PIECE_ENDS = re.compile(r"(?<=[\r\n])(?=[^\S\r\n]*\S)|(?<=\])(?= )")
MAX_PIECES = 40_000  # enough for the pieces prompts repeat; a few MB, since a piece is held by its digest
_LOW64 = (1 << 64) - 1


def piece_key(piece: str) -> int:
    """What the memo files a piece under: its length and 64-bit hash, not the text itself.

    A candidate's line runs to hundreds of characters; holding every one seen made a
    long run's memory grow with its facts (``dev/bench_memory.py``). Two pieces
    share a key only if they have the same length and the same 64-bit hash.
    """
    return (len(piece) << 64) | (hash(piece) & _LOW64)


def split_lines(text: str) -> list[str]:
    """``text`` cut after every line break that is the last of its whitespace run, and after "] "'s "]"."""
    return _PIECE_ENDS.split(text or "")


class _Memo:
    """``compute(piece)`` remembered in two generations of at most ``max_lines // 2`` pieces each.

    When the young generation fills, it becomes the old one and the oldest is
    dropped; a piece found only in the old generation moves back to the young.
    So pieces every prompt repeats (instructions, frequent candidates) stay,
    one fact's table lines age out, and memory stays bounded.
    """

    def __init__(self, compute: Callable[[str], object], max_lines: int) -> None:
        self.compute = compute
        self.max_lines = max_lines
        self._young: dict[int, object] = {}  # piece_key -> what compute gave
        self._old: dict[int, object] = {}
        self._lock = threading.Lock()

    def get(self, line: str) -> object:
        key = piece_key(line)
        known = self._young.get(key)
        if known is not None:
            return known
        known = self._old.get(key)
        if known is None:
            known = self.compute(line)
        with self._lock:
            if len(self._young) >= max(self.max_lines // 2, 1):
                self._old, self._young = self._young, {}
            self._young[key] = known
        return known

    def __len__(self) -> int:
        return len(self._young) + len(self._old)


class LineCounter:
    """``counter``, line by line (the sum equals the whole text's count for the Qwen vocabulary).

    An estimating counter (``CharEstimate``) rounds each line up, so it can only over-count.
    """

    def __init__(self, counter: TokenCounter, max_lines: int = MAX_PIECES) -> None:
        self.counter = counter
        self.name = counter.name
        self.exact = counter.exact
        self.bytes_bound = getattr(counter, "bytes_bound", False)
        self.max_lines = max_lines
        self._memo = _Memo(counter.count, max_lines)

    @property
    def lines_held(self) -> int:
        """Pieces in the memo now (at most ``max_lines``: older ones are dropped, so memory stays bounded)."""
        return len(self._memo)

    def count(self, text: str) -> int:
        return sum(self._memo.get(line) for line in split_lines(text))  # type: ignore[misc]


class LineTokenizer:
    """Token ids of a text, line by line, from ``tokenize`` (e.g. ``QwenVocab.tokenize``)."""

    def __init__(self, tokenize: Callable[[str], list[int]], max_lines: int = MAX_PIECES) -> None:
        self._memo = _Memo(lambda line: tuple(tokenize(line)), max_lines)

    def __call__(self, text: str) -> list[int]:
        ids: list[int] = []
        for line in split_lines(text):
            ids.extend(self._memo.get(line))  # type: ignore[arg-type]
        return ids
