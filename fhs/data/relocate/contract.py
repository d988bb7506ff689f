"""The relocation contract: a task in, a ``Relocation`` out, accepted only as an exact substring.

``AlignedDocument.task`` turns one annotated mention into a ``RelocationTask``
(the Spanish mention and sentence, and the English candidate text); any
``Relocator`` answers it with a ``Relocation``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from fhs.data.relocate.align import AlignConfig, Alignment, align_document
from fhs.data.relocate.alignments import AlignmentStore, alignment_key
from fhs.data.relocate.sentences import (
    Segment,
    english_lines,
    is_paragraph_line,
    normalize_whitespace,
    split_spanish_sentences,
)

STATUSES = ("exact", "exact-pieces", "fallback-sentence", "fallback-document", "failed")
METHODS = ("deterministic", "llm")
SCOPES = ("sentence", "document")


@dataclass(frozen=True)
class AlignedDocument:
    """A Spanish document, its English translation and the alignment between them."""

    document_id: str
    spanish: str
    segments: tuple[Segment, ...]
    lines: tuple[str, ...]
    alignment: Alignment | None

    @classmethod
    def build(
        cls,
        document_id: str,
        spanish: str,
        english: str,
        config: AlignConfig = AlignConfig(),
        alignments: AlignmentStore | None = None,
    ) -> AlignedDocument:
        """``alignments``: an ``AlignmentStore`` (``alignments.py``) to read the alignment from and add it to."""
        segments = tuple(split_spanish_sentences(spanish, paragraph_breaks=True))
        lines = tuple(english_lines(english))
        key = ""  # read only where there is a store
        if alignments is not None:
            key = alignment_key(spanish, english, config)
            found, alignment = alignments.get(key)
            if found:
                return cls(document_id, spanish, segments, lines, alignment)
        alignment = align_document(spanish, segments, lines, config)
        if alignments is not None:
            alignments.put(key, alignment)
        return cls(document_id, spanish, segments, lines, alignment)

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
            hits = [
                i
                for i, segment in enumerate(self.segments)
                if not segment.paragraph_break and segment.start < end and start < segment.end
            ]
            if not hits:
                before = [
                    i
                    for i, segment in enumerate(self.segments)
                    if not segment.paragraph_break and segment.start <= start
                ]
                hits = before[-1:] or [0]
            found.update(hits)
        return tuple(sorted(found))

    def task(self, mention: str, spans: Sequence[tuple[int, int]]) -> RelocationTask:
        """What a relocator needs for one mention: the Spanish context and the English candidate."""
        hit = self.sentences_for(spans)
        # A mention over several sentences takes every sentence from the first to the last.
        indices = tuple(i for i in range(hit[0], hit[-1] + 1) if not self.segments[i].paragraph_break)
        first, last = self.segments[indices[0]], self.segments[indices[-1]]
        spanish_context = normalize_whitespace(self.spanish[first.start : last.end])
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
        payload = json.dumps(
            [self.mention, self.spanish_context, self.candidate, self.scope, self.position], ensure_ascii=False
        )
        return hashlib.sha1(payload.encode("utf-8")).hexdigest()[:20]


@dataclass(frozen=True)
class Relocation:
    """The English counterpart of one Spanish mention.

    ``status``: ``exact`` when ``english`` was accepted as an exact substring of
    the candidate (``start``/``end`` index the candidate); ``exact-pieces`` when
    a discontinuous mention was found piece by piece and the pieces lie too far
    apart to quote as one stretch: each piece is an exact substring (``pieces``
    holds their spans), ``english`` joins them with " … " and is not one
    (``fhs.data.relocate.pieces``); otherwise
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
    pieces: tuple[tuple[int, int], ...] = ()  # spans of the pieces of a discontinuous mention, if found so

    def __post_init__(self) -> None:
        object.__setattr__(self, "pieces", tuple((int(a), int(b)) for a, b in self.pieces))
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {STATUSES}, got {self.status!r}")
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, got {self.method!r}")

    @property
    def exact(self) -> bool:
        """The answer is one exact substring of the candidate."""
        return self.status == "exact"

    @property
    def located(self) -> bool:
        """The answer is English text of the candidate: one exact substring, or exact pieces."""
        return self.status in ("exact", "exact-pieces")

    @classmethod
    def accepted(cls, task: RelocationTask, start: int, end: int, method: str, note: str = "") -> Relocation:
        return cls(task.candidate[start:end], start, end, "exact", method, task.scope, note)

    @classmethod
    def not_found(cls, task: RelocationTask, method: str, note: str) -> Relocation:
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
