"""Files: where caches live, and writes that a reader never sees half done.

``cache_dir`` is the one answer to "where does the project keep what it can
rebuild" (parsed filings, taxonomies, relocations, assembled models, model
answers); ``atomic_write`` is the one way a file is replaced.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

CACHE_ENV = "FHS_CACHE"
DEFAULT_CACHE_DIR = "~/.cache/fhs"


def cache_dir(*parts: str, root: str | os.PathLike | None = None) -> Path:
    """``root``, else ``$FHS_CACHE``, else ``~/.cache/fhs``; then ``parts`` below it.

    The folder is not created here; ``atomic_write`` creates it on first write.
    """
    base = root if root is not None else (os.environ.get(CACHE_ENV) or DEFAULT_CACHE_DIR)
    return Path(base).expanduser().joinpath(*parts)


@contextmanager
def atomic_write(path: str | os.PathLike, mode: str = "w", *, fsync: bool = False) -> Iterator[IO[Any]]:
    """Write ``path`` through a temporary file in its folder, renamed over it on success.

    Readers see the old file or the new one, never a half-written one; on an
    exception the temporary file is removed and ``path`` is untouched. Text
    modes write UTF-8. ``fsync`` also flushes the data to disk before the
    rename. The result is readable by others (0644), as a plain write would be.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with open(fd, mode, encoding=None if "b" in mode else "utf-8") as handle:
            yield handle
            if fsync:
                handle.flush()
                os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # mkstemp files are private; a cache may be shared
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """``text`` into ``path`` with :func:`atomic_write`; returns the path."""
    with atomic_write(path) as handle:
        handle.write(text)
    return Path(path)


def utf8_error(path: str | os.PathLike):
    """The InputError for a file that is not UTF-8: its first bad byte, by offset and line."""
    from fhs.core.errors import InputError

    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        return InputError(
            f"not UTF-8 text (byte offset {error.start}: {data[error.start : error.start + 1]!r})",
            path=path,
            line=line,
            fix="save the file as UTF-8",
        )
    return InputError("not UTF-8 text", path=path, fix="save the file as UTF-8")
