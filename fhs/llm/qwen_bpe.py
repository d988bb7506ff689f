"""Qwen's vocabulary without llama.cpp: its byte-level BPE merges, applied in pure Python.

A GPU plan is sized in tokens, and most of a base install's users have neither
llama-cpp-python nor the Qwen GGUF (the ``cpu`` extra). Qwen2.5 and Qwen3 share one
vocabulary; its 151,387 merges ship with the package (``vocab/qwen2-merges.txt.xz``,
derived from the CPU book's GGUF by ``python -m dev.qwen_merges``), and this module
applies them as the tokenizer does: the qwen2 pre-tokenizer's regex splits the text,
each piece's UTF-8 bytes are merged by rank. ``tests/test_qwen_bpe.py`` checks the counts
against llama.cpp's where it is installed.
"""

from __future__ import annotations

import lzma
import re
import sys
import unicodedata
from functools import lru_cache
from pathlib import Path

MERGES = Path(__file__).with_name("vocab") / "qwen2-merges.txt.xz"


def _byte_chars() -> list[str]:
    """GPT-2's printable stand-in for each byte, the alphabet the merges are written in."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def _class(prefix: str) -> str:
    """A regex character class body of every code point whose Unicode category starts with ``prefix``."""
    ranges: list[tuple[int, int]] = []
    start: int | None = None
    last = 0
    for code in range(sys.maxunicode + 1):
        if unicodedata.category(chr(code)).startswith(prefix):
            if start is None:
                start = code
            last = code
        elif start is not None:
            ranges.append((start, last))
            start = None
    if start is not None:
        ranges.append((start, last))
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)


@lru_cache(maxsize=1)
def _pre_tokenizer() -> re.Pattern:
    """The qwen2 pre-tokenizer (llama.cpp's form of tokenizer.json's regex), with \\p{L} and \\p{N} spelled out."""
    letter, number = _class("L"), _class("N")
    return re.compile(
        rf"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n{letter}{number}]?[{letter}]+"
        rf"|[{number}]| ?[^\s{letter}{number}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
    )


class QwenBPE:
    """Token counts under Qwen's vocabulary from the shipped merges: no llama.cpp, no GGUF."""

    exact = True
    bytes_bound = True  # byte-level BPE: every token is a byte or more

    def __init__(self, merges: Path = MERGES) -> None:
        lines = lzma.decompress(merges.read_bytes()).decode("utf-8").splitlines()
        self.ranks = {tuple(line.split(" ")): rank for rank, line in enumerate(lines)}
        self.chars = _byte_chars()
        # token ids as the vocabulary numbers them: the 256 byte tokens first, printable bytes in byte
        # order then the rest, then one token per merge in the merges' order (each token has one merge)
        self.ids = {char: i for i, char in enumerate(sorted(self.chars, key=lambda c: (ord(c) > 255, ord(c))))}
        self.ids.update({left + right: 256 + rank for (left, right), rank in self.ranks.items()})
        self.split = _pre_tokenizer().findall
        self.name = "qwen-bpe (the vocabulary's merges, shipped)"
        self._memo: dict[str, int] = {}

    def _piece(self, piece: str) -> int:
        count = self._memo.get(piece)
        if count is None:
            count = len(self._symbols(piece))
            if len(self._memo) < 500_000:
                self._memo[piece] = count
        return count

    def _symbols(self, piece: str) -> list[str]:
        """The tokens of one pre-token: its bytes, merged pair by pair in the merges' order."""
        symbols = [self.chars[b] for b in piece.encode("utf-8")]
        ranks = self.ranks
        while len(symbols) > 1:
            best, pair = None, None
            for left, right in zip(symbols, symbols[1:]):
                rank = ranks.get((left, right))
                if rank is not None and (best is None or rank < best):
                    best, pair = rank, (left, right)
            if pair is None:
                break
            merged, i, out = pair[0] + pair[1], 0, []
            while i < len(symbols):
                if i + 1 < len(symbols) and symbols[i] == pair[0] and symbols[i + 1] == pair[1]:
                    out.append(merged)
                    i += 2
                else:
                    out.append(symbols[i])
                    i += 1
            symbols = out
        return symbols

    def tokenize(self, text: str) -> list[int]:
        """Token ids of ``text``, as llama.cpp's reading of the GGUF gives them."""
        return [self.ids[symbol] for piece in self.split(text) for symbol in self._symbols(piece)]

    def count(self, text: str) -> int:
        return sum(self._piece(piece) for piece in self.split(text)) if text else 0
