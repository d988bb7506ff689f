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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fhs.core.errors import InputError
from fhs.core.files import atomic_write
from fhs.data.datadir import ENV_VAR, default_data_dir
from fhs.data.download.lock import Lock, LockedFile, LockedSource
from fhs.data.download.lock_values import STAGING
from fhs.data.download.pace import FetchLimits, Pace
from fhs.data.download.transfer import FetchError, Wanted, download, mirror_base, mirrored
from fhs.data.download.unpack import extract

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

    return tqdm(
        total=total,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        file=sys.stderr,
        disable=not show,
        leave=False,
    )


def _place(part: Path, locked: LockedFile, root: Path) -> None:
    """A verified part into its place: renamed, or gzip-compressed (``.htm.gz``) through a temporary file."""
    target = root / locked.path
    if locked.gzip:
        with atomic_write(target, "wb") as handle, part.open("rb") as source:
            with gzip.GzipFile(
                filename=target.name[:-3], mode="wb", fileobj=handle, compresslevel=9, mtime=0
            ) as packed:
                shutil.copyfileobj(source, packed)
        part.unlink()
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)


def _fetch_files(client, source: LockedSource, files: list[LockedFile], root: Path, show: bool, pace: Pace) -> int:
    staging = root / STAGING
    with _bar(sum(f.size for f in files), source.name, show) as bar:
        for locked in files:
            assert locked.url is not None  # _fetch_source sends only the files with a URL here
            wanted = Wanted(
                locked.path,
                locked.url,
                locked.size,
                locked.sha256,
                html=locked.path.endswith((".htm.gz", ".htm", ".html")),
                elsewhere=locked.elsewhere or source.elsewhere,
            )
            part = download(client, wanted, staging / (locked.path + ".part"), bar, pace)
            _place(part, locked, root)
    return sum(f.size for f in files)


def _fetch_archive(client, source: LockedSource, files: list[LockedFile], root: Path, show: bool, pace: Pace) -> int:
    archive = source.archive
    assert archive is not None  # the lock gives a file neither URL nor table only where its source has an archive
    staging = root / STAGING
    whole = staging / archive.name
    label = f"{STAGING}/{archive.name}"
    received = 0
    if not whole.is_file():
        wanted = Wanted(label, archive.url, archive.size, archive.sha256, elsewhere=source.elsewhere)
        with _bar(archive.size, archive.name, show) as bar:
            part = download(client, wanted, staging / (archive.name + ".part"), bar, pace)
            received = part.stat().st_size
        os.replace(part, whole)
    from tqdm import tqdm

    with tqdm(
        total=len(files), desc=f"{source.name}: unpacking", unit="file", file=sys.stderr, disable=not show, leave=False
    ) as bar:
        extract(whole, archive, files, root, label=label, elsewhere=source.elsewhere, progress=bar)
    whole.unlink()
    return received


def _write_table(source: LockedSource, locked: LockedFile, root: Path) -> None:
    import hashlib

    assert source.table is not None  # the lock refuses a table file in a source without a table
    data = source.table.render()
    if hashlib.sha256(data).hexdigest() != locked.sha256:
        raise FetchError(
            "the lock's table does not give the locked bytes; the lock is damaged",
            path=locked.path,
            fix="reinstall fhs or regenerate the lock with `fhs data lock`",
        )
    with atomic_write(root / locked.path, "wb") as handle:
        handle.write(data)


def _make_folder(root: Path) -> None:
    """The data folder, made if it is not there; a file or an unwritable place in its way is named."""
    if root.exists() and not root.is_dir():
        raise InputError(
            "is a file, not a folder; the data folder must be a folder",
            path=root,
            fix=f"point --to or ${ENV_VAR} at a folder (it is made if it does not exist)",
        )
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(
            f"cannot make the data folder: {error.strerror or error}",
            path=root,
            fix=f"point --to or ${ENV_VAR} at a folder you can write",
        ) from None


@contextmanager
def _only_fetch(root: Path) -> Iterator[None]:
    """Holds the data folder for one fetch, so a second fetch into it stops at once instead of racing for parts."""
    import fcntl

    handle = os.open(root, os.O_RDONLY)
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(
                "another `fhs data fetch` is filling this data folder",
                path=root,
                fix="wait for it to end, then run `fhs data fetch` again: it fetches only what is still missing",
            ) from None
        except OSError:  # a file system without locks: go on unguarded, as before
            pass
        yield
    finally:
        os.close(handle)  # releases the lock


def _in_the_way(root: Path, files: list[LockedFile]) -> None:
    """Something other than a file where the lock puts a file, or other than a folder where it needs one."""
    fix = "move it out of the way and run `fhs data fetch` again"
    for locked in files:
        target = root / locked.path
        if target.exists() or target.is_symlink():
            raise InputError("is not a file, and the lock puts a file here", path=target, fix=fix)
        for folder in (root / STAGING, *target.parents):
            if folder == root:
                break
            if folder.exists() and not folder.is_dir():
                raise InputError("is not a folder, and the lock puts files in it", path=folder, fix=fix)


def _fetch_source(
    client, source: LockedSource, lacking: list[LockedFile], root: Path, say, show: bool, pace: Pace
) -> int:
    """The lacking files of one source, after its license; the bytes received."""
    say(
        f"{source.name}: {len(lacking):,} of {len(source.files):,} files to fetch "
        f"({_megabytes(sum(f.size for f in lacking))}) from {source.title}"
    )
    say(f"  license: {source.license}")
    urls = [source.archive.url] if source.archive else [f.url for f in lacking if f.url]
    more = f" and {len(urls) - 1:,} more URL{'s' if len(urls) > 2 else ''} of the lock" if len(urls) > 1 else ""
    say(f"  from: {mirrored(urls[0])}{more}" if urls else "  from: the lock itself (its table)")
    downloaded = [f for f in lacking if f.url]
    members = [f for f in lacking if not f.url and not f.table]
    tables = [f for f in lacking if f.table]  # last: the manifest appears once its filings are there
    received = 0
    if downloaded:
        received += _fetch_files(client, source, downloaded, root, show, pace)
    if members:
        received += _fetch_archive(client, source, members, root, show, pace)
    for locked in tables:
        _write_table(source, locked, root)
    return received


def fetch(
    lock: Lock,
    root: Path,
    only: list[str] | None = None,
    *,
    say: Callable[[str], None] = print,
    progress: bool = True,
    client=None,
    limits: FetchLimits | None = None,
) -> FetchReport:
    """Download every locked file of the chosen sources that ``root`` lacks; see the module docstring.

    ``limits``: the deadline, minimum rate and size cap (``pace.py``); the defaults when None.
    """
    import httpx

    started = time.perf_counter()
    pace = Pace(limits)
    report = FetchReport()
    sources = lock.select(only)
    mirror_base()  # a mistyped mirror or source stops here, before the folder is touched
    _make_folder(root)
    own_client = client is None
    if own_client:
        client = httpx.Client(follow_redirects=True, timeout=pace.timeout(), headers={"User-Agent": USER_AGENT})
    try:
        with _only_fetch(root):
            for source in sources:
                lacking = missing(root, source)
                report.present += len(source.files) - len(lacking)
                if lacking:
                    _in_the_way(root, lacking)
                    report.bytes += _fetch_source(client, source, lacking, root, say, progress, pace)
                    report.fetched += len(lacking)
            staging = root / STAGING
            if staging.is_dir() and not any(p.is_file() for p in staging.rglob("*")):
                shutil.rmtree(staging, ignore_errors=True)
    finally:
        if own_client:
            client.close()
    report.seconds = time.perf_counter() - started
    return report
