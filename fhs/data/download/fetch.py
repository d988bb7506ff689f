"""``fhs data fetch``: download what the lock lists and the data folder lacks, verified, into place.

A file is missing when its place under the folder holds nothing; present files are left
alone (``fhs data check`` verifies them). Downloads go to ``.fhs-downloads/`` inside
the folder, so a move into place is one atomic rename on the same disk, and a killed run
leaves only parts there that the next run resumes. Each source's license is printed
before its first download.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from fhs.core.files import atomic_write
from fhs.data.datadir import ENV_VAR, default_data_dir
from fhs.data.download.lock import Lock, LockedFile, LockedSource
from fhs.data.download.transfer import FetchError, Wanted, download, mirrored
from fhs.data.download.unpack import extract

STAGING = ".fhs-downloads"
USER_AGENT = "fhs-data-fetch (the FHS companion; fhs data fetch)"


def target_dir(explicit: str | os.PathLike | None = None) -> tuple[Path, str]:
    """The data folder and why it is that one: ``explicit`` (``--to``/``--data``), ``$FHS_DATA``, or the default."""
    if explicit:
        return Path(explicit).expanduser(), "given on the command line"
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser(), f"${ENV_VAR}"
    return default_data_dir(), f"the default, ${ENV_VAR} is unset"


@dataclass
class FetchReport:
    present: int = 0
    fetched: int = 0
    bytes: int = 0
    seconds: float = 0.0


def missing(root: Path, source: LockedSource) -> list[LockedFile]:
    return [f for f in source.files if not (root / f.path).is_file()]


def _megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def _bar(total: int | None, desc: str, show: bool):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit="B", unit_scale=True, unit_divisor=1024, file=sys.stderr,
                disable=not show, leave=False)


def _place(part: Path, locked: LockedFile, root: Path) -> None:
    """A verified part into its place: renamed, or gzip-compressed (``.htm.gz``) through a temporary file."""
    target = root / locked.path
    if locked.gzip:
        with atomic_write(target, "wb") as handle, part.open("rb") as source:
            with gzip.GzipFile(filename=target.name[:-3], mode="wb", fileobj=handle, compresslevel=9,
                               mtime=0) as packed:
                shutil.copyfileobj(source, packed)
        part.unlink()
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)


def _fetch_files(client, source: LockedSource, files: list[LockedFile], root: Path, show: bool) -> int:
    staging = root / STAGING
    with _bar(sum(f.size for f in files), source.name, show) as bar:
        for locked in files:
            wanted = Wanted(locked.path, locked.url, locked.size, locked.sha256,
                            html=locked.path.endswith((".htm.gz", ".htm", ".html")),
                            elsewhere=locked.elsewhere or source.elsewhere)
            part = download(client, wanted, staging / (locked.path + ".part"), bar)
            _place(part, locked, root)
    return sum(f.size for f in files)


def _fetch_archive(client, source: LockedSource, files: list[LockedFile], root: Path, show: bool) -> int:
    archive = source.archive
    staging = root / STAGING
    whole = staging / archive.name
    label = f"{archive.folder}{archive.name}"
    received = 0
    if not whole.is_file():
        wanted = Wanted(label, archive.url, archive.size, archive.sha256, elsewhere=source.elsewhere)
        with _bar(archive.size, archive.name, show) as bar:
            part = download(client, wanted, staging / (archive.name + ".part"), bar)
            received = part.stat().st_size
        os.replace(part, whole)
    from tqdm import tqdm

    with tqdm(total=len(files), desc=f"{source.name}: unpacking", unit="file", file=sys.stderr,
              disable=not show, leave=False) as bar:
        extract(whole, archive, files, root, label=label, elsewhere=source.elsewhere, progress=bar)
    whole.unlink()
    return received


def _write_table(source: LockedSource, locked: LockedFile, root: Path) -> None:
    import hashlib

    data = source.table.render()
    if hashlib.sha256(data).hexdigest() != locked.sha256:
        raise FetchError("the lock's table does not give the locked bytes; the lock is damaged",
                         path=locked.path, fix="reinstall fhs or regenerate the lock with `fhs data lock`")
    with atomic_write(root / locked.path, "wb") as handle:
        handle.write(data)


def fetch(lock: Lock, root: Path, only: list[str] | None = None, *, say: Callable[[str], None] = print,
          progress: bool = True, client=None) -> FetchReport:
    """Download every locked file of the chosen sources that ``root`` lacks; see the module docstring."""
    import httpx

    started = time.perf_counter()
    report = FetchReport()
    own_client = client is None
    if own_client:
        client = httpx.Client(follow_redirects=True, timeout=httpx.Timeout(60.0, connect=20.0),
                              headers={"User-Agent": USER_AGENT})
    try:
        for source in lock.select(only):
            lacking = missing(root, source)
            report.present += len(source.files) - len(lacking)
            if not lacking:
                continue
            say(f"{source.name}: {len(lacking):,} of {len(source.files):,} files to fetch "
                f"({_megabytes(sum(f.size for f in lacking))}) from {source.title}")
            say(f"  license: {source.license}")
            urls = [source.archive.url] if source.archive else [f.url for f in lacking if f.url]
            more = f" and {len(urls) - 1:,} more URL{'s' if len(urls) > 2 else ''} of the lock" if len(urls) > 1 else ""
            say(f"  from: {mirrored(urls[0])}{more}" if urls else "  from: the lock itself (its table)")
            root.mkdir(parents=True, exist_ok=True)
            downloaded = [f for f in lacking if f.url]
            members = [f for f in lacking if not f.url and not f.table]
            tables = [f for f in lacking if f.table]  # last: the manifest appears once its filings are there
            if downloaded:
                report.bytes += _fetch_files(client, source, downloaded, root, progress)
            if members:
                report.bytes += _fetch_archive(client, source, members, root, progress)
            for locked in tables:
                _write_table(source, locked, root)
            report.fetched += len(lacking)
    finally:
        if own_client:
            client.close()
    staging = root / STAGING
    if staging.is_dir() and not any(p.is_file() for p in staging.rglob("*")):
        shutil.rmtree(staging, ignore_errors=True)
    report.seconds = time.perf_counter() - started
    return report
