"""The locked members of a downloaded archive, each verified and then written into place.

Only the members the lock names are read, each to the place the lock gives it, so no
name inside the archive decides where a file lands. A member whose size or SHA-256
differs from the lock is never written; the archive is then deleted so that the next
``fhs data fetch`` downloads it again.
"""

from __future__ import annotations

import hashlib
import zipfile
import zlib
from pathlib import Path

from fhs.core.files import atomic_write
from fhs.data.download.lock import Archive, LockedFile
from fhs.data.download.transfer import FetchError


def _prefix(names: set[str], archive: Archive, first: LockedFile) -> str:
    """The archive's folder of the files: the lock's, or the one that holds the first file (a renamed top folder)."""
    inner = first.path[len(archive.folder) :]
    if archive.prefix + inner in names:
        return archive.prefix
    for name in sorted(names):
        if name == inner or name.endswith("/" + inner):
            return name[: len(name) - len(inner)]
    return archive.prefix


def extract(
    zip_path: Path,
    archive: Archive,
    files: list[LockedFile],
    root: Path,
    *,
    label: str,
    elsewhere: str = "",
    progress=None,
) -> None:
    """Write ``files`` (members of ``zip_path``) under ``root``, each checked against the lock first."""
    look = f"; look at {elsewhere}" if elsewhere else ""
    try:
        with zipfile.ZipFile(zip_path) as bundle:
            names = set(bundle.namelist())
            prefix = _prefix(names, archive, files[0])
            for locked in files:
                member = prefix + locked.path[len(archive.folder) :]
                if member not in names:
                    raise FetchError(
                        f"{archive.name} has no member {member}; the record may have a new version{look}",
                        path=locked.path,
                    )
                info = bundle.getinfo(member)
                if info.file_size != locked.size:
                    raise FetchError(
                        f"checksum mismatch: {archive.name}:{member} holds {info.file_size} bytes, "
                        f"the lock pins {locked.size}; nothing was kept{look}",
                        path=locked.path,
                    )
                data = bundle.read(info)
                got = hashlib.sha256(data).hexdigest()
                if got != locked.sha256:
                    raise FetchError(
                        f"checksum mismatch: {archive.name}:{member} has sha256 {got}, the lock pins "
                        f"{locked.sha256}; nothing was kept{look}",
                        path=locked.path,
                    )
                with atomic_write(root / locked.path, "wb") as handle:
                    handle.write(data)
                if progress is not None:
                    progress.update(1)
    except (zipfile.BadZipFile, zlib.error, EOFError) as error:
        zip_path.unlink(missing_ok=True)
        raise FetchError(
            f"{archive.name} is not a readable zip archive ({error}); it was deleted, run `fhs data fetch` again{look}",
            path=label,
        ) from None
    except FetchError:
        zip_path.unlink(missing_ok=True)
        raise
