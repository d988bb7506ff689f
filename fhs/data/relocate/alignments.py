"""Sentence alignments kept on disk, so each chapter does not realign CodiEsp's documents.

Every chapter that loads CodiEsp pairs the Spanish sentences of its 500 test
documents with their English lines by dynamic programming (``align.py``): seconds
of pure Python per chapter, the same answer every time. The answer depends only on
the two texts, the ``AlignConfig`` and the aligner's own code and lexicon, so a key
hashes all four: an edited document, setting or aligner computes afresh.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from functools import lru_cache
from importlib import resources
from pathlib import Path

from fhs.core.files import atomic_write
from fhs.data.relocate.align import AlignConfig, Alignment

# what align_document's answer depends on besides its arguments
_ALIGNER_FILES = ("align.py", "cognates.py", "sentences.py", "lexicon.py", "lexicon.txt")


@lru_cache(maxsize=1)
def aligner_digest() -> str:
    """The aligner's code and lexicon, hashed once per process."""
    digest = hashlib.sha256()
    folder = resources.files("fhs.data.relocate")
    for name in _ALIGNER_FILES:
        digest.update(name.encode() + b"\0" + folder.joinpath(name).read_bytes() + b"\0")
    return digest.hexdigest()


def alignment_key(spanish: str, english: str, config: AlignConfig) -> str:
    payload = json.dumps([aligner_digest(), asdict(config), spanish, english], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


class AlignmentStore:
    """Alignments by :func:`alignment_key` in one JSON file; ``None`` for a file-less, in-memory store.

    An unreadable file counts as empty (it is rewritten on ``save``); ``save`` writes
    atomically and only when something was added.
    """

    def __init__(self, path: str | Path | None) -> None:
        self.path = Path(path) if path is not None else None
        self._known: dict[str, dict | None] = {}
        self._added = False
        if self.path is not None and self.path.is_file():
            try:
                known = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                known = None
            if isinstance(known, dict):
                self._known = known

    def get(self, key: str) -> tuple[bool, Alignment | None]:
        """``(found, alignment)``: a document the rule could not align is found as ``None``."""
        if key not in self._known:
            return False, None
        entry = self._known[key]
        try:
            return True, None if entry is None else Alignment(
                entry["method"], tuple((tuple(s), tuple(e)) for s, e in entry["beads"])
            )
        except (KeyError, TypeError, ValueError):
            return False, None

    def put(self, key: str, alignment: Alignment | None) -> None:
        self._known[key] = (
            None
            if alignment is None
            else {"method": alignment.method, "beads": [list(map(list, b)) for b in alignment.beads]}
        )
        self._added = True

    def save(self) -> None:
        if self.path is None or not self._added:
            return
        with atomic_write(self.path) as handle:
            json.dump(self._known, handle, separators=(",", ":"))
        self._added = False
