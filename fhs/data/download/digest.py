"""Size and SHA-256 of a file as its publisher serves it (a ``.gz`` copy is hashed uncompressed)."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from fhs.core.untrusted import TooLarge, gunzip_chunks

CHUNK = 1 << 20


def digest(path: str | Path, *, gunzip: bool = False, limit: int | None = None) -> tuple[int, str]:
    """``(size, sha256)`` of the file's bytes, or of its uncompressed content when ``gunzip``.

    Reading stops past ``limit`` bytes (:class:`~fhs.core.untrusted.TooLarge`): a lock pins each
    size, so a gzip bomb in the data folder is found different without being expanded.
    Raises ``OSError`` for a file that cannot be read, a ``.gz`` that is not gzip included.
    """
    limit = sys.maxsize if limit is None else limit
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        for chunk in _gunzipped(handle, limit) if gunzip else iter(lambda: handle.read(CHUNK), b""):
            sha.update(chunk)
            size += len(chunk)
            if size > limit:
                raise TooLarge(limit)
    return size, sha.hexdigest()


def _gunzipped(handle: BinaryIO, limit: int) -> Iterator[bytes]:
    try:
        yield from gunzip_chunks(handle, limit)
    except TooLarge:
        raise
    except ValueError as error:
        raise OSError(f"not a readable gzip file ({error})") from None
