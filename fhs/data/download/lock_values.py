"""One value of a lock file, checked: a lock comes from someone else and decides where bytes land.

Each function takes the raw JSON value and a ``Where`` (the lock file and the field's
place in it, such as ``sources[3].files[0].path``) and returns the value, or raises an
InputError that names both and says what is expected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, overload
from urllib.parse import urlsplit

from fhs.core.errors import InputError, shown

SHA256 = re.compile(r"[0-9a-f]{64}")
STAGING = ".fhs-downloads"  # fetch's own folder inside the data folder: no locked file may live there
MAX_PATH = 1024  # characters of a locked path (a file system allows 4,096, a name 255 bytes)
MAX_NAME_BYTES = 255


@dataclass(frozen=True)
class Where:
    """A field of the lock file, for the error message."""

    file: Path
    field: str

    def at(self, key: str | int) -> Where:
        return Where(
            self.file,
            f"{self.field}[{key}]" if isinstance(key, int) else (f"{self.field}.{key}" if self.field else key),
        )

    def error(self, problem: str, fix: str | None = None) -> InputError:
        return InputError(
            problem,
            path=self.file,
            field=self.field or None,
            fix=fix or "fix the lock, or leave out --lock to use the one shipped with fhs",
        )


def mapping(value, where: Where, required: tuple[str, ...], optional: tuple[str, ...] = ()) -> dict:
    """A JSON object with the ``required`` keys and no keys beyond ``optional``."""
    if not isinstance(value, dict):
        raise where.error(f"expected an object, got {shown(value)}")
    for key in required:
        if key not in value:
            raise where.at(key).error("missing")
    for key in value:
        if key not in required and key not in optional:
            raise where.at(str(key)).error(f"unknown key, expected one of {', '.join(required + optional)}")
    return value


def items(value, where: Where, *, empty: bool = False) -> list:
    if not isinstance(value, list):
        raise where.error(f"expected a list, got {shown(value)}")
    if not value and not empty:
        raise where.error("an empty list")
    return value


@overload
def text(value, where: Where, *, optional: Literal[False] = False) -> str: ...
@overload
def text(value, where: Where, *, optional: bool) -> str | None: ...
def text(value, where: Where, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise where.error(f"expected a string, got {shown(value)}")
    if "\x00" in value:
        raise where.error("holds a NUL character")
    return value


def flag(value, where: Where) -> bool:
    if not isinstance(value, bool):
        raise where.error(f"expected true or false, got {shown(value)}")
    return value


@overload
def size(value, where: Where, *, optional: Literal[False] = False) -> int: ...
@overload
def size(value, where: Where, *, optional: bool) -> int | None: ...
def size(value, where: Where, *, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise where.error(f"expected a number of bytes (a whole number >= 0), got {shown(value)}")
    return value


@overload
def sha256(value, where: Where, *, optional: Literal[False] = False) -> str: ...
@overload
def sha256(value, where: Where, *, optional: bool) -> str | None: ...
def sha256(value, where: Where, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not SHA256.fullmatch(value):
        raise where.error(f"expected a SHA-256 (64 lowercase hex digits), got {shown(value)}")
    return value


@overload
def url(value, where: Where, *, optional: Literal[False] = False) -> str: ...
@overload
def url(value, where: Where, *, optional: bool) -> str | None: ...
def url(value, where: Where, *, optional: bool = False) -> str | None:
    """An ``http``/``https`` URL with a host (what fetch may ask for, and nothing else)."""
    if value is None and optional:
        return None
    value = text(value, where)
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError as error:
        raise where.error(f"not a URL ({error}): {shown(value)}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise where.error(f"expected an http:// or https:// URL with a host, got {shown(value)}")
    return value


def relative_path(value, where: Where, *, folder: bool = False) -> str:
    """A place under the data folder: relative, ``/``-separated, normalised, never ``..``.

    ``folder``: the path ends in ``/`` (an archive's folder). Names with a backslash or a
    drive letter are refused too, so the same lock means the same place on every system.
    """
    value = text(value, where)
    expected = (
        "a relative path such as 'codiesp/' (ends in /)" if folder else "a relative path such as 'ixbrl/a.htm.gz'"
    )
    body = value[:-1] if folder and value.endswith("/") else value
    if folder and not value.endswith("/"):
        raise where.error(f"expected {expected}, got {shown(value)}")
    if len(value) > MAX_PATH:
        raise where.error(f"a path of {len(value):,} characters, at most {MAX_PATH:,} are expected")
    parts = body.split("/")
    bad = (
        not body
        or value.startswith("/")
        or "\\" in value
        or ":" in parts[0]
        or any(p in ("", ".", "..") for p in parts)
        or any(ord(c) < 32 for c in value)
    )
    if bad:
        raise where.error(
            f"{shown(value)} is not {expected}: it must stay inside the data folder "
            f"(no leading /, no . or .. or empty parts, no \\ or drive)"
        )
    if parts[0] == STAGING:
        raise where.error(
            f"{shown(value)} lies in {STAGING}/, fetch's own folder of partial downloads; a locked "
            f"file must be elsewhere inside the data folder"
        )
    if any(len(p.encode("utf-8")) > MAX_NAME_BYTES for p in parts):
        raise where.error(f"a name in {shown(value)} is longer than {MAX_NAME_BYTES} bytes")
    return value


def file_name(value, where: Where) -> str:
    """One name, no folder: where a download waits under the staging folder."""
    value = text(value, where)
    if (
        not value
        or "/" in value
        or "\\" in value
        or value in (".", "..")
        or any(ord(c) < 32 for c in value)
        or len(value.encode("utf-8")) > MAX_NAME_BYTES - len(".part")
    ):
        raise where.error(f"expected a file name such as 'codiesp.zip' (no folder, no / or ..), got {shown(value)}")
    return value
