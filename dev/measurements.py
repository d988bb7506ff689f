"""``python -m dev.measurements``: :mod:`fhs.book.measurements` on this checkout's ``book/``, from any folder.

The developers' tools that write records (``dev.cold_book``, ``dev.suite_time``) take the folder from here.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from fhs.book import measurements as book
from fhs.book.measurements import RecordError, checks_text, record_name, render, write_record

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / book.RECORDS
PAGE = ROOT / book.PAGE

__all__ = ["PAGE", "RECORDS", "RecordError", "checks_text", "load_records", "main", "record_name", "render",
           "write_record"]


def load_records(folder: Path = RECORDS) -> list[dict]:
    """This checkout's records (:func:`fhs.book.measurements.load_records`)."""
    return book.load_records(folder)


def main(argv: Sequence[str] | None = None) -> int:
    """The book's command with this checkout's folders as defaults (a flag given still wins)."""
    return book.main(["--records", str(RECORDS), "--page", str(PAGE), *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
