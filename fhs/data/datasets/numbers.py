"""Numbers as a reader sees them: "$ (1,234.5)", "12.5 %", "—".

FinTagging writes a value as a bare unsigned number (``1513.1``) while the
page shows ``$ (1,513.1)``; inline XBRL shows ``1,513.1`` and stores sign and
scale in attributes. Matching a value to the page therefore compares
normalised magnitudes, and words ("two", "none") case-insensitively.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

# Characters that take no room on the page (zero-width spaces, soft hyphen): dropped before reading.
INVISIBLE = {ord(c): None for c in "\u200b\u200c\u200d\u2060\ufeff\u00ad"}
_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2015\u2212"
_ONLY_DASH = re.compile(rf"[(\[]?(?:US\$|[$€£¥])?[{_DASHES}]+%?[)\]]?")
_NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+|\d+\.")


def parse_number(text: str) -> Decimal | None:
    """The number a cell or mention displays, or ``None``.

    ``"$ (1,234.5)"`` -> -1234.5, ``"12.5 %"`` -> 12.5, ``"—"`` -> 0 (a dash
    shows a nil amount), ``"(25"`` -> -25 (the ``)`` often sits in the next cell).
    """
    compact = "".join(text.translate(INVISIBLE).split())
    if not compact:
        return None
    if _ONLY_DASH.fullmatch(compact):
        return Decimal(0)
    negative = "(" in compact
    core = re.sub(r"US\$|[$€£¥%()\[\]]", "", compact)
    if core and core[0] in _DASHES:
        negative = True
        core = core[1:]
    if not _NUMBER.fullmatch(core):
        return None
    try:
        number = Decimal(core.replace(",", ""))
    except InvalidOperation:  # pragma: no cover - the regex admits only digits
        return None
    return -number if negative else number


def values_match(displayed: str, value: str) -> bool:
    """Does a displayed cell/mention show ``value``? Numbers compare by magnitude, words by text.

    FinTagging writes values unsigned and without separators (``1513.1`` for
    ``(1,513.1)``), so the sign is ignored.
    """
    wanted = parse_number(value)
    if wanted is not None:
        shown = parse_number(displayed)
        return shown is not None and abs(shown) == abs(wanted)
    return _words(displayed) == _words(value) and bool(_words(value))


def _words(text: str) -> str:
    return " ".join(text.translate(INVISIBLE).split()).casefold()


_NUMBER_IN_TEXT = re.compile(r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?")


def mention_offsets(text: str, value: str) -> list[int]:
    """Where ``value`` is mentioned in ``text``: numbers by magnitude, words case-insensitively."""
    if parse_number(value) is not None:
        return [m.start() for m in _NUMBER_IN_TEXT.finditer(text) if values_match(m.group(), value)]
    words = " ".join(value.split())
    if not words:
        return []
    pattern = re.compile(r"(?<!\w)" + re.escape(words).replace(r"\ ", r"\s+") + r"(?!\w)", re.IGNORECASE)
    return [m.start() for m in pattern.finditer(text)]
