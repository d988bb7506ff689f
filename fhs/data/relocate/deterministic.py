"""The deterministic relocator: cognates and a small lexicon, no model."""

from __future__ import annotations

import hashlib
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fhs.data.relocate import cognates, lexicon
from fhs.data.relocate.cognates import MatchConfig, content_words, english_table, table_match, word_match, words
from fhs.data.relocate.contract import Relocation, RelocationTask, accept_span
from fhs.data.relocate.lexicon import ENGLISH_STOPWORDS, OPTIONAL_WORDS
from fhs.data.relocate.sentences import strip_accents
from fhs.data.relocate.user_lexicon import lexicon_digest, read_lexicon_file


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

    def __init__(
        self,
        config: DeterministicConfig = DeterministicConfig(),
        extra_lexicon: Mapping[str, Iterable[str]] | str | Path | None = None,
    ) -> None:
        """``extra_lexicon``: more Spanish -> English words (a mapping, or a lexicon file read with
        ``fhs.data.relocate.user_lexicon.read_lexicon_file``), used beside the bundled lexicon."""
        self.config = config
        if isinstance(extra_lexicon, (str, Path)):
            extra_lexicon = read_lexicon_file(extra_lexicon)
        self.extra = english_table(extra_lexicon or {})
        # The cache name changes with the configuration and with the code and lexicon
        # (their source text), so an edited rule never reads stale cached answers.
        digest = hashlib.sha1(repr(config).encode("utf-8"))
        for module in (cognates, lexicon, sys.modules[__name__]):
            assert module.__file__ is not None  # modules of this package, read from their files
            digest.update(Path(module.__file__).read_bytes())
        self.name = f"deterministic-{digest.hexdigest()[:10]}"
        if extra_lexicon:
            self.name += f"-lex-{lexicon_digest(extra_lexicon)}"

    def match(self, spanish: str, english: str) -> float:
        """How surely ``english`` renders ``spanish``: the bundled rules, or 1.0 from the extra lexicon."""
        score = word_match(spanish, english, self.config.match)
        if score < 1.0 and self.extra and table_match(self.extra, spanish, english):
            return 1.0
        return score

    def relocate(self, tasks: Sequence[RelocationTask]) -> list[Relocation]:
        return [self.relocate_one(task) for task in tasks]

    def relocate_one(self, task: RelocationTask) -> Relocation:
        spanish = list(dict.fromkeys(word.lower() for word in content_words(task.mention)))
        if not task.candidate:
            return Relocation.not_found(task, self.method, "no English text")
        if not spanish:
            return Relocation.not_found(task, self.method, "mention has no content word")
        span = self.find_span(spanish, task.candidate, task.position, optional_words(spanish))
        if span is None:
            return Relocation.not_found(task, self.method, "no compact English match")
        located = accept_span(task.candidate[span[0] : span[1]], task.candidate, task.position)
        if located is None:  # cannot happen for a slice of the candidate; the rule is checked anyway
            return Relocation.not_found(task, self.method, "span is not a substring")
        return Relocation.accepted(task, span[0], span[1], self.method)

    def find_span(
        self, spanish: Sequence[str], candidate: str, position: float, optional: frozenset[int] | set[int] = frozenset()
    ) -> tuple[int, int] | None:
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
                score = self.match(word, english)
                if score > 0:
                    scores[w][t] = score
        n = len(spanish) - len(optional)
        required = n - config.max_missing if n >= config.partial_from else n
        if len(spanish) == 1:
            scores[0] = {t: s for t, s in scores[0].items() if s >= config.single_word_score}
        matched = {t for per_word in scores for t in per_word}
        positions = sorted(matched)
        total = len(spanish)
        max_width = config.width_per_word * total + config.width_slack if total > 1 else 1
        max_unmatched = max(config.unmatched_slack, total - 1) if total > 1 else 0
        best: tuple | None = None
        for i, first in enumerate(positions):
            for last in positions[i:]:
                if last - first + 1 > max_width:
                    break
                found = [
                    max((s for t, s in per_word.items() if first <= t <= last), default=0.0) for per_word in scores
                ]
                covered = sum(1 for w, s in enumerate(found) if s > 0 and w not in optional)
                if covered < required:
                    continue
                covered += sum(1 for w in optional if found[w] > 0)
                first_kept, last_kept = _extend(first, last, matched, max(max_width, 3))
                unmatched = sum(
                    1 for t in range(first_kept, last_kept + 1) if t not in matched and _is_content(tokens[t][2])
                )
                if unmatched > max_unmatched:
                    continue
                start, end = _expand_compound(candidate, tokens[first_kept][0], tokens[last_kept][1])
                if _SENTENCE_BREAK.search(candidate, start, end):
                    continue
                middle = (start + end) / 2 / max(1, len(candidate))
                # most mention words, then fewest English words, then nearest the prior position
                rank = (-covered, last - first, round(abs(middle - position), 3), -sum(found))
                if best is None or rank < best[0]:
                    best = (rank, start, end)
        return None if best is None else (best[1], best[2])


_NOT_CONTENT = frozenset("mm cm m kg g mg ml dl l h cc mmhg both all".split())


def _is_content(word: str) -> bool:
    low = word.lower()
    return not (low in ENGLISH_STOPWORDS or low in _NOT_CONTENT or low.isdigit())


def optional_words(spanish: Sequence[str]) -> set[int]:
    """Indices of mention words that may stay unmatched (``OPTIONAL_WORDS``): only in a
    mention of several words, and only beside their companion words when they have any."""
    if len(spanish) < 2:
        return set()
    plain = {strip_accents(word) for word in spanish}
    optional = set()
    for index, word in enumerate(spanish):
        companions = OPTIONAL_WORDS.get(strip_accents(word))
        if companions is not None and (not companions or companions & plain):
            optional.add(index)
    return optional


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
        if text[begin : start - 1].lower() in _NEGATING_PREFIXES:
            break
        start = begin
    while end + 1 < len(text) and text[end] in "-'’" and text[end + 1].isalnum():
        end += 1
        while end < len(text) and text[end].isalnum():
            end += 1
    return start, end
