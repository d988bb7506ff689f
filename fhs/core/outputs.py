"""One guard for every ``--out``: a command never writes over what it reads.

Each command names what it reads: files (its tables, facts, taxonomy, a run's records)
and folders whose contents are inputs (the data directory). ``check_out`` compares
them with ``--out`` as the file system does, so a symbolic link, a hard link or a
``../`` spelling of an input is caught as surely as the input's own name.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from fhs.core.errors import InputError

Named = tuple[str | os.PathLike, str]  # a path and what it is, as the error calls it


def check_out(
    out: str | os.PathLike,
    *,
    files: Iterable[Named] = (),
    folders: Iterable[Named] = (),
    field: str = "out",
    reads: str = "this command reads",
) -> Path:
    """``out``, or an InputError when it is one of ``files``, lies inside one of ``folders``, or is a
    dangling symbolic link (or lies under one), which a write would follow to wherever it points."""
    path = Path(out).expanduser()
    for part in (path, *path.parents):
        if part.is_symlink() and not part.exists():
            raise InputError(
                f"is a symbolic link to {os.readlink(part)}, which does not exist",
                path=part,
                field=field,
                fix="create the link's target, remove the link, or pass another --out",
            )
    for given, what in files:
        if same_file(path, Path(given).expanduser()):
            raise InputError(
                f"is the {what}, which {reads}: writing there would destroy it",
                path=out,
                field=field,
                fix=f"pass a new file for --{field}",
            )
    where = path.resolve()
    for given, what in folders:
        root = Path(given).expanduser()
        if not root.is_dir():
            continue
        root = root.resolve()
        if where == root or root in where.parents:
            raise InputError(
                f"is inside {what} {root}, which {reads}",
                path=out,
                field=field,
                fix=f"write --{field} outside that folder",
            )
    return path


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` are one file: the same inode when both exist, else the same resolved path."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.resolve() == b.resolve()
