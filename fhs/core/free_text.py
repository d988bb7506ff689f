"""Free text from someone else's file (a spec's name or description): one short line, and
shown in Markdown as the words it is, never as markup.

A description lands in a book page (``fhs.book.adapter_book``, chapter 1's notes): a
MyST role, a directive or an HTML tag in it would be obeyed, so every ASCII punctuation
mark is escaped there (CommonMark lets a backslash escape each of them).
"""

from __future__ import annotations

import string
import unicodedata

NAME_LIMIT = 64  # a name becomes a folder and a file name (runs/<profile>/<name>/..., results)
DESCRIPTION_LIMIT = 1000  # a table cell's worth: scripts/pcs_spec.py lists a taxonomy's sections in it
_ESCAPED = frozenset(string.punctuation)


def line_problem(text: str, limit: int) -> str | None:
    """Why ``text`` is not one line of at most ``limit`` printable characters, or None."""
    if len(text) > limit:
        return f"is {len(text):,} characters long, more than {limit}"
    bad = next((ch for ch in text if unicodedata.category(ch)[0] == "C"), None)
    if bad is not None:
        return f"holds a control character ({bad!r}): it must be one line of text"
    return None


def markdown_literal(text: str) -> str:
    """``text`` as Markdown that shows exactly these characters: punctuation escaped, control characters
    (a newline would end a table row) shown as spaces."""
    return "".join("\\" + ch if ch in _ESCAPED else " " if unicodedata.category(ch)[0] == "C" else ch for ch in text)
