#!/usr/bin/env python
"""A loopback mirror of the data's publishers: `fhs data fetch` without the internet.

    python tests/data_mirror.py --data ../shared/data --port 8765
    FHS_DATA_BASE_URL=http://127.0.0.1:8765 FHS_DATA=/tmp/empty make book

It serves a complete data folder's files under the publishers' URL paths, as
``fhs data fetch`` asks a mirror for them (``<base>/<host>/<path>``, see
``fhs/data/download/transfer.py``): each locked file at its URL, the filings
uncompressed (as GitHub serves them), and CodiEsp's zip built from its folders with the
archive's top folder. ``Range: bytes=N-`` is answered with 206, as GitHub and Zenodo do.
Tests inject faults: ``slow`` (bytes a second for chosen paths), ``corrupt`` (one byte
changed), ``missing`` (404), ``html`` (an HTML error page with 200), ``ignore_range``.
Every request is logged as ``(path, Range header)``.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fhs.data.download.lock import Lock, load_lock  # noqa: E402

HTML_PAGE = b"<!DOCTYPE html>\n<html><head><title>Not here</title></head><body>Moved.</body></html>\n"


def mirror_path(url: str) -> str:
    """The path a mirror serves ``url`` under: ``/<host>/<path>``, without the query."""
    parts = urlsplit(url)
    return f"/{parts.netloc}{parts.path}"


def build_zip(lock: Lock, data: Path, out: Path) -> Path:
    """Each archive's locked members, from the data folder, under the archive's top folder."""
    for source in lock.sources:
        if source.archive is None:
            continue
        archive = source.archive
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as bundle:
            readme = data / archive.folder / "README.txt"
            if readme.is_file():
                bundle.write(readme, archive.prefix + "README.txt")
            for locked in source.files:
                bundle.write(data / locked.path, archive.member_of(locked))
    return out


@dataclass
class Faults:
    slow: dict[str, int] = field(default_factory=dict)  # mirror path -> bytes a second
    corrupt: set[str] = field(default_factory=set)
    missing: set[str] = field(default_factory=set)
    html: set[str] = field(default_factory=set)
    ignore_range: bool = False
    html_kind: str = "text/html; charset=utf-8"  # the Content-Type an `html` path is sent with


class Mirror:
    """The routes (mirror path -> a function giving the bytes) of one lock over one data folder."""

    def __init__(self, data: Path, lock: Lock, workdir: Path) -> None:
        self.data = Path(data)
        self.faults = Faults()
        self.requests: list[tuple[str, str | None]] = []
        self.routes: dict = {}  # mirror path -> () -> bytes
        self._zip: Path | None = None
        self._lock = threading.Lock()
        for source in lock.sources:
            for locked in source.files:
                if locked.url:
                    local = self.data / locked.path
                    self.routes[mirror_path(locked.url)] = (
                        (lambda p=local: gzip.decompress(p.read_bytes())) if locked.gzip
                        else (lambda p=local: p.read_bytes()))
            if source.archive:
                def archive_bytes(lock=lock, out=Path(workdir) / source.archive.name):
                    with self._lock:
                        if self._zip is None:
                            self._zip = build_zip(lock, self.data, out)
                    return self._zip.read_bytes()
                self.routes[mirror_path(source.archive.url)] = archive_bytes


def _handler(mirror: Mirror):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: bytes, kind: str, extra: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()
            rate = mirror.faults.slow.get(self.path.split("?")[0])
            try:
                if rate:
                    step = max(1, rate // 20)
                    for start in range(0, len(body), step):
                        self.wfile.write(body[start:start + step])
                        self.wfile.flush()
                        time.sleep(step / rate)
                else:
                    self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def do_GET(self) -> None:  # noqa: N802
            path = self.path.split("?")[0]
            mirror.requests.append((path, self.headers.get("Range")))
            faults = mirror.faults
            if path in faults.missing or path not in mirror.routes:
                return self._send(404, b"Not Found\n", "text/plain")
            if path in faults.html:
                return self._send(200, HTML_PAGE, faults.html_kind)
            body = mirror.routes[path]()
            if path in faults.corrupt:
                middle = len(body) // 2
                body = body[:middle] + bytes([body[middle] ^ 0xFF]) + body[middle + 1:]
            kind = "application/zip" if path.endswith(".zip") else "text/plain; charset=utf-8"
            wanted = self.headers.get("Range", "")
            if wanted.startswith("bytes=") and wanted.endswith("-") and not faults.ignore_range:
                start = int(wanted[len("bytes="):-1])
                if start >= len(body):
                    return self._send(416, b"", kind, {"Content-Range": f"bytes */{len(body)}"})
                return self._send(206, body[start:], kind,
                                  {"Content-Range": f"bytes {start}-{len(body) - 1}/{len(body)}"})
            return self._send(200, body, kind)

    return Handler


class MirrorServer:
    """The mirror on 127.0.0.1 in a background thread; ``base_url`` goes into ``FHS_DATA_BASE_URL``."""

    def __init__(self, mirror: Mirror, port: int = 0) -> None:
        self.mirror = mirror
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _handler(mirror))
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> MirrorServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def main(argv: list[str] | None = None) -> int:
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="a complete data folder (e.g. ../shared/data)")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--lock", default=None, help="a lock other than the one shipped with fhs")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as work:
        mirror = Mirror(Path(args.data), load_lock(args.lock), Path(work))
        with MirrorServer(mirror, args.port) as server:
            print(f"serving {args.data} as its publishers at {server.base_url}; "
                  f"FHS_DATA_BASE_URL={server.base_url}", flush=True)
            try:
                while True:
                    time.sleep(3600)
            except KeyboardInterrupt:
                pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
