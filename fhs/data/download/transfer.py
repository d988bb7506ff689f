"""One file over HTTP: resumed where a killed download stopped, verified before anyone uses it.

The bytes go to a ``.part`` file. A later run asks the server for the rest (an HTTP
``Range`` request) instead of starting over; a server that ignores ``Range`` sends the
whole file again and the part is rewritten. Only a part whose size and SHA-256 match
the lock is handed back; a mismatch deletes it and names the file in one line.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from fhs.core.errors import InputError, shown
from fhs.data.download.digest import CHUNK
from fhs.data.download.pace import Pace

BASE_URL_ENV = "FHS_DATA_BASE_URL"
ATTEMPTS = 3
RETRY_STATUS = {408, 425, 429, 500, 502, 503, 504}
HTML_STARTS = (b"<!doctype html", b"<html", b"<head", b"<body")


class FetchError(InputError):
    """A download that cannot give the locked bytes: gone, refused, corrupted or interrupted."""


class _Retry(Exception):
    """A failure the next attempt may not meet (a dropped connection, a busy server)."""


@dataclass(frozen=True)
class Wanted:
    """What one download must produce.

    ``label``: the name every message uses (the file's place under ``$FHS_DATA``).
    ``size``/``sha256``: the locked bytes (None where the lock cannot say, an archive
    whose members are verified instead). ``html``: an HTML page is the expected content
    (an inline-XBRL filing), so only the checksum can tell a wrong page from the right one.
    """

    label: str
    url: str
    size: int | None
    sha256: str | None
    html: bool = False
    elsewhere: str = ""


def mirror_base(base: str | None = None) -> str:
    """The mirror's base URL (``base``, else ``$FHS_DATA_BASE_URL``; empty for none), checked before any request."""
    base = base if base is not None else os.environ.get(BASE_URL_ENV, "")
    if not base:
        return ""
    fix = f"set {BASE_URL_ENV} to http://HOST[:PORT][/PREFIX], or unset it to fetch from the publishers"
    try:
        parts = urlsplit(base)
        parts.port  # noqa: B018  (a port that is not a number raises here)
    except ValueError as error:
        raise InputError(f"not a URL ({error}): {shown(base)}", field=BASE_URL_ENV, fix=fix) from None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or any(c.isspace() for c in base)
    ):
        raise InputError(
            f"expected an http:// or https:// URL with a host, got {shown(base)}", field=BASE_URL_ENV, fix=fix
        )
    return base


def mirrored(url: str, base: str | None = None) -> str:
    """``url`` as served by the mirror at ``base`` (or ``$FHS_DATA_BASE_URL``): ``<base>/<host>/<path>``.

    ``https://raw.githubusercontent.com/o/r/c/f`` becomes ``<base>/raw.githubusercontent.com/o/r/c/f``,
    the layout ``wget --mirror`` writes, so any static server over such a copy is a mirror.
    """
    base = mirror_base(base)
    if not base:
        return url
    return base.rstrip("/") + "/" + url.split("://", 1)[-1]


def _elsewhere(wanted: Wanted) -> str:
    return f"; look at {wanted.elsewhere}" if wanted.elsewhere else ""


def _looks_like_html(head: bytes) -> bool:
    return head.lstrip()[:20].lower().startswith(HTML_STARTS)


def _check_response(response, wanted: Wanted, url: str) -> None:
    status = response.status_code
    if status in (404, 410):
        raise FetchError(
            f"HTTP {status}: {url} has no such file; the publisher may have moved or removed it{_elsewhere(wanted)}",
            path=wanted.label,
        )
    if status in RETRY_STATUS:
        raise _Retry(f"HTTP {status}")
    if status >= 400:
        raise FetchError(f"HTTP {status} from {url}{_elsewhere(wanted)}", path=wanted.label)
    kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind == "text/html" and not wanted.html:
        raise FetchError(
            f"{url} answered with an HTML page, not the file (an error, login or moved page){_elsewhere(wanted)}",
            path=wanted.label,
        )


def _complete_after_416(response, have: int) -> bool:
    """A ``416 Range Not Satisfiable`` whose ``Content-Range: bytes */N`` says the part already holds all N bytes."""
    total = response.headers.get("content-range", "").rpartition("/")[2]
    return total.isdigit() and int(total) == have


def _too_much(part: Path, wanted: Wanted, url: str, limit: int) -> FetchError:
    part.unlink(missing_ok=True)
    if wanted.size is not None:
        return FetchError(
            f"{url} sent more than the {limit:,} bytes the lock pins; nothing was kept{_elsewhere(wanted)}",
            path=wanted.label,
        )
    return FetchError(
        f"{url} sent more than {limit:,} bytes, the most fetch takes for one download "
        f"(--max-download); nothing was kept",
        path=wanted.label,
    )


def _receive(client, url: str, part: Path, wanted: Wanted, progress, pace: Pace) -> None:
    """One request: the rest of ``part`` (or all of it), appended as it arrives, within ``pace``'s limits."""
    limit = wanted.size if wanted.size is not None else pace.limits.max_download
    have = part.stat().st_size if part.exists() else 0
    if have > limit:
        part.unlink()
        have = 0
    if wanted.size is not None and have == wanted.size:
        return
    # A resumed range is asked for uncompressed: the part holds the file's own bytes.
    headers = {"Range": f"bytes={have}-", "Accept-Encoding": "identity"} if have else {}
    with client.stream("GET", url, headers=headers, timeout=pace.timeout()) as response:
        if response.status_code == 416 and have:
            if _complete_after_416(response, have):
                return
            part.unlink()
            raise _Retry("the server has a different file than the part began with")
        _check_response(response, wanted, url)
        resumed = have and response.status_code == 206
        if have and not resumed:  # the server ignored Range: it sends the whole file
            progress.update(-have)
            have = 0
        if progress.total is None and response.headers.get("content-length", "").isdigit():
            progress.total = have + int(response.headers["content-length"])
            progress.refresh()
        part.parent.mkdir(parents=True, exist_ok=True)
        pace.start()
        with part.open("ab" if resumed else "wb") as handle:
            written = have
            for chunk in response.iter_bytes():  # as each piece arrives, so a slow server is seen at once
                written += len(chunk)
                if written > limit:
                    handle.close()
                    raise _too_much(part, wanted, url, limit)
                handle.write(chunk)
                progress.update(len(chunk))
                pace.received(len(chunk), wanted.label, url)


def download(client, wanted: Wanted, part: Path, progress, pace: Pace | None = None) -> Path:
    """``part`` complete and verified against ``wanted``; resumes whatever a killed run left there.

    ``client``: an ``httpx.Client``; ``progress``: a tqdm bar (bytes); ``pace``: the fetch's
    deadline and minimum rate. Raises FetchError with one line that names the file; a part
    that fails its checksum is deleted first.
    """
    import httpx

    pace = pace or Pace()
    url = mirrored(wanted.url)
    if wanted.size is not None and wanted.size > pace.limits.max_download:
        raise FetchError(
            f"the lock pins {wanted.size:,} bytes, more than {pace.limits.max_download:,}, the most fetch "
            f"takes for one download (--max-download); nothing was asked for",
            path=wanted.label,
            fix="check where the lock came from, or raise --max-download",
        )
    if part.is_symlink() or (part.exists() and not part.is_file()):
        raise FetchError(
            f"{part} is not a plain file, so the download cannot be kept there",
            path=wanted.label,
            fix=f"move {part} out of the way and run `fhs data fetch` again",
        )
    if part.exists():
        progress.update(part.stat().st_size)
    for attempt in range(1, ATTEMPTS + 1):
        pace.check(wanted.label, url)
        try:
            try:
                _receive(client, url, part, wanted, progress, pace)
            except httpx.InvalidURL as error:
                raise FetchError(f"cannot ask for {url}: {error}", path=wanted.label) from None
            except httpx.TransportError as error:
                raise _Retry(f"{type(error).__name__}: {error}") from None
            break
        except _Retry as error:
            pace.check(wanted.label, url)
            if attempt == ATTEMPTS:
                raise FetchError(
                    f"could not download {url} in {ATTEMPTS} tries ({error}); run `fhs data fetch` "
                    f"again to resume{_elsewhere(wanted)}",
                    path=wanted.label,
                ) from None
            time.sleep(max(0.0, min(attempt, pace.left())))
    verify_part(part, wanted, url)
    return part


def verify_part(part: Path, wanted: Wanted, url: str) -> None:
    """The part's size and SHA-256 against the lock; on a mismatch it is deleted and the file named."""
    sha = hashlib.sha256()
    size = 0
    with part.open("rb") as handle:
        head = handle.read(64)
        handle.seek(0)
        while chunk := handle.read(CHUNK):
            sha.update(chunk)
            size += len(chunk)
    got = sha.hexdigest()
    if (wanted.size is None or size == wanted.size) and (wanted.sha256 is None or got == wanted.sha256):
        return
    part.unlink()
    if not wanted.html and _looks_like_html(head):
        raise FetchError(
            f"{url} sent an HTML page instead of the file (an error, login or moved page); "
            f"nothing was kept{_elsewhere(wanted)}",
            path=wanted.label,
        )
    expected = f"{wanted.size} bytes, sha256 {wanted.sha256}"
    raise FetchError(
        f"checksum mismatch: {url} sent {size} bytes, sha256 {got}; the lock pins {expected}; "
        f"nothing was kept{_elsewhere(wanted)}",
        path=wanted.label,
    )
