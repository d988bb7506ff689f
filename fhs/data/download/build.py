"""``fhs data lock``: the lock written from a complete data folder and the publishers' table.

Run once by a maintainer on a folder known to be right (``../shared/data``); the result is
committed. Nothing here touches the network: the pins come from ``publishers.py`` and the
filings' ``MANIFEST.tsv``, the sizes and checksums from the files themselves, and the
filings' checksums are checked against the manifest's own ``sha256`` column.
"""

from __future__ import annotations

from pathlib import Path

from fhs.core.errors import InputError
from fhs.data.datadir import SOURCES
from fhs.data.download.digest import digest
from fhs.data.download.lock import Archive, Lock, LockedFile, LockedSource, Table
from fhs.data.download.publishers import (
    CODIESP,
    CODIESP_ARCHIVE,
    CODIESP_SPLITS,
    FINTAGGING,
    IXBRL,
    SOURCE_COLUMNS,
    XBRL_TERMINOLOGY,
    Publisher,
    edgar_page,
    raw_url,
)

ABOUT = (
    "Every file the fhs loaders read: its place under $FHS_DATA, where its publisher serves it, its size "
    "and SHA-256. Written by `fhs data lock --from DIR`; read by `fhs data fetch` and `fhs data check`."
)


def _file(root: Path, path: str, *, gunzip: bool = False, **where) -> LockedFile:
    local = root / path
    if not local.is_file():
        raise InputError(
            "missing from the folder the lock is written from",
            path=local,
            fix="write the lock from a complete data folder",
        )
    size, sha = digest(local, gunzip=gunzip)
    return LockedFile(path=path, size=size, sha256=sha, gzip=gunzip, **where)


def _source(publisher: Publisher, files, **extra) -> LockedSource:
    origin = SOURCES[publisher.name]
    return LockedSource(
        name=publisher.name,
        title=origin.origin,
        license=origin.license,
        homepage=publisher.homepage,
        elsewhere=publisher.elsewhere,
        files=tuple(files),
        notes=publisher.notes,
        **extra,
    )


def _repository_source(root: Path, publisher: Publisher) -> LockedSource:
    return _source(
        publisher,
        [_file(root, f.path, url=raw_url(f.repo, f.commit, f.repo_path), commit=f.commit) for f in publisher.files],
    )


def read_table(path: Path) -> Table:
    """A tab-separated file as a Table that renders back to the same bytes (or an error)."""
    data = path.read_bytes()
    lines = data.decode("utf-8").split("\n")
    if lines[-1] != "":
        raise InputError("does not end in a newline", path=path)
    header, *rows = (tuple(line.split("\t")) for line in lines[:-1])
    table = Table(header, tuple(rows))
    if table.render() != data:
        raise InputError("cannot be rebuilt byte for byte from its rows (\\r or ragged rows?)", path=path)
    return table


def _ixbrl_source(root: Path) -> LockedSource:
    manifest_path = root / "ixbrl" / "MANIFEST.tsv"
    if not manifest_path.is_file():
        raise InputError("no manifest", path=manifest_path, fix="write the lock from a complete data folder")
    table = read_table(manifest_path)
    missing = [c for c in (*SOURCE_COLUMNS, "sha256", "bytes") if c not in table.columns]
    if missing:
        raise InputError("missing column", path=manifest_path, line=1, field=missing[0])
    files = []
    for line, values in enumerate(table.rows, start=2):
        row = dict(zip(table.columns, values))
        locked = _file(
            root,
            f"ixbrl/{row['file']}.gz",
            gunzip=True,
            url=raw_url(row["source_repo"], row["commit"], row["source_path"]),
            commit=row["commit"],
            elsewhere=edgar_page(row["cik"], row["form"]),
        )
        if (locked.sha256, str(locked.size)) != (row["sha256"], row["bytes"]):
            raise InputError(
                f"{row['file']}.gz holds {locked.size} bytes with sha256 {locked.sha256}, the manifest "
                f"says {row['bytes']} and {row['sha256']}",
                path=manifest_path,
                line=line,
            )
        files.append(locked)
    size, sha = digest(manifest_path)
    files.append(LockedFile(path="ixbrl/MANIFEST.tsv", size=size, sha256=sha, table=True))
    return _source(IXBRL, files, table=table)


def _codiesp_source(root: Path) -> LockedSource:
    archive = Archive(**CODIESP_ARCHIVE)
    folder = root / archive.folder
    paths = sorted(
        p.relative_to(root).as_posix() for split in CODIESP_SPLITS for p in (folder / split).rglob("*") if p.is_file()
    )
    if not paths:
        raise InputError("no CodiEsp files", path=folder, fix="write the lock from a complete data folder")
    return _source(CODIESP, [_file(root, path) for path in paths], archive=archive)


def build_lock(root: str | Path) -> Lock:
    """The lock of the data folder ``root`` (which must hold every source complete)."""
    root = Path(root)
    return Lock(
        (
            _repository_source(root, FINTAGGING),
            _repository_source(root, XBRL_TERMINOLOGY),
            _ixbrl_source(root),
            _codiesp_source(root),
        )
    )
