"""A user's own words for the deterministic relocator, read from a plain text file.

The bundled lexicon (``fhs.data.relocate.lexicon``) was written from diagnosis
mentions; another kind of mention (procedures: *ecografía*, *TAC*, *RM*) needs
words of its own. A lexicon file has the bundled lexicon's format, one entry
per line::

    # comment
    ecografia: ultrasound ultrasonography sonography
    tac: ct scan tomography

The Spanish key is matched like a bundled key (accents and case ignored, plural
and feminine forms tried); the English words are the single words a
translation may use. The file's content is part of the relocator's name, so
its cached relocations are never mixed with another lexicon's.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path

from fhs.core.errors import InputError
from fhs.core.files import utf8_error


def read_lexicon_file(path: str | Path) -> dict[str, frozenset[str]]:
    """Entries of a lexicon file; a malformed line stops with its file and line number."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such lexicon file", path=path, fix="one 'spanish: english english ...' entry per line")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise utf8_error(path) from None
    entries: dict[str, set[str]] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        spanish, colon, english = line.partition(":")
        spanish = spanish.strip().lower()
        if not colon or not spanish or len(spanish.split()) != 1 or not english.split():
            raise InputError(
                f"expected 'spanish: english english ...', got {raw.strip()!r}",
                path=path,
                line=number,
                fix="one Spanish word, a colon, then the English words",
            )
        entries.setdefault(spanish, set()).update(word.lower() for word in english.split())
    return {key: frozenset(values) for key, values in entries.items()}


def lexicon_digest(entries: Mapping[str, Iterable[str]]) -> str:
    """A short hash of the entries' content (order and comments do not matter)."""
    canonical = "\n".join(f"{key}:{' '.join(sorted(values))}" for key, values in sorted(entries.items()))
    return hashlib.sha1(canonical.encode("utf-8")).hexdigest()[:10]
