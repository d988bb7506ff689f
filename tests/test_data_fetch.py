"""`fhs data fetch` and `fhs data check` against a loopback mirror of the publishers (tests/data_mirror.py).

The ``data`` tests serve the real data folder (FHS_DATA) under the publishers' URL paths:
a fetch into an empty folder gives the same metrics as the folder itself, a fetch killed
midway resumes with a Range request, and a corrupted file, a 404 and an HTML page each end
in one line that names the file. The others use a small lock the test writes itself (gzip
storage, an archive, a server that ignores Range). No test touches a real publisher.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from data_mirror import Mirror, MirrorServer, build_zip, mirror_path
from fhs.cli import main
from fhs.data.datadir import SOURCES
from fhs.data.download.build import ABOUT, read_table
from fhs.data.download.check import check
from fhs.data.download.lock import Archive, Lock, LockedFile, LockedSource, Table, dump_lock, load_lock
from fhs.data.download.transfer import BASE_URL_ENV, mirrored

ROOT = Path(__file__).resolve().parent.parent


def fhs(*argv: str, env: dict, timeout: float = 600) -> subprocess.CompletedProcess:
    """The real command line in a child process (as a user runs it)."""
    return subprocess.run([sys.executable, "-m", "fhs.cli", *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout)


def child_env(base_url: str, data: Path | None = None, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FHS_DATA", BASE_URL_ENV)}
    env[BASE_URL_ENV] = base_url
    if data is not None:
        env["FHS_DATA"] = str(data)
    env.update(extra)
    return env


def one_error_line(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("fhs: ")]
    assert len(lines) == 1, result.stderr
    return lines[0]


# ----------------------------------------------------------------------------- a small lock of our own

def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def small(tmp_path):
    """A data folder of four kinds of file, its lock, and a mirror over it."""
    data = tmp_path / "published"
    blob = bytes(range(256)) * 4096  # 1 MiB
    page = b"<html><body>" + b"<p>a filing</p>" * 5000 + b"</body></html>"
    one, two = b"first member\n", b"second member\n"
    table = Table(("file", "sha256"), (("page.htm", _sha(page)),))
    (data / "pub").mkdir(parents=True)
    (data / "pub" / "blob.bin").write_bytes(blob)
    (data / "pub" / "page.htm.gz").write_bytes(gzip.compress(page))
    (data / "pub" / "MANIFEST.tsv").write_bytes(table.render())
    (data / "zipped" / "x").mkdir(parents=True)
    (data / "zipped" / "x" / "one.txt").write_bytes(one)
    (data / "zipped" / "x" / "two.txt").write_bytes(two)
    url = "https://example.org/repo/abc123/"
    lock = Lock((
        LockedSource("pub", "a publisher", "CC0", "https://example.org", "example.org/elsewhere", (
            LockedFile("pub/blob.bin", len(blob), _sha(blob), url=url + "blob.bin", commit="abc123"),
            LockedFile("pub/page.htm.gz", len(page), _sha(page), url=url + "page%20one.htm", gzip=True),
            LockedFile("pub/MANIFEST.tsv", len(table.render()), _sha(table.render()), table=True),
        ), table=table),
        LockedSource("zipped", "an archive", "CC BY 4.0", "https://example.org", "doi.org/example", (
            LockedFile("zipped/x/one.txt", len(one), _sha(one)),
            LockedFile("zipped/x/two.txt", len(two), _sha(two)),
        ), archive=Archive("bundle.zip", "https://zenodo.example/records/1/files/bundle.zip?download=1",
                           "top_v1/", "zipped/")),
    ))
    lock_file = tmp_path / "lock.json"
    lock_file.write_text(dump_lock(lock, ABOUT))
    mirror = Mirror(data, load_lock(lock_file), tmp_path)
    with MirrorServer(mirror) as server:
        yield server, lock_file, data, tmp_path / "empty"


def run_cli(capsys, monkeypatch, base_url: str, *argv: str) -> tuple[int, str, str]:
    monkeypatch.setenv(BASE_URL_ENV, base_url)
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_lock_renders_back_to_what_it_read(small, tmp_path):
    _, lock_file, _, _ = small
    lock = load_lock(lock_file)
    assert dump_lock(lock, ABOUT) == lock_file.read_text()
    manifest = tmp_path / "published" / "pub" / "MANIFEST.tsv"
    assert read_table(manifest).render() == manifest.read_bytes()


def test_a_fetch_into_an_empty_folder_gives_every_locked_byte(small, capsys, monkeypatch):
    server, lock_file, data, empty = small
    code, out, err = run_cli(capsys, monkeypatch, server.base_url, "data", "fetch", "--to", str(empty),
                             "--lock", str(lock_file), "--quiet")
    assert code == 0, err
    assert out.splitlines()[0] == f"data directory: {empty} (given on the command line)"
    assert "license: CC0" in out and "license: CC BY 4.0" in out
    assert out.index("license: CC0") < out.index("license: CC BY 4.0")
    assert (empty / "pub" / "blob.bin").read_bytes() == (data / "pub" / "blob.bin").read_bytes()
    stored = (empty / "pub" / "page.htm.gz").read_bytes()
    assert stored[:2] == b"\x1f\x8b"
    assert gzip.decompress(stored) == gzip.decompress((data / "pub/page.htm.gz").read_bytes())
    assert (empty / "pub" / "MANIFEST.tsv").read_bytes() == (data / "pub" / "MANIFEST.tsv").read_bytes()
    assert (empty / "zipped" / "x" / "two.txt").read_bytes() == b"second member\n"
    assert not (empty / ".fhs-downloads").exists()
    assert check(load_lock(lock_file), empty).ok
    again = run_cli(capsys, monkeypatch, server.base_url, "data", "fetch", "--to", str(empty), "--lock", str(lock_file))
    assert again[0] == 0 and "nothing to fetch" in again[1]
    (empty / "pub" / "MANIFEST.tsv").unlink()  # no publisher serves it: the lock writes it again
    requests = len(server.mirror.requests)
    code, out, _ = run_cli(capsys, monkeypatch, server.base_url, "data", "fetch", "--to", str(empty),
                           "--lock", str(lock_file))
    assert code == 0 and "from: the lock itself" in out and len(server.mirror.requests) == requests
    assert (empty / "pub" / "MANIFEST.tsv").read_bytes() == (data / "pub" / "MANIFEST.tsv").read_bytes()


def test_a_server_that_ignores_range_sends_it_all_again(small, capsys, monkeypatch):
    server, lock_file, data, empty = small
    part = empty / ".fhs-downloads" / "pub" / "blob.bin.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(b"\0" * 1000)  # not even the right first bytes: only a full answer can mend it
    server.mirror.faults.ignore_range = True
    code, _, err = run_cli(capsys, monkeypatch, server.base_url, "data", "fetch", "--to", str(empty),
                           "--lock", str(lock_file), "--only", "pub", "--quiet")
    assert code == 0, err
    assert (empty / "pub" / "blob.bin").read_bytes() == (data / "pub" / "blob.bin").read_bytes()
    assert ("/example.org/repo/abc123/blob.bin", "bytes=1000-") in server.mirror.requests


def test_an_archive_member_that_differs_is_never_written(small, capsys, monkeypatch, tmp_path):
    server, lock_file, data, empty = small
    (data / "zipped" / "x" / "two.txt").write_bytes(b"second memb3r\n")  # same size, other bytes
    code, _, err = run_cli(capsys, monkeypatch, server.base_url, "data", "fetch", "--to", str(empty),
                           "--lock", str(lock_file), "--only", "zipped", "--quiet")
    assert code == 2
    line = err.strip()
    assert line.startswith("fhs: error: zipped/x/two.txt: checksum mismatch: bundle.zip:top_v1/x/two.txt")
    assert "nothing was kept" in line and "doi.org/example" in line
    assert not (empty / "zipped" / "x" / "two.txt").exists()
    assert not (empty / ".fhs-downloads" / "bundle.zip").exists()  # the next fetch downloads it again


def test_an_archive_with_a_renamed_top_folder_still_unpacks(small, capsys, monkeypatch, tmp_path):
    server, lock_file, data, empty = small
    lock = load_lock(lock_file)
    moved = tmp_path / "moved.zip"
    build_zip(lock, data, moved)
    with zipfile.ZipFile(moved) as old, zipfile.ZipFile(tmp_path / "renamed.zip", "w") as new:
        for info in old.infolist():
            new.writestr(info.filename.replace("top_v1/", "top_v2/"), old.read(info))
    route = mirror_path(lock.source("zipped").archive.url)
    server.mirror.routes[route] = lambda: (tmp_path / "renamed.zip").read_bytes()
    code, _, err = run_cli(capsys, monkeypatch, server.base_url, "data", "fetch", "--to", str(empty),
                           "--lock", str(lock_file), "--only", "zipped", "--quiet")
    assert code == 0, err
    assert (empty / "zipped" / "x" / "one.txt").read_bytes() == b"first member\n"


def test_html_sent_as_data_is_named_as_html(small, capsys, monkeypatch):
    server, lock_file, _, empty = small
    path = "/example.org/repo/abc123/blob.bin"
    server.mirror.faults.html.add(path)
    server.mirror.faults.html_kind = "application/octet-stream"  # only the bytes give it away
    code, _, err = run_cli(capsys, monkeypatch, server.base_url, "data", "fetch", "--to", str(empty),
                           "--lock", str(lock_file), "--only", "pub", "--quiet")
    assert code == 2
    assert "pub/blob.bin" in err and "sent an HTML page instead of the file" in err and "nothing was kept" in err
    assert not (empty / "pub" / "blob.bin").exists()
    assert not (empty / ".fhs-downloads" / "pub" / "blob.bin.part").exists()


def test_check_lists_what_is_missing_and_what_differs(small, capsys):
    _, lock_file, data, _ = small
    (data / "pub" / "blob.bin").write_bytes(b"short")
    (data / "zipped" / "x" / "one.txt").unlink()
    code = main(["data", "check", "--data", str(data), "--lock", str(lock_file)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "missing: zipped/x/one.txt" in out
    assert "different: pub/blob.bin: 5 bytes, the lock pins 1048576" in out
    assert "pub: 2 of 3 files verified" in out and "1 missing, 1 different" in err


def test_without_fhs_data_the_default_folder_is_named_first(small, capsys, monkeypatch, tmp_path):
    server, lock_file, _, _ = small
    monkeypatch.delenv("FHS_DATA", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    code, out, err = run_cli(capsys, monkeypatch, server.base_url, "data", "fetch", "--lock", str(lock_file),
                             "--only", "zipped", "--quiet")
    assert code == 0, err
    default = tmp_path / "xdg" / "fhs" / "data"
    assert out.splitlines()[0] == f"data directory: {default} (the default, $FHS_DATA is unset)"
    assert f"export FHS_DATA={default}" in out.splitlines()[-1]
    assert (default / "zipped" / "x" / "one.txt").is_file()


def test_a_mirror_serves_each_url_under_its_host_and_path(monkeypatch):
    url = "https://raw.githubusercontent.com/o/r/0123/Datasets/XBRL%20Terminology.xlsx"
    assert mirrored(url, "http://127.0.0.1:9/m/") == ("http://127.0.0.1:9/m/raw.githubusercontent.com/o/r/0123/"
                                                       "Datasets/XBRL%20Terminology.xlsx")
    monkeypatch.delenv(BASE_URL_ENV, raising=False)
    assert mirrored(url) == url


# ----------------------------------------------------------------------------- the real lock and data

def test_the_lock_pins_what_the_loaders_read():
    lock = load_lock()
    paths = {f.path for f in lock.files}
    for name, source in SOURCES.items():
        for required in source.required:
            assert any(p == f"{name}/{required}" or p.startswith(f"{name}/{required}/") for p in paths), required
    fintagging = {f.path: f.commit for f in lock.source("fintagging").files}
    assert fintagging == {"fintagging/FinCL-eval-subset.csv": "120df9464a2fa2d5e25489ddaf122e24066f017b",
                          "fintagging/us_gaap_2024_BM25.jsonl": "c24359b574d0445477222b146cc00ebae42fb332"}
    for split in ("train", "dev", "test"):
        assert {f"codiesp/{split}/{split}{kind}.tsv" for kind in "DPX"} <= paths
    ixbrl = lock.source("ixbrl")
    names = [row[0] for row in ixbrl.table.rows]
    assert len(names) == 142 and {f"ixbrl/{n}.gz" for n in names} <= paths
    assert all(f.url.startswith("https://raw.githubusercontent.com/") and f.commit in f.url
               for f in lock.files if f.url)


@pytest.mark.data
def test_check_verifies_every_file_of_the_shared_data(capsys):
    code = main(["data", "check", "--data", os.environ.get("FHS_DATA", str(ROOT.parent / "shared" / "data"))])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1].startswith(f"every file verified: {len(load_lock().files):,} files match the lock")


@pytest.fixture(scope="module")
def shared_mirror(tmp_path_factory):
    data = Path(os.environ.get("FHS_DATA", ROOT.parent / "shared" / "data"))
    if not (data / "ixbrl" / "MANIFEST.tsv").is_file():
        pytest.fail("FHS_DATA must point at the complete data folder for @pytest.mark.data tests")
    mirror = Mirror(data, load_lock(), tmp_path_factory.mktemp("mirror"))
    with MirrorServer(mirror) as server:
        yield server, data


def _metrics(run_dir: Path) -> dict:
    metrics = json.loads((run_dir / "metrics.json").read_text())
    return {k: v for k, v in metrics.items() if "seconds" not in k}


@pytest.mark.data
@pytest.mark.slow
def test_fetched_data_gives_the_same_metrics_as_the_shared_data(shared_mirror, tmp_path):
    server, shared = shared_mirror
    server.mirror.faults = type(server.mirror.faults)()
    empty = tmp_path / "data"
    env = child_env(server.base_url, empty)
    fetched = fhs("data", "fetch", env=env)
    assert fetched.returncode == 0, fetched.stderr
    lines = fetched.stdout.splitlines()
    assert lines[0] == f"data directory: {empty} ($FHS_DATA)"
    for source in load_lock().sources:
        assert f"  license: {source.license}" in lines
    assert "%" in fetched.stderr  # the progress bars
    assert fhs("data", "check", env=env).returncode == 0
    for dataset, method in (("fincl", "direct"), ("codiesp", "oracle")):
        runs = {}
        for name, folder in (("fetched", empty), ("shared", shared)):
            out = tmp_path / f"{dataset}-{name}"
            result = fhs("run", "--dataset", dataset, "--method", method, "--out", str(out),
                         env=child_env(server.base_url, folder))
            assert result.returncode == 0, result.stderr
            runs[name] = _metrics(out)
        assert runs["fetched"] == runs["shared"], dataset


@pytest.mark.data
def test_a_fetch_killed_midway_resumes_where_it_stopped(shared_mirror, tmp_path):
    server, _ = shared_mirror
    lock = load_lock()
    big = lock.source("fintagging").files[0]  # the 3 MB inventory, first in the lock
    route = mirror_path(big.url)
    server.mirror.faults = type(server.mirror.faults)(slow={route: 300_000})
    folder = tmp_path / "data"
    part = folder / ".fhs-downloads" / (big.path + ".part")
    child = subprocess.Popen([sys.executable, "-m", "fhs.cli", "data", "fetch", "--only", "fintagging", "--quiet"],
                             cwd=ROOT, env=child_env(server.base_url, folder), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not (part.is_file() and part.stat().st_size > 400_000):
        assert child.poll() is None and time.monotonic() < deadline, "the fetch ended before it could be killed"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.communicate(timeout=30)
    kept = part.stat().st_size
    assert 0 < kept < big.size and not (folder / big.path).exists()

    server.mirror.faults = type(server.mirror.faults)()
    resumed = fhs("data", "fetch", "--only", "fintagging", "--quiet", env=child_env(server.base_url, folder))
    assert resumed.returncode == 0, resumed.stderr
    assert (route, f"bytes={kept}-") in server.mirror.requests
    assert check(lock, folder, ["fintagging"]).ok and not part.exists()


@pytest.mark.data
def test_a_corrupted_file_is_refused_and_nothing_is_kept(shared_mirror, tmp_path):
    server, _ = shared_mirror
    csv = load_lock().source("fintagging").files[1]
    server.mirror.faults = type(server.mirror.faults)(corrupt={mirror_path(csv.url)})
    folder = tmp_path / "data"
    line = one_error_line(fhs("data", "fetch", "--only", "fintagging", "--quiet",
                              env=child_env(server.base_url, folder)))
    assert line.startswith(f"fhs: error: {csv.path}: checksum mismatch: ")
    assert f"the lock pins {csv.size} bytes, sha256 {csv.sha256}" in line and "nothing was kept" in line
    assert not (folder / csv.path).exists()
    assert not list(folder.rglob("*.part"))


@pytest.mark.data
@pytest.mark.parametrize("fault", ["missing", "html"])
def test_a_404_or_an_html_page_names_the_file_and_where_else_to_look(shared_mirror, tmp_path, fault):
    server, _ = shared_mirror
    source = load_lock().source("xbrl-terminology")
    locked = source.files[0]
    server.mirror.faults = type(server.mirror.faults)(**{fault: {mirror_path(locked.url)}})
    folder = tmp_path / "data"
    line = one_error_line(fhs("data", "fetch", "--only", "xbrl-terminology", "--quiet",
                              env=child_env(server.base_url, folder)))
    assert line.startswith(f"fhs: error: {locked.path}: ")
    expected = "HTTP 404" if fault == "missing" else "answered with an HTML page, not the file"
    assert expected in line and f"look at {source.elsewhere}" in line
    assert not (folder / locked.path).exists()
