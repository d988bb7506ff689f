"""A lock file and a mirror from someone else, as a careless user and an attacker would give them.

`fhs data fetch | check | lock` with a hostile or malformed lock, a mirror that sends too
much or drips, and a data folder in a strange state: each ends in exit 2 and one line that
names the file or field and what is expected, and writes nothing outside the target folder.
Every server is a loopback one (tests/data_mirror.py, or the endless one below); every wait
is bounded by a tiny deadline.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from data_mirror import Mirror, MirrorServer, mirror_path
from fhs.cli import main
from fhs.data.download.build import ABOUT
from fhs.data.download.fetch import fetch
from fhs.data.download.lock import LOCK_FILE, Archive, Lock, LockedFile, LockedSource, dump_lock, load_lock
from fhs.data.download.transfer import BASE_URL_ENV

ROOT = Path(__file__).resolve().parent.parent
URL = "https://example.org/repo/abc123/"
BLOB = bytes(range(256)) * 256  # 64 KiB
SMALL = b"a small file\n"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Setup:
    """A published folder, its lock (as JSON to damage), a mirror over it, and an empty target ``d/inner``."""

    def __init__(self, tmp: Path, server: MirrorServer, good: dict) -> None:
        self.tmp, self.server, self.good = tmp, server, good
        self.target = tmp / "d" / "inner"

    def lock(self, damage=None, raw: str | None = None) -> Path:
        """The good lock with ``damage(lock_dict)`` applied (or ``raw`` text), written to a file."""
        data = copy.deepcopy(self.good)
        if damage:
            damage(data)
        path = self.tmp / "l.json"
        path.write_text(raw if raw is not None else json.dumps(data))
        return path

    def files_outside(self) -> set[Path]:
        """Every file under the test folder but outside the target (the published copy and locks included)."""
        return {p for p in self.tmp.rglob("*") if p.is_file() and self.target not in p.parents}


@pytest.fixture
def setup(tmp_path, monkeypatch):
    data = tmp_path / "published"
    (data / "pub").mkdir(parents=True)
    (data / "pub" / "blob.bin").write_bytes(BLOB)
    (data / "pub" / "small.txt").write_bytes(SMALL)
    (data / "zipped" / "x").mkdir(parents=True)
    (data / "zipped" / "x" / "one.txt").write_bytes(b"first member\n")
    lock = Lock((
        LockedSource("pub", "a publisher", "CC0", "https://example.org", "example.org/elsewhere", (
            LockedFile("pub/blob.bin", len(BLOB), _sha(BLOB), url=URL + "blob.bin"),
            LockedFile("pub/small.txt", len(SMALL), _sha(SMALL), url=URL + "small.txt"),
        )),
        LockedSource("zipped", "an archive", "CC BY 4.0", "https://example.org", "doi.org/example", (
            LockedFile("zipped/x/one.txt", 13, _sha(b"first member\n")),
        ), archive=Archive("bundle.zip", "https://zenodo.example/records/1/files/bundle.zip?download=1",
                           "top_v1/", "zipped/")),
    ))
    good = json.loads(dump_lock(lock, ABOUT))
    mirror = Mirror(data, lock, tmp_path)
    with MirrorServer(mirror) as server:
        monkeypatch.setenv(BASE_URL_ENV, server.base_url)
        monkeypatch.delenv("FHS_DATA", raising=False)
        yield Setup(tmp_path, server, good)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(code: int, err: str) -> str:
    """The single error line of a refused command (exit 2, no traceback)."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fhs: error: "), err
    return lines[0]


def _set(*keys, value):
    def damage(lock):
        node = lock
        for key in keys[:-1]:
            node = node[key]
        node[keys[-1]] = value
    return damage


# ----------------------------------------------------------------------------- case 1: paths outside the folder

HOSTILE = ["../../evil.jsonl", "pub/../../../evil.jsonl", "ABSOLUTE", "./pub/evil.jsonl", "pub//evil.jsonl",
           "C:\\evil.jsonl", ".fhs-downloads/evil.jsonl", "pub/evil.jsonl\n"]


@pytest.mark.parametrize("path", HOSTILE)
def test_a_lock_path_outside_the_folder_is_refused_and_nothing_is_written(setup, capsys, path):
    outside = setup.tmp / "abs"
    outside.mkdir()
    path = str(outside / "evil.jsonl") if path == "ABSOLUTE" else path
    lock = setup.lock(_set("sources", 0, "files", 0, "path", value=path))
    before = setup.files_outside()
    line = one_line(*run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(lock), "--quiet")[::2])
    assert f"{lock}, field 'sources[0].files[0].path'" in line and "inside the data folder" in line
    assert setup.files_outside() == before
    assert not setup.target.exists() and setup.server.mirror.requests == []


def test_check_never_reads_a_file_outside_the_folder(setup, capsys):
    secret = setup.tmp / "etc" / "hostname"
    secret.parent.mkdir()
    secret.write_bytes(b"a-host\n")
    setup.target.mkdir(parents=True)

    def point_outside(lock):
        lock["sources"][0]["files"][0].update(path=str(secret), size=7, sha256=_sha(b"a-host\n"))
    lock = setup.lock(point_outside)
    code, out, err = run(capsys, "data", "check", "--data", str(setup.target), "--lock", str(lock))
    assert "field 'sources[0].files[0].path'" in one_line(code, err)
    assert "verified" not in out


# ----------------------------------------------------------------------------- case 2: the archive's name

def test_an_archive_name_with_a_folder_is_refused(setup, capsys):
    lock = setup.lock(_set("sources", 1, "archive", "name", value="../../a.zip"))
    before = setup.files_outside()
    code, _, err = run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(lock), "--quiet",
                       "--only", "zipped")
    line = one_line(code, err)
    assert "field 'sources[1].archive.name'" in line and "expected a file name" in line
    assert setup.files_outside() == before and not list(setup.tmp.rglob("a.zip*"))


# ----------------------------------------------------------------------------- case 14: one path locked twice

def test_two_entries_with_one_path_are_refused(setup, capsys):
    def twice(lock):
        lock["sources"][0]["files"][1]["path"] = "pub/blob.bin"
    lock = setup.lock(twice)
    code, out, err = run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(lock), "--quiet")
    line = one_line(code, err)
    assert "field 'sources[0].files[1].path'" in line and "locked twice (also sources[0].files[0].path)" in line
    assert "fetched and verified" not in out and not setup.target.exists()


def test_a_file_where_another_needs_a_folder_is_refused(setup, capsys):
    lock = setup.lock(_set("sources", 0, "files", 1, "path", value="pub/blob.bin/small.txt"))
    line = one_line(*run(capsys, "data", "check", "--data", str(setup.tmp), "--lock", str(lock))[::2])
    assert "'pub/blob.bin/small.txt' needs 'pub/blob.bin' to be a folder" in line


# ----------------------------------------------------------------------------- malformed locks

def _nest(depth: int) -> str:
    return "[" * depth + "]" * depth


MALFORMED = [
    ("no sources", None, '{"format": 1}', "field 'sources': missing"),
    ("a list", None, "[1, 2]", "expected an object, got a list of 2 value(s)"),
    ("size big", _set("sources", 0, "files", 0, "size", value="big"), None,
     "field 'sources[0].files[0].size': expected a number of bytes"),
    ("url 5", _set("sources", 0, "files", 0, "url", value=5), None,
     "field 'sources[0].files[0].url': expected a string, got 5"),
    ("url ftp", _set("sources", 0, "files", 0, "url", value="file:///etc/passwd"), None,
     "field 'sources[0].files[0].url': expected an http:// or https:// URL"),
    ("path null", _set("sources", 0, "files", 0, "path", value=None), None,
     "field 'sources[0].files[0].path': expected a string, got None"),
    ("sha short", _set("sources", 0, "files", 0, "sha256", value="abc"), None, "expected a SHA-256"),
    ("format true", _set("format", value=True), None, "field 'format': lock format True"),
    ("unknown key", _set("sources", 0, "files", 0, "mode", value="0777"), None,
     "field 'sources[0].files[0].mode': unknown key"),
    ("nested deep", None, '{"format": 1, "sources": ' + _nest(100_000) + "}", "nested too deep"),
]


@pytest.mark.parametrize("command", ["fetch", "check"])
@pytest.mark.parametrize("name, damage, raw, expected", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_lock_is_one_line_naming_the_field(setup, capsys, command, name, damage, raw, expected):
    lock = setup.lock(damage, raw)
    folder = ["--to", str(setup.target), "--quiet"] if command == "fetch" else ["--data", str(setup.tmp)]
    line = one_line(*run(capsys, "data", command, "--lock", str(lock), *folder)[::2])
    assert line.startswith(f"fhs: error: {lock}") and expected in line


def test_a_lock_that_is_not_utf8_is_one_line(setup, capsys):
    lock = setup.tmp / "l.json"
    lock.write_bytes(b'{"format": 1, "about": "\xff"}')
    line = one_line(*run(capsys, "data", "check", "--lock", str(lock), "--data", str(setup.tmp))[::2])
    assert f"{lock}: not UTF-8 text" in line


# ----------------------------------------------------------------------------- case 16: no size, no bound

class _Endless(BaseHTTPRequestHandler):
    """Zeros with no Content-Length, until the client hangs up (or 200 MB, so a broken test still ends)."""

    def log_message(self, *args) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "application/zip")
        self.send_header("Connection", "close")
        self.end_headers()
        block = b"\0" * 65536
        try:
            for _ in range(200 * 16):
                self.wfile.write(block)
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.fixture
def endless(monkeypatch):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv(BASE_URL_ENV, f"http://127.0.0.1:{server.server_address[1]}")
    yield
    server.shutdown()
    server.server_close()


def test_an_unsized_archive_stops_at_the_limit_and_names_the_path_and_the_limit(setup, endless, capsys):
    assert setup.good["sources"][1]["archive"]["size"] is None
    started = time.monotonic()
    code, _, err = run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(setup.lock()), "--quiet",
                       "--only", "zipped", "--max-download", "2")
    line = one_line(code, err)
    assert line.startswith("fhs: error: .fhs-downloads/bundle.zip: ")
    assert "sent more than 2,000,000 bytes" in line and "--max-download" in line and "nothing was kept" in line
    assert not list(setup.target.rglob("*.part")) and time.monotonic() - started < 30


def test_a_body_larger_than_the_lock_pins_says_so(setup, capsys):
    setup.server.mirror.routes[mirror_path(URL + "small.txt")] = lambda: SMALL + b"and much more than that\n"
    code, _, err = run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(setup.lock()), "--quiet",
                       "--only", "pub")
    line = one_line(code, err)
    assert line.startswith("fhs: error: pub/small.txt: ") and "sent more than the 13 bytes the lock pins" in line
    assert "sent 0 bytes" not in line and not (setup.target / "pub" / "small.txt").exists()


def test_a_size_beyond_the_limit_is_refused_before_it_is_asked_for(setup, capsys):
    lock = setup.lock(_set("sources", 0, "files", 0, "size", value=10**18))
    line = one_line(*run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(lock), "--quiet",
                         "--only", "pub")[::2])
    assert line.startswith("fhs: error: pub/blob.bin: the lock pins 1,000,000,000,000,000,000 bytes, more than "
                           "1,000,000,000") and "--max-download" in line
    assert setup.server.mirror.requests == []


# ----------------------------------------------------------------------------- case 17: a slow drip

def test_a_dripping_mirror_meets_the_deadline(setup, capsys):
    setup.server.mirror.faults.slow[mirror_path(URL + "blob.bin")] = 1  # one byte a second
    started = time.monotonic()
    code, _, err = run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(setup.lock()), "--quiet",
                       "--only", "pub", "--deadline", "1.5")
    line = one_line(code, err)
    assert time.monotonic() - started < 20
    assert line.startswith("fhs: error: pub/blob.bin: the fetch passed its deadline of 1.5 s (--deadline)")
    part = setup.target / ".fhs-downloads" / "pub" / "blob.bin.part"
    assert part.is_file() and 0 < part.stat().st_size < len(BLOB)  # kept: the next fetch resumes it


def test_a_dripping_mirror_falls_below_the_minimum_rate(setup):
    from fhs.data.download.pace import FetchLimits, PaceError

    setup.server.mirror.faults.slow[mirror_path(URL + "blob.bin")] = 100  # bytes a second
    limits = FetchLimits(min_rate=1000, rate_window_s=0.5, deadline_s=30)
    started = time.monotonic()
    with pytest.raises(PaceError, match=r"bytes a second \(--min-rate\)") as error:
        fetch(load_lock(setup.lock()), setup.target, ["pub"], say=lambda line: None, progress=False, limits=limits)
    assert str(error.value).startswith("pub/blob.bin: ") and time.monotonic() - started < 20


# ----------------------------------------------------------------------------- a malformed mirror

@pytest.mark.parametrize("base", ["http://[::1", "127.0.0.1:8000", "ftp://mirror.example/", "http://h:port/"])
def test_a_malformed_mirror_url_is_one_line_before_anything_is_made(setup, capsys, monkeypatch, base):
    monkeypatch.setenv(BASE_URL_ENV, base)
    line = one_line(*run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(setup.lock()),
                         "--quiet")[::2])
    assert f"field '{BASE_URL_ENV}'" in line and "http://HOST[:PORT][/PREFIX]" in line
    assert not setup.target.exists()


# ----------------------------------------------------------------------------- raw OS errors made clear

def test_a_data_folder_that_is_a_file_is_named_as_one(setup, capsys, monkeypatch):
    setup.target.parent.mkdir(parents=True)
    setup.target.write_text("not a folder")
    monkeypatch.setenv("FHS_DATA", str(setup.target))
    line = one_line(*run(capsys, "data", "fetch", "--lock", str(setup.lock()), "--quiet")[::2])
    assert line.startswith(f"fhs: error: {setup.target}: is a file, not a folder") and "File exists" not in line
    line = one_line(*run(capsys, "data", "check", "--lock", str(setup.lock()))[::2])
    assert f"{setup.target}: is a file, not a data folder" in line


@pytest.mark.parametrize("kind", ["folder", "link"])
def test_a_part_that_is_no_plain_file_is_named_and_never_followed(setup, capsys, kind):
    part = setup.target / ".fhs-downloads" / "pub" / "blob.bin.part"
    part.parent.mkdir(parents=True)
    victim = setup.tmp / "victim.txt"
    victim.write_text("keep me\n")
    part.mkdir() if kind == "folder" else part.symlink_to(victim)
    line = one_line(*run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(setup.lock()),
                         "--quiet", "--only", "pub")[::2])
    assert line.startswith("fhs: error: pub/blob.bin: ") and "blob.bin.part is not a plain file" in line
    assert "Is a directory" not in line and victim.read_text() == "keep me\n"


@pytest.mark.parametrize("place, make, expected", [
    ("pub/small.txt", Path.mkdir, "is not a file, and the lock puts a file here"),
    ("pub", Path.touch, "is not a folder, and the lock puts files in it"),
    (".fhs-downloads", Path.touch, "is not a folder, and the lock puts files in it"),
])
def test_something_in_the_way_is_named(setup, capsys, place, make, expected):
    (setup.target / place).parent.mkdir(parents=True, exist_ok=True)
    make(setup.target / place)
    line = one_line(*run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(setup.lock()),
                         "--quiet", "--only", "pub")[::2])
    assert line.startswith(f"fhs: error: {setup.target / place}: {expected}")


def test_a_second_fetch_into_one_folder_stops_at_once_and_the_first_completes(setup, capsys):
    blob = mirror_path(URL + "blob.bin")
    setup.server.mirror.faults.slow[blob] = 32 * 1024  # two seconds for the blob
    lock = setup.lock()
    env = {**os.environ, "PYTHONPATH": str(ROOT), BASE_URL_ENV: setup.server.base_url}
    first = subprocess.Popen([sys.executable, "-m", "fhs.cli", "data", "fetch", "--to", str(setup.target),
                              "--lock", str(lock), "--quiet", "--only", "pub"],
                             cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not any(path == blob for path, _ in setup.server.mirror.requests):
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        line = one_line(*run(capsys, "data", "fetch", "--to", str(setup.target), "--lock", str(lock),
                             "--quiet", "--only", "pub")[::2])
        assert f"{setup.target}: another `fhs data fetch` is filling this data folder" in line
        out, err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 0, err
    assert "fetched and verified 2 files" in out
    assert (setup.target / "pub" / "blob.bin").read_bytes() == BLOB


# ----------------------------------------------------------------------------- `fhs data lock`

def test_data_lock_never_rewrites_the_shipped_lock(setup, capsys):
    shipped = LOCK_FILE.read_bytes()
    line = one_line(*run(capsys, "data", "lock", "--from", str(setup.tmp / "published"))[::2])
    assert "--out" in line
    assert LOCK_FILE.read_bytes() == shipped
