"""Size and SHA-256 of a file as its publisher serves it (a ``.gz`` copy is hashed uncompressed)."""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

CHUNK = 1 << 20


def digest(path: str | Path, *, gunzip: bool = False) -> tuple[int, str]:
    """``(size, sha256)`` of the file's bytes, or of its uncompressed content when ``gunzip``.

    Raises ``OSError`` (``gzip.BadGzipFile`` included) for a file that cannot be read.
    """
    sha = hashlib.sha256()
    size = 0
    opener = gzip.open if gunzip else open
    with opener(path, "rb") as handle:
        while chunk := handle.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()
