"""Spanish sentences and English lines: the units that relocation aligns.

The Spanish text is cut by rule; the English machine translation already has
one sentence per line, and writes a line ``1.`` where the Spanish has a blank
line between paragraphs.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass


def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends."""
    return " ".join(text.split())


def strip_accents(text: str) -> str:
    """``riñón`` -> ``rinon``: accents and the tilde carry no meaning for cognate matching."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


@dataclass(frozen=True)
class Segment:
    """A Spanish sentence as ``[start, end)`` character offsets into the document.

    ``paragraph_break`` marks a run of blank lines between paragraphs: the
    machine translation writes a line ``1.`` for each, so alignment needs them
    as units of their own. They hold no text and never hold a mention.
    """

    start: int
    end: int
    paragraph_break: bool = False


# A boundary: one or more of . ! ? (optionally followed by closing quotes or a bracket), then
# whitespace, then what a new sentence starts with: an upper-case letter, a digit, an
# opening quote or bracket, or Spanish opening punctuation.
_BOUNDARY = re.compile(r"[.!?]+[\"'”»)\]]*(?=\s+[\"'“«(¿¡0-9A-ZÁÉÍÓÚÜÑ])")
_LAST_WORD = re.compile(r"(\S+)$")

# Abbreviations after which a period does not end a sentence (compared without accents,
# lower case, without the final period).
SPANISH_ABBREVIATIONS = frozenset(
    """dr dra drs dras sr sra sres srta ud uds pag pags fig figs tab num nums aprox approx etc
    vs ej p.ej cols col vol cap art ref refs no nro max min seg sem dcha izq izda dcho prof
    lic ing gral cia dpto hosp serv tto trat ant post aa.ee a.c d.c i.v i.m s.c v.o
    cm mm kg mg""".split()
)
# Units: the translation keeps "... 6 cm. No se ..." on one line, so "cm." is treated as an
# abbreviation; "ml." and "h." do end sentences there. Chosen on the train and dev splits
# (sentence-count agreement 620 -> 681 of 750 documents).


def _is_abbreviation(word: str) -> bool:
    """Initials (``J.``, ``A.I.N.E``) and listed abbreviations do not end a sentence."""
    bare = strip_accents(word).rstrip(".").lstrip("(\"'“«")
    if not bare:
        return False
    if re.fullmatch(r"[A-Z]", bare):  # a single capital: an initial (not "50 g.")
        return True
    if re.fullmatch(r"(?:[A-Za-z]\.)+[A-Za-z]", bare):  # dotted initials: A.I.N.E, i.v
        return True
    return bare.lower() in SPANISH_ABBREVIATIONS


def _split_line(text: str, start: int, end: int) -> list[Segment]:
    segments: list[Segment] = []
    begin = start
    for match in _BOUNDARY.finditer(text, start, end):
        word = _LAST_WORD.search(text, begin, match.start())
        if word is not None and _is_abbreviation(word.group(1)):
            continue
        segments.append(Segment(begin, match.end()))
        begin = match.end()
        while begin < end and text[begin].isspace():
            begin += 1
    if text[begin:end].strip():
        segments.append(Segment(begin, begin + len(text[begin:end].rstrip())))
    return segments


def split_spanish_sentences(text: str, *, paragraph_breaks: bool = False) -> list[Segment]:
    """Sentences of a Spanish document, in order, as character offsets.

    A line break always ends a sentence. Inside a line a sentence ends at ``.``,
    ``!`` or ``?`` followed by whitespace and an upper-case letter, a digit or an
    opening quote, unless the word before is an initial or a known abbreviation.
    With ``paragraph_breaks`` each run of blank lines between two non-blank lines
    becomes a ``Segment`` with ``paragraph_break=True`` (see ``Segment``).
    """
    segments: list[Segment] = []
    position = 0
    pending_break = False
    for line in text.split("\n"):
        line_end = position + len(line)
        if line.strip():
            if pending_break and paragraph_breaks and segments:
                segments.append(Segment(position, position, paragraph_break=True))
            pending_break = False
            offset = position + (len(line) - len(line.lstrip()))
            segments.extend(_split_line(text, offset, line_end))
        else:
            pending_break = True
        position = line_end + 1
    return segments


def english_lines(text: str) -> list[str]:
    """The English translation's sentences: its non-blank lines, whitespace-normalised."""
    return [normalize_whitespace(line) for line in text.split("\n") if line.strip()]


def is_paragraph_line(line: str) -> bool:
    """The translation's stand-in for a blank line between paragraphs."""
    return line.strip() == "1."
