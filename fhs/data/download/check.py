"""``fhs data check``: a data folder against the lock, file by file (size and SHA-256)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from fhs.core.untrusted import TooLarge
from fhs.data.download.digest import digest
from fhs.data.download.lock import Lock


@dataclass
class CheckResult:
    verified: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    different: list[tuple[str, str]] = field(default_factory=list)  # (path, what differs)
    per_source: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (verified, locked)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.different


def check(lock: Lock, root: Path, only: list[str] | None = None) -> CheckResult:
    """Every locked file of the chosen sources: verified, missing, or different (and how)."""
    result = CheckResult()
    for source in lock.select(only):
        good = 0
        for locked in source.files:
            path = root / locked.path
            if not path.is_file():
                result.missing.append(locked.path)
                continue
            try:
                size, sha = digest(
                    path, gunzip=locked.gzip, limit=locked.size if isinstance(locked.size, int) else None
                )
            except OSError as error:  # unreadable, or a .gz that is not gzip
                result.different.append((locked.path, f"unreadable: {error}"))
                continue
            except TooLarge:  # read no further than the pinned size (a gzip bomb is not expanded)
                result.different.append((locked.path, f"more than {locked.size} bytes, the lock pins {locked.size}"))
                continue
            if size != locked.size:
                result.different.append((locked.path, f"{size} bytes, the lock pins {locked.size}"))
            elif sha != locked.sha256:
                result.different.append((locked.path, f"sha256 {sha}, the lock pins {locked.sha256}"))
            else:
                result.verified.append(locked.path)
                good += 1
        result.per_source[source.name] = (good, len(source.files))
    return result
