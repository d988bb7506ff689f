"""Discontinuous mentions (offsets ``a b;c d``): relocated whole first, then piece by piece.

An annotator may mark a mention in pieces (*resección* … *vejiga*). The
relocator first gets the whole mention as one task, as for any other mention;
that works when the translation brings the pieces together ("bladder
resection"). When it finds nothing, every piece becomes a task of its own over
the same English candidate (so their spans are comparable), and the mention is
located only if every piece is found:

* the covering stretch (first piece start to last piece end) is the answer when
  it holds no sentence break and at most ``max_cover_words`` words - status
  ``exact``, an exact substring like any other;
* otherwise the pieces themselves are: status ``exact-pieces``, each piece an
  exact substring, the value their join with " … ".

Either way ``Relocation.pieces`` keeps every piece's span. Both tries go
through ``relocate_cached`` and its cache file (a piece's task has its own
fingerprint).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from fhs.data.relocate.cache import relocate_cached
from fhs.data.relocate.contract import Relocation, RelocationTask, Relocator
from fhs.data.relocate.sentences import normalize_whitespace

PIECE_JOIN = " … "
MAX_COVER_WORDS = 6
_SENTENCE_BREAK = re.compile(r"[.!?]\s+(?=[A-Z0-9])")


@dataclass(frozen=True)
class Mention:
    """What the piecewise try needs of one mention: its task, its Spanish spans and text."""

    task: RelocationTask
    spans: tuple[tuple[int, int], ...]
    spanish: str  # the whole Spanish document the spans index


def piece_tasks(mention: Mention) -> list[RelocationTask]:
    """One task per Spanish piece over the mention's English candidate.

    Each piece's position prior is the mention's, shifted by where the piece
    sits inside the mention (a weak prior: the translation may reorder them).
    """
    task, spans = mention.task, mention.spans
    low, high = min(s for s, _ in spans), max(e for _, e in spans)
    tasks = []
    for start, end in spans:
        shift = ((start + end) / 2 - (low + high) / 2) / max(1, len(task.spanish_context))
        position = min(1.0, max(0.0, task.position + shift))
        tasks.append(
            replace(task, mention=normalize_whitespace(mention.spanish[start:end]), position=round(position, 4))
        )
    return tasks


def combine_pieces(
    task: RelocationTask, found: Sequence[Relocation], max_cover_words: int = MAX_COVER_WORDS
) -> Relocation:
    """One relocation from every piece's: the covering stretch, or the pieces themselves."""
    stretches: list[tuple[int, int]] = []
    for piece in found:
        if piece.start is None or piece.end is None:
            raise ValueError(f"a piece found as {piece.status}, not as one stretch of the candidate")
        stretches.append((piece.start, piece.end))
    spans = tuple(sorted(stretches))
    low, high = spans[0][0], max(end for _, end in spans)
    cover = task.candidate[low:high]
    method = found[0].method
    if len(cover.split()) <= max_cover_words and not _SENTENCE_BREAK.search(cover):
        return Relocation(
            cover, low, high, "exact", method, task.scope, note=f"covering stretch of {len(spans)} pieces", pieces=spans
        )
    joined = PIECE_JOIN.join(task.candidate[start:end] for start, end in spans)
    return Relocation(
        joined,
        None,
        None,
        "exact-pieces",
        method,
        task.scope,
        note=f"{len(spans)} pieces, not one stretch",
        pieces=spans,
    )


def relocate_mentions(
    mentions: Sequence[Mention],
    relocator: Relocator,
    cache_path: Path | None,
    *,
    pieces: bool = True,
    max_cover_words: int = MAX_COVER_WORDS,
) -> list[Relocation]:
    """Relocate every mention whole; with ``pieces``, retry discontinuous misses piece by piece."""
    joint = relocate_cached([m.task for m in mentions], relocator, cache_path)
    if not pieces:
        return joint
    retry = [i for i, (m, r) in enumerate(zip(mentions, joint)) if len(m.spans) > 1 and not r.exact]
    per_mention = {i: piece_tasks(mentions[i]) for i in retry}
    answers = relocate_cached([t for i in retry for t in per_mention[i]], relocator, cache_path)
    out, cursor = list(joint), 0
    for i in retry:
        found = answers[cursor : cursor + len(per_mention[i])]
        cursor += len(per_mention[i])
        if all(r.exact for r in found):
            out[i] = combine_pieces(mentions[i].task, found, max_cover_words)
    return out
