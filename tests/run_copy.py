"""A finished run's folders copied for one test: a test may write beside the copy, and no test sees another's writes.

SQLite files (the response cache, the verdict ledger) are copied with SQLite's backup, which takes what the
write-ahead log still holds while the run's process keeps them open; the copy is at rest, as a finished run leaves
them, with no log beside it. Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

LOG_FILES = ("*.sqlite-wal", "*.sqlite-shm", "*.sqlite-journal")  # taken into the copy by the backup


def copy_file(source: str, copy: str) -> None:
    """``shutil.copytree``'s copy function: an SQLite file through the backup, any other file as it is."""
    if not source.endswith(".sqlite"):
        shutil.copy2(source, copy)
        return
    with closing(sqlite3.connect(source)) as read, closing(sqlite3.connect(copy)) as to:
        read.backup(to)


def copy_folder(source: Path, to: Path) -> Path:
    """``source`` and everything under it copied to ``to`` (which must not exist yet); ``to``."""
    shutil.copytree(source, to, copy_function=copy_file, ignore=shutil.ignore_patterns(*LOG_FILES))
    return to
