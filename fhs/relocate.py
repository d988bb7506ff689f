"""Relocating a Spanish CodiEsp mention into the English machine translation.

CodiEsp annotates diagnoses on the Spanish text; the method reads English.
Relocation runs in three steps, each a small function here:

1. ``split_spanish_sentences`` cuts the Spanish document into sentences by rule,
   and ``align_document`` pairs those sentences with the English lines (the
   translation has one sentence per line).
2. ``build_task`` finds the sentence(s) a mention's offsets fall in and takes
   the aligned English line(s) as the candidate text, or the whole English
   document when the alignment gives nothing (``scope`` records which).
3. A ``Relocator`` copies the English phrase that matches the Spanish mention
   out of the candidate. Whatever it proposes is accepted only if it is an exact
   substring of the whitespace-normalised candidate (``accept_span``), so a
   relocated value is always text a reader of the English document sees.

Two relocators share that interface: ``DeterministicRelocator`` (cognates, a
small hand-written lexicon and character similarity, no model) and
``LLMRelocator`` (one greedy model call per mention, as in the paper).
``RelocationCache`` keeps their results on disk so a book rebuild never pays twice.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

from fhs.errors import InputError
from fhs.llm import LLM, Message, Request
from fhs.relocate_lexicon import ENGLISH_STOPWORDS, LEXICON, OPTIONAL_WORDS, SPANISH_STOPWORDS

STATUSES = ("exact", "fallback-sentence", "fallback-document", "failed")
METHODS = ("deterministic", "llm")
SCOPES = ("sentence", "document")

# ---------------------------------------------------------------------------------------------
# Text helpers


def normalize_whitespace(text: str) -> str:
    """Collapse every run of whitespace to one space and strip the ends."""
    return " ".join(text.split())


def strip_accents(text: str) -> str:
    """``riñón`` -> ``rinon``: accents and the tilde carry no meaning for cognate matching."""
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(char for char in decomposed if not unicodedata.combining(char))


# ---------------------------------------------------------------------------------------------
# Spanish sentences


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


# ---------------------------------------------------------------------------------------------
# Words, cognate keys and the lexicon: how a Spanish word is recognised in English

_WORD_RE = re.compile(r"[^\W_]+")
_ROMAN = {"ii": "2", "iii": "3", "iv": "4", "vi": "6", "vii": "7", "viii": "8", "ix": "9"}

# Spanish -> English spelling rules, tried on the end of a (singular) Spanish word.
_SUFFIX_RULES = (
    ("ccion", "ction"), ("cion", "tion"), ("sion", "sion"), ("dad", "ty"), ("tad", "ty"),
    ("oso", "ous"), ("osa", "ous"), ("ico", "ical"), ("ica", "ical"), ("ia", "y"),
    ("ario", "ary"), ("aria", "ary"), ("ar", "ary"), ("ivo", "ive"), ("iva", "ive"),
    ("mento", "ment"), ("ado", "ed"), ("ada", "ed"), ("ado", "ated"), ("ada", "ated"),
    ("ido", "ed"), ("ida", "ed"),
    ("o", "um"), ("o", "us"), ("on", "um"), ("encia", "ence"), ("ancia", "ance"), ("eo", "eal"),
    ("ea", "eal"), ("al", ""),
)
# Spanish spellings inside a word: hepatoesplenomegalia -> hepatosplenomegaly.
_INFIX_RULES = (("oesp", "osp"), ("oest", "ost"), ("oesc", "osc"), ("linf", "lymph"), ("inm", "imm"))
# Spanish -> English spelling rules at the start of a word.
_PREFIX_RULES = (("neu", "pneu"), ("sic", "psych"), ("eso", "oeso"))
# Spelling differences neither language marks consistently; applied to both sides.
_KEY_RULES = (("ph", "f"), ("th", "t"), ("rh", "r"), ("ch", "c"), ("qu", "c"), ("k", "c"),
              ("y", "i"), ("ae", "e"), ("oe", "e"), ("z", "s"))


def words(text: str) -> list[tuple[int, int, str]]:
    """Alphanumeric runs with their offsets; a hyphen or an apostrophe separates words."""
    return [(match.start(), match.end(), match.group()) for match in _WORD_RE.finditer(text)]


@lru_cache(maxsize=200_000)
def cognate_key(word: str) -> str:
    """A spelling key under which a Spanish word and its English cognate tend to coincide.

    Lower case, no accents, Greek and Latin spellings merged (``ph``/``f``,
    ``y``/``i``, ...), doubled letters collapsed and final vowels dropped:
    ``hipertrofia`` and ``hypertrophy`` both become ``hipertrof``.
    """
    key = strip_accents(word.lower())
    for old, new in _KEY_RULES:
        key = key.replace(old, new)
    key = re.sub(r"(.)\1+", r"\1", key)
    stripped = key.rstrip("aeiou")
    return stripped if len(stripped) >= 2 else key


def _spanish_singular(word: str) -> str:
    if len(word) > 4 and word.endswith("es") and word[-3] in "lnrdzj":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("is", "us")):
        return word[:-1]
    return word


@lru_cache(maxsize=100_000)
def spanish_keys(word: str) -> frozenset[str]:
    """Cognate keys of the English forms a Spanish word may take."""
    base = strip_accents(word.lower())
    singular = _spanish_singular(base)
    forms = {base, singular}
    for old, new in _SUFFIX_RULES:
        if singular.endswith(old) and len(singular) > len(old) + 2:
            forms.add(singular[: -len(old)] + new)
    for form in list(forms):
        if re.match(r"es[bcdfgjklmnpqstvz]", form):  # estenosis -> stenosis
            forms.add(form[1:])
        for old, new in _PREFIX_RULES:
            if form.startswith(old):
                forms.add(new + form[len(old):])
        for old, new in _INFIX_RULES:
            if old in form:
                forms.add(form.replace(old, new))
    return frozenset(cognate_key(form) for form in forms if form)


def _english_base(word: str) -> str:
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "is", "us")):
        return word[:-1]
    return word


@lru_cache(maxsize=200_000)
def english_keys(word: str) -> frozenset[str]:
    """Cognate keys of an English word: as written, singular, and without -ed/-us/-um/-is."""
    base = _english_base(word)
    forms = {word.lower(), base}
    for suffix in ("ed", "us", "um", "is"):
        if base.endswith(suffix) and len(base) > len(suffix) + 3:
            forms.add(base[: -len(suffix)])
    return frozenset(cognate_key(form) for form in forms)


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


@dataclass(frozen=True)
class MatchConfig:
    """Thresholds of the cognate matcher (tuned by eye on the train and dev splits).

    ``min_similarity``: 1 - edit distance / longer key, for keys of ``min_key`` or
    more characters; shorter keys must be equal. ``same_prefix``: that many
    leading characters of the two keys must agree, which keeps ``hiper-`` and
    ``hipo-`` apart.
    """

    min_similarity: float = 0.7
    min_key: int = 4
    same_prefix: int = 4


def _key_similarity(a: str, b: str, config: MatchConfig) -> float:
    if a == b:
        return 1.0
    if min(len(a), len(b)) < config.min_key or a[: config.same_prefix] != b[: config.same_prefix]:
        return 0.0
    similarity = 1.0 - _edit_distance(a, b) / max(len(a), len(b))
    return similarity if similarity >= config.min_similarity else 0.0


@lru_cache(maxsize=100_000)
def _lexicon_entry(word: str) -> frozenset[str]:
    """English renderings of a Spanish word, trying it as written, singular and masculine."""
    base = strip_accents(word.lower())
    found: set[str] = set()
    for form in dict.fromkeys((word.lower(), base, _spanish_singular(base))):
        variants = {form}
        if form.endswith("a"):
            variants.add(form[:-1] + "o")
        if form.endswith("as"):
            variants.add(form[:-2] + "os")
        for variant in variants:
            found |= _LEXICON_ENGLISH.get(variant, frozenset())
    return frozenset(found)


_LEXICON_ENGLISH: dict[str, frozenset[str]] = {
    strip_accents(spanish): frozenset(_english_base(english) for english in values)
    for spanish, values in LEXICON.items()
}
_LEXICON_ENGLISH.update({spanish: frozenset(_english_base(english) for english in values)
                         for spanish, values in LEXICON.items()})


@lru_cache(maxsize=500_000)
def word_match(spanish: str, english: str, config: MatchConfig = MatchConfig()) -> float:
    """How surely the English word renders the Spanish one: 1.0 for the lexicon or an equal
    key, the cognate similarity otherwise, 0.0 for no match."""
    spanish_low, english_low = spanish.lower(), english.lower()
    if spanish_low.isdigit() or english_low.isdigit() or spanish_low in _ROMAN or english_low in _ROMAN:
        return 1.0 if _ROMAN.get(spanish_low, spanish_low) == _ROMAN.get(english_low, english_low) else 0.0
    translations = _lexicon_entry(spanish)
    if translations and (_english_base(english) in translations or english_low in translations):
        return 1.0
    best = 0.0
    for key_es in spanish_keys(spanish):
        for key_en in english_keys(english):
            best = max(best, _key_similarity(key_es, key_en, config))
            if best == 1.0:
                return best
    return best


def content_words(mention: str) -> list[str]:
    """The words of a Spanish mention that need an English counterpart."""
    return [word for _, _, word in words(mention) if word.lower() not in SPANISH_STOPWORDS]


# ---------------------------------------------------------------------------------------------
# Sentence alignment: Spanish sentences <-> English lines


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
    for english in _lexicon_entry(word):
        signatures |= {_signature(key) for key in english_keys(english)}
    return frozenset(signatures)


def _spanish_unit(text: str, segment: Segment) -> _Unit:
    sentence = text[segment.start:segment.end]
    signatures = tuple(_spanish_signatures(word) for word in content_words(sentence)
                       if len(word) > 3 and not word.isdigit())
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
        shape, config.wide_merge_penalty)
    length_es = sum(unit.length for unit in spanish)
    length_en = sum(unit.length for unit in english)
    length_cost = abs(math.log((length_en + 10) / (ratio * length_es + 10)))
    english_signatures = frozenset().union(*(unit.signatures[0] for unit in english))
    spanish_words = [signature for unit in spanish for signature in unit.signatures]
    overlap = (sum(1 for signature in spanish_words if signature & english_signatures) / len(spanish_words)
               if spanish_words else 0.0)
    numbers_es = frozenset().union(*(unit.numbers for unit in spanish))
    numbers_en = frozenset().union(*(unit.numbers for unit in english))
    numbers = len(numbers_es & numbers_en) / len(numbers_es | numbers_en) if numbers_es | numbers_en else 0.0
    return (penalty + config.length_weight * length_cost
            - config.overlap_weight * overlap - config.number_weight * numbers)


def align_document(spanish_text: str, segments: Sequence[Segment], lines: Sequence[str],
                   config: AlignConfig = AlignConfig()) -> Alignment | None:
    """Pair Spanish sentences with English lines; ``None`` when the rule gives no alignment.

    ``segments`` come from ``split_spanish_sentences(text, paragraph_breaks=True)``.
    """
    if config.method == "count":
        if len(segments) != len(lines):
            return None
        return Alignment("count", tuple(((i,), (i,)) for i in range(len(lines))))
    if config.method != "dp":
        raise InputError(f"unknown alignment method {config.method!r}", field="align",
                         fix="use 'count' or 'dp'")
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
                cost = best[i][j] + _bead_cost(spanish[i:i + di], english[j:j + dj], ratio, config)
                if cost < best[i + di][j + dj]:
                    best[i + di][j + dj] = cost
                    back[i + di][j + dj] = (di, dj)
    beads = []
    i, j = rows, cols
    while (i, j) != (0, 0):
        di, dj = back[i][j]
        beads.append((tuple(range(i - di, i)), tuple(range(j - dj, j))))
        i, j = i - di, j - dj
    return Alignment("dp", tuple(reversed(beads)))


# ---------------------------------------------------------------------------------------------
# From a mention to a relocation task


@dataclass(frozen=True)
class AlignedDocument:
    """A Spanish document, its English translation and the alignment between them."""

    document_id: str
    spanish: str
    segments: tuple[Segment, ...]
    lines: tuple[str, ...]
    alignment: Alignment | None

    @classmethod
    def build(cls, document_id: str, spanish: str, english: str,
              config: AlignConfig = AlignConfig()) -> "AlignedDocument":
        segments = tuple(split_spanish_sentences(spanish, paragraph_breaks=True))
        lines = tuple(english_lines(english))
        return cls(document_id, spanish, segments, lines, align_document(spanish, segments, lines, config))

    @property
    def english_text(self) -> str:
        """The whole English document, one space between lines, without the ``1.`` lines
        that stand for paragraph breaks."""
        return " ".join(line for line in self.lines if not is_paragraph_line(line))

    def sentences_for(self, spans: Sequence[tuple[int, int]]) -> tuple[int, ...]:
        """Indices of the Spanish sentences that the character spans fall in.

        A span that touches no sentence (it covers only whitespace) takes the
        nearest sentence before it.
        """
        found: set[int] = set()
        for start, end in spans:
            if not 0 <= start < end <= len(self.spanish):
                raise ValueError(f"span {start}-{end} outside the Spanish text (length {len(self.spanish)})")
            hits = [i for i, segment in enumerate(self.segments)
                    if not segment.paragraph_break and segment.start < end and start < segment.end]
            if not hits:
                before = [i for i, segment in enumerate(self.segments)
                          if not segment.paragraph_break and segment.start <= start]
                hits = before[-1:] or [0]
            found.update(hits)
        return tuple(sorted(found))

    def task(self, mention: str, spans: Sequence[tuple[int, int]]) -> "RelocationTask":
        """What a relocator needs for one mention: the Spanish context and the English candidate."""
        indices = self.sentences_for(spans)
        first, last = self.segments[indices[0]], self.segments[indices[-1]]
        spanish_context = normalize_whitespace(self.spanish[first.start:last.end])
        english_indices = self.alignment.english_for(indices) if self.alignment is not None else ()
        english_indices = tuple(j for j in english_indices if not is_paragraph_line(self.lines[j]))
        if english_indices:
            scope, candidate = "sentence", " ".join(self.lines[j] for j in english_indices)
            low, high = first.start, last.end
        else:
            scope, candidate = "document", self.english_text
            low, high = 0, len(self.spanish)
        middle = (spans[0][0] + spans[-1][1]) / 2
        position = min(1.0, max(0.0, (middle - low) / max(1, high - low)))
        return RelocationTask(
            document_id=self.document_id,
            mention=normalize_whitespace(mention),
            spanish_context=spanish_context,
            candidate=normalize_whitespace(candidate),
            scope=scope,
            position=round(position, 4),
            english_lines=english_indices,
        )


@dataclass(frozen=True)
class RelocationTask:
    """One mention to relocate: everything a relocator may read, and nothing more.

    ``candidate`` is the whitespace-normalised English text the answer must be
    copied from; ``scope`` says whether it is the aligned sentence(s) or the
    whole document. ``position`` (0..1) is where the mention sits inside its
    Spanish context, a weak prior when a phrase occurs twice.
    """

    document_id: str
    mention: str
    spanish_context: str
    candidate: str
    scope: str
    position: float = 0.5
    english_lines: tuple[int, ...] = ()

    def fingerprint(self) -> str:
        """A hash of the inputs: a cached answer is reused only for identical inputs."""
        payload = json.dumps([self.mention, self.spanish_context, self.candidate, self.scope,
                              self.position], ensure_ascii=False)
        return hashlib.sha1(payload.encode("utf-8")).hexdigest()[:20]


# ---------------------------------------------------------------------------------------------
# The result and the acceptance rule


@dataclass(frozen=True)
class Relocation:
    """The English counterpart of one Spanish mention.

    ``status``: ``exact`` when ``english`` was accepted as an exact substring of
    the candidate (``start``/``end`` index the candidate); otherwise
    ``fallback-sentence`` or ``fallback-document`` (nothing accepted; the fact
    can still fall back to its candidate text, whose scope the name gives) or
    ``failed`` (there was no English text to search).
    ``method``: ``deterministic`` or ``llm``. ``note`` says why nothing was accepted.
    """

    english: str | None
    start: int | None
    end: int | None
    status: str
    method: str
    scope: str
    note: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")

    @property
    def exact(self) -> bool:
        return self.status == "exact"

    @classmethod
    def accepted(cls, task: RelocationTask, start: int, end: int, method: str, note: str = "") -> "Relocation":
        return cls(task.candidate[start:end], start, end, "exact", method, task.scope, note)

    @classmethod
    def not_found(cls, task: RelocationTask, method: str, note: str) -> "Relocation":
        status = "failed" if not task.candidate else f"fallback-{task.scope}"
        return cls(None, None, None, status, method, task.scope, note)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_EDGE_PUNCTUATION = " \t\n.,;:!?\"'`“”«»"


def accept_span(answer: str, candidate: str, position: float = 0.5) -> tuple[int, int] | None:
    """Where ``answer`` occurs in ``candidate`` as an exact substring, or ``None``.

    Both sides are compared after whitespace normalisation (``candidate`` is
    expected to be normalised already); surrounding quotes and sentence
    punctuation on the answer are dropped first. When the phrase occurs more than
    once, the occurrence nearest ``position`` (a fraction of the candidate) wins.
    """
    if candidate != normalize_whitespace(candidate):
        raise ValueError("the candidate text must be whitespace-normalised")
    phrase = normalize_whitespace(answer).strip(_EDGE_PUNCTUATION)
    if not phrase:
        return None
    starts = [match.start() for match in re.finditer(re.escape(phrase), candidate)]
    if not starts:
        return None
    target = position * len(candidate)
    start = min(starts, key=lambda s: (abs(s + len(phrase) / 2 - target), s))
    return start, start + len(phrase)


class Relocator(Protocol):
    """Anything that relocates a batch of mentions, in order.

    ``name`` identifies the relocator and its configuration (version, model,
    prompt) and becomes part of the cache file name; ``method`` is
    ``deterministic`` or ``llm``.
    """

    name: str
    method: str

    def relocate(self, tasks: Sequence[RelocationTask]) -> list[Relocation]: ...


# ---------------------------------------------------------------------------------------------
# The deterministic relocator


@dataclass(frozen=True)
class DeterministicConfig:
    """How much of a mention must be found, and how compactly.

    Every content word of the mention must match an English word (lexicon,
    equal cognate key or cognate similarity), except that mentions of
    ``partial_from`` or more content words may leave ``max_missing`` unmatched.
    The matched words must lie within ``width_per_word * n + width_slack``
    English words and inside one English sentence, and the stretch may hold at
    most ``max(unmatched_slack, n - 1)`` other content words (a clause such as
    "pain was achieved when the lingual" is not a rendering of "dolor lingual").
    A one-word mention needs a match of at least ``single_word_score``.
    """

    match: MatchConfig = MatchConfig()
    partial_from: int = 4
    max_missing: int = 1
    width_per_word: int = 2
    width_slack: int = 2
    single_word_score: float = 0.85
    unmatched_slack: int = 1


# A sentence end inside a stretch of English: ". " before a capital or digit, not after an
# initial ("S. pyogenes").
_SENTENCE_BREAK = re.compile(r"(?<!\b[A-Z])[.!?]\s+(?=[A-Z0-9])")


class DeterministicRelocator:
    """Finds the English phrase by cognates and a small lexicon; no model.

    For each content word of the Spanish mention it lists the English words that
    may render it, then takes the shortest stretch of English words that holds a
    rendering of every content word (or all but ``max_missing``). Ties go to the
    stretch nearest the mention's relative position. It answers nothing rather
    than a doubtful phrase.
    """

    method = "deterministic"
    VERSION = "1"

    def __init__(self, config: DeterministicConfig = DeterministicConfig()) -> None:
        self.config = config
        lexicon = json.dumps(sorted((k, sorted(v)) for k, v in LEXICON.items()), ensure_ascii=False)
        digest = hashlib.sha1(f"{self.VERSION}|{config!r}|{lexicon}".encode("utf-8")).hexdigest()[:10]
        self.name = f"deterministic-{digest}"

    def relocate(self, tasks: Sequence[RelocationTask]) -> list[Relocation]:
        return [self.relocate_one(task) for task in tasks]

    def relocate_one(self, task: RelocationTask) -> Relocation:
        spanish = list(dict.fromkeys(word.lower() for word in content_words(task.mention)))
        if not task.candidate:
            return Relocation.not_found(task, self.method, "no English text")
        if not spanish:
            return Relocation.not_found(task, self.method, "mention has no content word")
        plain = {strip_accents(word) for word in spanish}
        optional = {i for i, word in enumerate(spanish)
                    if len(spanish) > 1 and strip_accents(word) in OPTIONAL_WORDS
                    and (not OPTIONAL_WORDS[strip_accents(word)] or OPTIONAL_WORDS[strip_accents(word)] & plain)}
        span = self.find_span(spanish, task.candidate, task.position, optional)
        if span is None:
            return Relocation.not_found(task, self.method, "no compact English match")
        located = accept_span(task.candidate[span[0]:span[1]], task.candidate, task.position)
        if located is None:  # cannot happen for a slice of the candidate; the rule is checked anyway
            return Relocation.not_found(task, self.method, "span is not a substring")
        return Relocation.accepted(task, span[0], span[1], self.method)

    def find_span(self, spanish: Sequence[str], candidate: str, position: float,
                  optional: frozenset[int] | set[int] = frozenset()) -> tuple[int, int] | None:
        """Character span of the best English stretch, or ``None``.

        ``optional`` indexes Spanish words that may stay unmatched (see ``OPTIONAL_WORDS``).
        """
        config = self.config
        tokens = words(candidate)
        scores: list[dict[int, float]] = [{} for _ in spanish]  # per Spanish word: token -> score
        for t, (_, _, english) in enumerate(tokens):
            if english.lower() in ENGLISH_STOPWORDS and not english.isdigit():
                continue
            for w, word in enumerate(spanish):
                score = word_match(word, english, config.match)
                if score > 0:
                    scores[w][t] = score
        n = len(spanish) - len(optional)
        required = n - config.max_missing if n >= config.partial_from else n
        if len(spanish) == 1:
            scores[0] = {t: s for t, s in scores[0].items() if s >= config.single_word_score}
        positions = sorted({t for per_word in scores for t in per_word})
        total = len(spanish)
        max_width = config.width_per_word * total + config.width_slack if total > 1 else 1
        max_unmatched = max(config.unmatched_slack, total - 1) if total > 1 else 0
        matched = {t for per_word in scores for t in per_word}
        best: tuple | None = None
        for i, first in enumerate(positions):
            for last in positions[i:]:
                if last - first + 1 > max_width:
                    break
                found = [max((s for t, s in per_word.items() if first <= t <= last), default=0.0)
                         for per_word in scores]
                covered = sum(1 for w, s in enumerate(found) if s > 0 and w not in optional)
                if covered < required:
                    continue
                covered += sum(1 for w in optional if found[w] > 0)
                first_kept, last_kept = _extend(first, last, matched, max(max_width, 3))
                unmatched = sum(1 for t in range(first_kept, last_kept + 1)
                                if t not in matched and _is_content(tokens[t][2]))
                if unmatched > max_unmatched:
                    continue
                start, end = _expand_compound(candidate, tokens[first_kept][0], tokens[last_kept][1])
                if _SENTENCE_BREAK.search(candidate, start, end):
                    continue
                middle = (start + end) / 2 / max(1, len(candidate))
                rank = (-covered, last - first, round(abs(middle - position), 3), -sum(found))
                if best is None or rank < best[0]:
                    best = (rank, start, end)
        return None if best is None else (best[1], best[2])


_NOT_CONTENT = frozenset("mm cm m kg g mg ml dl l h cc mmhg both all".split())


def _is_content(word: str) -> bool:
    low = word.lower()
    return not (low in ENGLISH_STOPWORDS or low in _NOT_CONTENT or low.isdigit())


def _extend(first: int, last: int, matched: set[int], max_width: int) -> tuple[int, int]:
    """Take in neighbouring words that also render a mention word, so a Spanish word
    translated by several English ones keeps them all ("ferropénica" -> "iron deficiency")."""
    while first - 1 in matched and last - first + 2 <= max_width:
        first -= 1
    while last + 1 in matched and last - first + 2 <= max_width:
        last += 1
    return first, last


_NEGATING_PREFIXES = frozenset({"non", "no", "un", "not"})


def _expand_compound(text: str, start: int, end: int) -> tuple[int, int]:
    """Grow a span to whole hyphenated or apostrophised words (``post-voiding``, ``Crohn's``).

    A negating prefix is never taken in: "dolorosa" is "painful", also inside
    "non-painful" (a Spanish "no" is a mention word of its own and is matched).
    """
    while start >= 2 and text[start - 1] in "-'’" and text[start - 2].isalnum():
        begin = start - 1
        while begin > 0 and text[begin - 1].isalnum():
            begin -= 1
        if text[begin:start - 1].lower() in _NEGATING_PREFIXES:
            break
        start = begin
    while end + 1 < len(text) and text[end] in "-'’" and text[end + 1].isalnum():
        end += 1
        while end < len(text) and text[end].isalnum():
            end += 1
    return start, end


# ---------------------------------------------------------------------------------------------
# The LLM relocator

RELOCATE_PROMPT = "relocate.txt"
RELOCATE_SCHEMA: Mapping[str, Any] = {
    "type": "object",
    "properties": {"english": {"type": ["string", "null"]}},
    "required": ["english"],
}


def load_prompt(name: str = RELOCATE_PROMPT) -> str:
    """A prompt template shipped in ``fhs/prompts``."""
    return resources.files("fhs").joinpath("prompts", name).read_text(encoding="utf-8")


def first_json_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text`` (braces inside JSON strings are skipped)."""
    start = text.find("{")
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for index in range(start, len(text)):
            char = text[index]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    return text[start:index + 1]
        start = text.find("{", start + 1)
    return None


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def parse_relocation_answer(text: str) -> tuple[str | None, str]:
    """The phrase a model answered and a note: ``(phrase, "")``, ``(None, "null answer")``
    or ``(None, "malformed: ...")``.

    Tolerant of reasoning blocks, code fences and text around the JSON object.
    """
    body = _THINK.sub("", text)
    fenced = _FENCE.search(body)
    if fenced:
        body = fenced.group(1)
    raw = first_json_object(body)
    if raw is None:
        return None, "malformed: no JSON object"
    try:
        answer = json.loads(raw)
    except json.JSONDecodeError as error:
        return None, f"malformed: {error.msg}"
    if not isinstance(answer, dict) or "english" not in answer:
        return None, "malformed: no 'english' field"
    phrase = answer["english"]
    if phrase is None or (isinstance(phrase, str) and phrase.strip().lower() in ("", "null", "none")):
        return None, "null answer"
    if not isinstance(phrase, str):
        return None, f"malformed: 'english' is {type(phrase).__name__}"
    return phrase, ""


class LLMRelocator:
    """Asks a model to copy the English phrase verbatim; keeps only exact substrings.

    One greedy request per mention (``max_tokens`` 96, JSON answer
    ``{"english": "<phrase or null>"}``), sent in batches of ``batch_size``.
    """

    method = "llm"

    def __init__(self, llm: LLM, *, template: str | None = None, max_tokens: int = 96,
                 batch_size: int = 64) -> None:
        self.llm = llm
        self.template = template if template is not None else load_prompt()
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        digest = hashlib.sha1(f"{self.template}|{max_tokens}".encode("utf-8")).hexdigest()[:10]
        model = re.sub(r"[^A-Za-z0-9._-]+", "_", getattr(llm, "name", "model"))
        self.name = f"llm-{model}-{digest}"

    def request(self, task: RelocationTask) -> Request:
        prompt = self.template.format(
            spanish_mention=task.mention,
            spanish_context=task.spanish_context,
            english_text=task.candidate,
        )
        return Request(
            messages=(Message("user", prompt),),
            temperature=0.0,
            max_tokens=self.max_tokens,
            schema=RELOCATE_SCHEMA,
            purpose="relocate",
        )

    def relocate(self, tasks: Sequence[RelocationTask]) -> list[Relocation]:
        results: list[Relocation] = []
        for begin in range(0, len(tasks), self.batch_size):
            batch = list(tasks[begin:begin + self.batch_size])
            responses = self.llm.complete([self.request(task) for task in batch])
            if len(responses) != len(batch):
                raise RuntimeError(f"{self.name}: {len(responses)} responses for {len(batch)} requests")
            for task, response in zip(batch, responses):
                results.append(self._judge(task, response.text))
        return results

    def _judge(self, task: RelocationTask, text: str) -> Relocation:
        if not task.candidate:
            return Relocation.not_found(task, self.method, "no English text")
        phrase, note = parse_relocation_answer(text)
        if phrase is None:
            return Relocation.not_found(task, self.method, note)
        span = accept_span(phrase, task.candidate, task.position)
        if span is None:
            return Relocation.not_found(task, self.method, "answer is not a substring of the candidate")
        return Relocation.accepted(task, span[0], span[1], self.method)


# ---------------------------------------------------------------------------------------------
# The cache: one JSONL file per (dataset split, relocator)

CACHE_ENV = "FHS_CACHE"


def cache_dir() -> Path:
    """``$FHS_CACHE`` if set, else ``~/.cache/fhs``."""
    return Path(os.environ.get(CACHE_ENV) or "~/.cache/fhs").expanduser()


def relocation_cache_path(dataset: str, relocator: Relocator) -> Path:
    """``<cache>/relocation/<dataset>--<relocator name>.jsonl``."""
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{dataset}--{relocator.name}")
    return cache_dir() / "relocation" / f"{stem}.jsonl"


def read_relocation_cache(path: Path) -> dict[str, dict[str, Any]]:
    """Cached records by task fingerprint; unreadable or invalid lines count as missing."""
    cached: dict[str, dict[str, Any]] = {}
    if not path.is_file():
        return cached
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            try:
                record = json.loads(line)
                Relocation(**record["relocation"])  # validates the record
                cached[record["key"]] = record
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                continue
    return cached


def write_relocation_cache(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Write the records atomically (a temporary file renamed over the old one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + f".{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    tmp.replace(path)


def relocate_cached(tasks: Sequence[RelocationTask], relocator: Relocator, path: Path | None,
                    *, chunk: int = 256) -> list[Relocation]:
    """Relocate ``tasks``, reusing and extending the cache at ``path`` (none when ``None``).

    A cached answer is reused only for a task with the same fingerprint (same
    mention, context and candidate). New results are written after every
    ``chunk`` tasks, so an interrupted LLM run resumes where it stopped.
    """
    if path is None:
        return relocator.relocate(tasks)
    records = read_relocation_cache(path)
    missing = list({task.fingerprint(): task for task in tasks
                    if task.fingerprint() not in records}.items())
    for begin in range(0, len(missing), chunk):
        part = missing[begin:begin + chunk]
        results = relocator.relocate([task for _, task in part])
        if len(results) != len(part):
            raise RuntimeError(f"{relocator.name}: {len(results)} relocations for {len(part)} tasks")
        for (key, task), relocation in zip(part, results):
            records[key] = {"key": key, "document_id": task.document_id, "mention": task.mention,
                            "relocation": relocation.to_dict()}
        write_relocation_cache(path, records.values())
    return [Relocation(**records[task.fingerprint()]["relocation"]) for task in tasks]
