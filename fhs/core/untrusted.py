"""Bytes from someone else, read within limits: gzip content and text files.

A filing from the web, a colleague's table or a published archive may be a few
megabytes that expand to gigabytes, or text in an encoding we do not read. Every
gzip read in the project goes through :func:`gunzip_chunks` (or :func:`gunzip`), which
streams and stops at a limit, and a user's table through :func:`read_text`, so such a
file is refused with one line that names it and the limit, never expanded whole.
"""

from __future__ import annotations

import csv
import gzip
import io
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from fhs.core.errors import InputError
from fhs.core.files import utf8_error

MIB = 1 << 20
_CHUNK = MIB


@dataclass(frozen=True)
class ReadLimits:
    """How much one file from someone else may make us hold.

    ``filing_bytes``: an inline-XBRL filing once gunzipped (SEC filings run to tens of
    megabytes); ``records_bytes``: one archived run's ``records.jsonl`` once gunzipped;
    ``table_cells``: one table's grid once colspan and rowspan are expanded.
    """

    filing_bytes: int = 256 * MIB
    records_bytes: int = 1024 * MIB
    table_cells: int = 1_000_000


LIMITS = ReadLimits()


def size_text(n: int) -> str:
    """A byte count as a limit is quoted: ``256 MiB``, ``1 GiB``, or bytes when small."""
    for unit, size in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size:,} {unit}"
    return f"{n:,} bytes"


class TooLarge(ValueError):
    """Content past its limit; ``str`` is "more than <limit>", for the caller to name the file and what it holds."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        super().__init__(f"more than {size_text(limit)}")


def gunzip_chunks(source: BinaryIO, limit: int) -> Iterator[bytes]:
    """The content of the gzip stream ``source`` (every member), a chunk at a time, never past ``limit`` bytes.

    Raises :class:`TooLarge` at the limit, and ``ValueError`` for data that is not gzip, damaged or cut off.
    """
    seen = 0
    try:
        with gzip.GzipFile(fileobj=source) as stream:
            while chunk := stream.read(min(_CHUNK, limit + 1 - seen)):
                seen += len(chunk)
                if seen > limit:
                    raise TooLarge(limit)
                yield chunk
    except (OSError, EOFError, zlib.error) as error:
        raise ValueError(" ".join(str(error).split()) or type(error).__name__) from None


def gunzip(data: bytes, limit: int) -> bytes:
    """The content of gzip ``data``, as :func:`gunzip_chunks` reads it: whole, and at most ``limit`` bytes."""
    out = io.BytesIO()  # grown in place: a join of the chunks would hold the content twice
    for chunk in gunzip_chunks(io.BytesIO(data), limit):
        out.write(chunk)
    return out.getvalue()


_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


def read_text(path: str | Path) -> str:
    """A user's text file: UTF-8 (a BOM allowed), or UTF-16 when it starts with UTF-16's BOM (what
    spreadsheets write as "Unicode text"); anything else is one line naming the first byte that is not UTF-8."""
    path = Path(path)
    data = path.read_bytes()
    if data.startswith(_UTF16_BOMS):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError as error:
            raise InputError(
                f"starts with UTF-16's byte order mark but is not UTF-16 text (byte offset {error.start})",
                path=path,
                fix="save the file as UTF-8",
            ) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise utf8_error(path) from None


@contextmanager
def csv_cell_limit(chars: int) -> Iterator[None]:
    """The csv module's limit on one cell is one setting for the whole process: each reader sets its own
    for its rows and puts the old one back, so loading FinCL's long contexts never lifts the limit a
    user's concept file or table is read under."""
    before = csv.field_size_limit(chars)
    try:
        yield
    finally:
        csv.field_size_limit(before)
