"""Server URLs from the user: checked once, and never recorded or printed with their credentials.

A URL may carry a user name and password (``http://user:pw@host/v1``); the client
needs them to connect, but run stamps, metrics, cache identities, archives and
error lines get :func:`public_url`, the URL without them.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from fhs.core.errors import InputError, shown

SCHEMES = ("http", "https")


def public_url(url: str) -> str:
    """``url`` without its user info (``user:password@``); anything unparseable is left out whole."""
    text = str(url)
    try:
        parts = urlsplit(text)
    except ValueError:
        return "<a URL that does not parse>" if "@" in text else text
    if "@" not in parts.netloc:
        return text
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


def scrub(text: str, urls: list[str] | tuple[str, ...]) -> str:
    """``text`` with each of ``urls`` (and its user info alone) replaced by the public form."""
    for url in urls:
        public = public_url(url)
        if public == url:
            continue
        text = text.replace(url, public)
        try:
            userinfo = urlsplit(url).netloc.rpartition("@")[0]
        except ValueError:
            continue
        if userinfo:
            text = text.replace(userinfo, "***")
    return text


def server_url(url: object, field: str = "base-url") -> str:
    """``url`` if it is an http(s) URL with a host (and a valid port), else a one-line InputError.

    A URL without a scheme, or of another (ftp, file), would otherwise be retried until the give-up time.
    """
    example = "e.g. http://127.0.0.1:8000/v1"
    if not isinstance(url, str) or not url.strip():
        raise InputError(f"expected a server URL, got {shown(url)}", field=field, fix=f"pass {example}")
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 (a port that is not a number, or out of range, raises here)
    except ValueError as error:
        raise InputError(
            f"not a valid URL: {shown(public_url(url))} ({error})", field=field, fix=f"pass {example}"
        ) from None
    if parts.scheme.lower() not in SCHEMES:
        said = f"its scheme is {parts.scheme!r}" if parts.scheme and parts.netloc else "it has no http:// or https://"
        raise InputError(
            f"not an HTTP server URL: {shown(public_url(url))} ({said})", field=field, fix=f"pass {example}"
        )
    if not parts.hostname:
        raise InputError(f"no host in {shown(public_url(url))}", field=field, fix=f"pass {example}")
    return url.strip()
