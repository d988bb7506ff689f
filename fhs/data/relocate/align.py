"""Sentence alignment: which English lines translate which Spanish sentences."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from fhs.core.errors import InputError
from fhs.data.relocate.cognates import content_words, english_keys, lexicon_translations, spanish_keys, words
from fhs.data.relocate.sentences import Segment, is_paragraph_line

ALIGN_METHODS = ("dp", "count")  # sentence alignment rules; see AlignConfig.method


@dataclass(frozen=True)
class AlignConfig:
    """The alignment rule and the costs of the dynamic-programming aligner.

    ``method``: ``"count"`` is the paper's rule (sentence i <-> line i when the
    numbers of Spanish sentences and English lines agree, else no alignment);
    ``"dp"`` aligns every document by dynamic programming over 1-1, 1-2, 2-1,
    1-3, 3-1, 2-2, 1-0 and 0-1 beads, scoring length ratio, shared numbers and
    shared cognates, in the manner of Gale and Church (1993).
    """

    method: str = "dp"
    length_weight: float = 1.0
    overlap_weight: float = 2.0
    number_weight: float = 1.0
    merge_penalty: float = 1.0
    wide_merge_penalty: float = 2.5
    skip_penalty: float = 2.5


@dataclass(frozen=True)
class Alignment:
    """Which English lines render which Spanish sentences (indices into both lists).

    ``beads`` pair a tuple of Spanish sentence indices with a tuple of English line
    indices; either side may be empty where a sentence was dropped or added.
    """

    method: str
    beads: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]

    def english_for(self, spanish_indices: Iterable[int]) -> tuple[int, ...]:
        wanted = set(spanish_indices)
        lines: set[int] = set()
        for spanish, english in self.beads:
            if wanted.intersection(spanish):
                lines.update(english)
        return tuple(sorted(lines))


_NUMBER_RE = re.compile(r"\d+(?:[.,]\d+)?")


def _numbers(text: str) -> frozenset[str]:
    return frozenset(number.replace(",", ".") for number in _NUMBER_RE.findall(text))


@dataclass(frozen=True)
class _Unit:
    """What the aligner compares: length, numbers and cognate signatures of a sentence."""

    length: int
    numbers: frozenset[str]
    signatures: tuple[frozenset[str], ...]  # Spanish: one set per content word
    marker: bool  # a paragraph break (Spanish) or a "1." line (English)


def _signature(key: str) -> str:
    return key[:5]


@lru_cache(maxsize=100_000)
def _spanish_signatures(word: str) -> frozenset[str]:
    signatures = {_signature(key) for key in spanish_keys(word)}
    for english in lexicon_translations(word):
        signatures |= {_signature(key) for key in english_keys(english)}
    return frozenset(signatures)


def _spanish_unit(text: str, segment: Segment) -> _Unit:
    sentence = text[segment.start : segment.end]
    signatures = tuple(
        _spanish_signatures(word) for word in content_words(sentence) if len(word) > 3 and not word.isdigit()
    )
    return _Unit(len(sentence), _numbers(sentence), signatures, segment.paragraph_break)


def _english_unit(line: str) -> _Unit:
    signatures = frozenset(_signature(key) for _, _, word in words(line) for key in english_keys(word))
    return _Unit(len(line), _numbers(line), (signatures,), is_paragraph_line(line))


_BEADS = ((1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (2, 2), (1, 0), (0, 1))


def _bead_cost(spanish: Sequence[_Unit], english: Sequence[_Unit], ratio: float, config: AlignConfig) -> float:
    shape = (len(spanish), len(english))
    if 0 in shape:
        units = spanish or english
        return 0.3 if all(unit.marker for unit in units) else config.skip_penalty
    if any(unit.marker for unit in spanish) or any(unit.marker for unit in english):
        both = all(unit.marker for unit in spanish) and all(unit.marker for unit in english)
        return -1.0 if both and shape == (1, 1) else config.skip_penalty * 2
    penalty = {(1, 1): 0.0, (1, 2): config.merge_penalty, (2, 1): config.merge_penalty}.get(
        shape, config.wide_merge_penalty
    )
    length_es = sum(unit.length for unit in spanish)
    length_en = sum(unit.length for unit in english)
    length_cost = abs(math.log((length_en + 10) / (ratio * length_es + 10)))
    english_signatures = frozenset().union(*(unit.signatures[0] for unit in english))
    spanish_words = [signature for unit in spanish for signature in unit.signatures]
    overlap = (
        sum(1 for signature in spanish_words if signature & english_signatures) / len(spanish_words)
        if spanish_words
        else 0.0
    )
    numbers_es = frozenset().union(*(unit.numbers for unit in spanish))
    numbers_en = frozenset().union(*(unit.numbers for unit in english))
    numbers = len(numbers_es & numbers_en) / len(numbers_es | numbers_en) if numbers_es | numbers_en else 0.0
    return (
        penalty + config.length_weight * length_cost - config.overlap_weight * overlap - config.number_weight * numbers
    )


def align_document(
    spanish_text: str, segments: Sequence[Segment], lines: Sequence[str], config: AlignConfig = AlignConfig()
) -> Alignment | None:
    """Pair Spanish sentences with English lines; ``None`` when the rule gives no alignment.

    ``segments`` come from ``split_spanish_sentences(text, paragraph_breaks=True)``.
    """
    if config.method == "count":
        if len(segments) != len(lines):
            return None
        return Alignment("count", tuple(((i,), (i,)) for i in range(len(lines))))
    if config.method != "dp":
        raise InputError(
            f"unknown alignment method {config.method!r}", field="align", fix=f"use one of {', '.join(ALIGN_METHODS)}"
        )
    if not segments or not lines:
        return None
    spanish = [_spanish_unit(spanish_text, segment) for segment in segments]
    english = [_english_unit(line) for line in lines]
    ratio = (sum(unit.length for unit in english) + 1) / (sum(unit.length for unit in spanish) + 1)
    rows, cols = len(spanish), len(english)
    best = [[math.inf] * (cols + 1) for _ in range(rows + 1)]
    back: list[list[tuple[int, int] | None]] = [[None] * (cols + 1) for _ in range(rows + 1)]
    best[0][0] = 0.0
    for i in range(rows + 1):
        for j in range(cols + 1):
            if best[i][j] == math.inf:
                continue
            for di, dj in _BEADS:
                if i + di > rows or j + dj > cols:
                    continue
                cost = best[i][j] + _bead_cost(spanish[i : i + di], english[j : j + dj], ratio, config)
                if cost < best[i + di][j + dj]:
                    best[i + di][j + dj] = cost
                    back[i + di][j + dj] = (di, dj)
    beads = []
    i, j = rows, cols
    while (i, j) != (0, 0):
        step = back[i][j]
        assert step is not None  # every cell on the way back from the last one was reached
        di, dj = step
        beads.append((tuple(range(i - di, i)), tuple(range(j - dj, j))))
        i, j = i - di, j - dj
    return Alignment("dp", tuple(reversed(beads)))
