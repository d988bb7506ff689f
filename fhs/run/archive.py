"""Portable runs: what a GPU run asked and was answered, in one file anyone can rebuild from.

``fhs archive RUN_DIR... --out FILE`` packs, from the run folders and the
response cache they were made with:

- the cache entries the runs' records name (each call's ``key``), and the
  relocator's answers (chapter 2 asks them outside any run's records);
- the verdict-ledger rows of the runs' facts under the runs' models;
- each run's ``records.jsonl`` (gzip), ``run-config.json`` and ``metrics.json``;
- the provenance: package version, Python, platform, command line, counts.

The file is SQLite; its ``responses`` table has the cache's own layout, so
``fhs run ... --replay FILE`` and the book (``make book PROFILE=paper
REPLAY=FILE``) serve every call from it (``fhs.llm.replay``) and never ask a
server. A replay keeps its own verdict ledger beside its cache
(``replay-<archive id>/verdicts.sqlite``) that fills as the runs replay in
their original order, as the ledger did on the GPU box; archived ledger rows
answer only for facts whose verdicts came wholly from the ledger there (no
archived verifier call), where replaying the calls cannot rebuild them.
"""

from __future__ import annotations

import gzip
import json
import os
import platform
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.llm.factory import backend_identity
from fhs.llm.replay import ARCHIVE_FORMAT, REPLAY_PREFIX, open_archive
from fhs.method.ledger import Entry, SqliteLedger
from fhs.run.records import STAMP_NAME, read_records

ARCHIVE_VERSION = 1
VERIFIER_PURPOSE = "verifier"  # fhs.method.verifier.PURPOSE
UNRECORDED_PURPOSES = ("relocate",)  # calls no run record names (fhs.method.relocation): packed by model
_CHUNK = 500


@dataclass(frozen=True)
class ArchivedRun:
    name: str  # the run folder as it was given (e.g. runs/paper/fincl/fhs-seed0-1a2b3c4d)
    records: list[dict]
    run_config: dict | None
    metrics: dict | None


def find_run_dirs(paths: Iterable[str | Path]) -> list[Path]:
    """Run folders (holding ``records.jsonl``): the paths themselves, or every one found under them."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if (path / "records.jsonl").is_file():
            found.append(path)
        elif path.is_dir():
            inside = sorted(p.parent for p in path.rglob("records.jsonl"))
            if not inside:
                raise InputError("holds no run (no records.jsonl under it)", path=path,
                                 fix="pass the --out folder of `fhs run`, or a folder of such folders")
            found.extend(inside)
        else:
            raise InputError("no such run folder", path=path, fix="pass the --out folder of `fhs run`")
    return list(dict.fromkeys(found))


def _read_json(path: Path) -> dict | None:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise InputError("not valid JSON", path=path, fix="restore the file the run wrote") from None


def _read_only(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)


def _rows(db: sqlite3.Connection, sql: str, values: Sequence[Any]) -> tuple[list[str], list[tuple]]:
    """``sql`` (with one ``{marks}`` placeholder) over ``values`` in chunks; the column names and all rows."""
    columns: list[str] = []
    rows: list[tuple] = []
    for start in range(0, len(values), _CHUNK):
        chunk = list(values[start:start + _CHUNK])
        cursor = db.execute(sql.format(marks=",".join("?" * len(chunk))), chunk)
        columns = [c[0] for c in cursor.description]
        rows.extend(cursor.fetchall())
    return columns, rows


def _copy_table(source: sqlite3.Connection, target: sqlite3.Connection, table: str,
                columns: list[str], rows: list[tuple]) -> None:
    """Create ``table`` in ``target`` as ``source`` declares it and insert ``rows``."""
    (create,) = source.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    target.execute(create)
    if rows:
        target.executemany(f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) "
                           f"VALUES ({', '.join('?' * len(columns))})", rows)


def _has_table(db: sqlite3.Connection, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None


def pack(paths: Sequence[str | Path], out: str | Path, *, cache: str | Path) -> dict[str, Any]:
    """Write the archive of the runs under ``paths``, whose answers are in the response cache ``cache``."""
    runs = find_run_dirs(paths)
    cache = Path(cache)
    if not cache.is_file():
        raise InputError("no such response cache", path=cache, fix="pass --cache with the file the runs used")
    archived: list[ArchivedRun] = []
    first_use: dict[str, tuple[str, str, str]] = {}  # key -> (run, fact, purpose), for messages
    verifier_facts: set[str] = set()
    scopes: set[str] = set()
    for run in runs:
        records = read_records(run / "records.jsonl")
        config = _read_json(run / STAMP_NAME)
        archived.append(ArchivedRun(str(run), records, config, _read_json(run / "metrics.json")))
        unkeyed = [(r["id"], c.get("purpose", "")) for r in records for c in r.get("llm_calls") or [] if not c.get("key")]
        if unkeyed:
            raise InputError(f"{len(unkeyed)} model call(s) carry no cache key (the first: the {unkeyed[0][1]} "
                             f"call of fact {unkeyed[0][0]}); records made before keys were recorded", path=run,
                             fix="rerun the run with the same command and --fresh: the cache answers every call")
        for record in records:
            for call in record.get("llm_calls") or []:
                first_use.setdefault(call["key"], (str(run), record["id"], call.get("purpose", "")))
                if call.get("purpose") == VERIFIER_PURPOSE:
                    verifier_facts.add(record["id"])
        model = (config or {}).get("model")
        if isinstance(model, Mapping) and model.get("backend") and model.get("model"):
            scopes.add(backend_identity(str(model["backend"]), str(model["model"]))[2] + ":")
    source = _read_only(cache)
    try:
        columns, responses = _rows(source, "SELECT * FROM responses WHERE key IN ({marks})", list(first_use))
        found = {row[columns.index("key")] for row in responses}
        missing = [key for key in first_use if key not in found]
        if missing:
            run, fact, purpose = first_use[missing[0]]
            raise InputError(f"{len(missing)} answer(s) the runs used are not in this cache (the first: the {purpose} "
                             f"call of fact {fact} in {run})", path=cache,
                             fix="pass --cache with the response cache the runs were made with")
        kinds = {(row[columns.index("kind")], row[columns.index("model")]) for row in responses}
        for kind, model in sorted(kinds):
            for purpose in UNRECORDED_PURPOSES:
                cursor = source.execute("SELECT * FROM responses WHERE kind = ? AND model = ? AND purpose = ?",
                                        (kind, model, purpose))
                responses.extend(row for row in cursor.fetchall() if row[columns.index("key")] not in found)
        keys = [row[columns.index("key")] for row in responses]
        unparsed = _rows(source, "SELECT * FROM unparsed WHERE key IN ({marks})", keys) \
            if _has_table(source, "unparsed") else ([], [])
        finish = _rows(source, "SELECT key, reason FROM finish WHERE key IN ({marks})", keys) \
            if _has_table(source, "finish") else ([], [])
        unparsed = (unparsed, finish)
        identities = [row for row in source.execute("SELECT kind, model, provenance FROM identities").fetchall()
                      if (row[0], row[1]) in kinds] if _has_table(source, "identities") else []
        verdicts = _ledger_rows(cache.with_name("verdicts.sqlite"), {r["id"] for run in archived for r in run.records},
                                scopes)
        ledger_only = sorted({row[1] for row in verdicts[1]} - verifier_facts)
        return _write(Path(out), source, archived, (columns, responses), unparsed, identities, verdicts, ledger_only,
                      cache)
    finally:
        source.close()


def _ledger_rows(path: Path, fact_ids: set[str], scopes: set[str]) -> tuple[list[str], list[tuple]]:
    """Ledger rows of these facts under the runs' models (scopes start with the model's name)."""
    if not path.is_file() or not fact_ids:
        return [], []
    ledger = _read_only(path)
    try:
        if not _has_table(ledger, "verdicts"):
            return [], []
        columns, rows = _rows(ledger, "SELECT scope, fact, hypothesis, candidate, entry FROM verdicts "
                              "WHERE fact IN ({marks})", sorted(fact_ids))
        return columns, [row for row in rows if any(row[0].startswith(s) for s in scopes)]
    finally:
        ledger.close()


def _write(out: Path, source: sqlite3.Connection, runs: list[ArchivedRun], responses, unparsed, identities,
           verdicts, ledger_only: list[str], cache: Path) -> dict[str, Any]:
    """Build the archive in a temporary file beside ``out`` and rename it into place (never half a file)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".partial")
    os.close(handle)
    summary = {
        "archive": str(out), "runs": len(runs), "facts": sum(len(r.records) for r in runs),
        "answers": len(responses[1]), "verdicts": len(verdicts[1]), "ledger_only_facts": len(ledger_only),
    }
    provenance = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fhs": _package_version(), "python": sys.version.split()[0], "platform": platform.platform(),
        "command": sys.argv, "cache": str(cache.resolve()), "runs": [r.name for r in runs], **summary,
    }
    try:
        db = sqlite3.connect(temporary)
        with db:
            db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.executemany("INSERT INTO meta VALUES (?, ?)", [
                ("format", ARCHIVE_FORMAT), ("version", str(ARCHIVE_VERSION)), ("id", uuid.uuid4().hex),
                ("provenance", json.dumps(provenance, ensure_ascii=False))])
            _copy_table(source, db, "responses", *responses)
            unparsed, finish = unparsed  # answers marked unparseable, and why generation stopped (where not "stop")
            db.execute("CREATE TABLE finish (key TEXT PRIMARY KEY, reason TEXT NOT NULL)")
            db.executemany("INSERT INTO finish VALUES (?, ?)", finish[1])
            db.execute("CREATE TABLE unparsed (key TEXT PRIMARY KEY, marked REAL NOT NULL)")
            if unparsed[1]:
                db.executemany(f"INSERT INTO unparsed ({', '.join(unparsed[0])}) VALUES (?, ?)", unparsed[1])
            db.execute("CREATE TABLE identities (kind TEXT NOT NULL, model TEXT NOT NULL, provenance TEXT NOT NULL, "
                       "PRIMARY KEY (kind, model, provenance))")
            db.executemany("INSERT OR IGNORE INTO identities VALUES (?, ?, ?)", identities)
            db.execute("CREATE TABLE verdicts (scope TEXT NOT NULL, fact TEXT NOT NULL, hypothesis TEXT NOT NULL, "
                       "candidate TEXT NOT NULL, entry TEXT, PRIMARY KEY (scope, fact, hypothesis, candidate))")
            db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)", verdicts[1])
            db.execute("CREATE TABLE ledger_only (fact TEXT PRIMARY KEY)")
            db.executemany("INSERT INTO ledger_only VALUES (?)", [(fact,) for fact in ledger_only])
            db.execute("CREATE TABLE runs (name TEXT PRIMARY KEY, records BLOB NOT NULL, run_config TEXT, metrics TEXT)")
            db.executemany("INSERT INTO runs VALUES (?, ?, ?, ?)", [
                (run.name, gzip.compress("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in run.records)
                                         .encode("utf-8"), mtime=0),
                 json.dumps(run.run_config) if run.run_config is not None else None,
                 json.dumps(run.metrics) if run.metrics is not None else None) for run in runs])
        db.execute("VACUUM")
        db.close()
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        os.replace(temporary, out)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    summary["bytes"] = out.stat().st_size
    return summary


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fhs")
    except PackageNotFoundError:
        return "unknown"


def archived_runs(archive: str | Path) -> list[ArchivedRun]:
    """The runs an archive holds, records decompressed."""
    db = open_archive(archive)
    try:
        return [ArchivedRun(name, [json.loads(line) for line in gzip.decompress(blob).decode("utf-8").splitlines()
                                   if line.strip()],
                            json.loads(config) if config else None, json.loads(metrics) if metrics else None)
                for name, blob, config, metrics in db.execute("SELECT name, records, run_config, metrics FROM runs")]
    finally:
        db.close()


def archive_provenance(archive: str | Path) -> dict[str, Any]:
    db = open_archive(archive)
    try:
        meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
    finally:
        db.close()
    return {"id": meta.get("id", ""), **json.loads(meta.get("provenance") or "{}")}


class ReplayLedger:
    """A replay's verdict ledger: its own file, plus the archived rows of ledger-only facts.

    Verdicts the replayed calls produce are recorded in ``scratch`` and found by
    later runs, in the order the runs replay; a fact the GPU run judged only from
    its ledger (no archived verifier call) gets the archived rows.
    """

    def __init__(self, scratch: SqliteLedger, archived: Mapping[tuple[str, str, str, str], Entry],
                 ledger_only: set[str]) -> None:
        self.scratch = scratch
        self._archived = dict(archived)
        self._ledger_only = set(ledger_only)
        self._lock = threading.Lock()

    def lookup(self, scope, fact_id, hypothesis, candidates):
        found = self.scratch.lookup(scope, fact_id, hypothesis, candidates)
        if fact_id in self._ledger_only:
            with self._lock:
                for cid in candidates:
                    if cid not in found and (scope, fact_id, hypothesis, cid) in self._archived:
                        found[cid] = self._archived[(scope, fact_id, hypothesis, cid)]
        return found

    def record(self, scope, fact_id, hypothesis, entries):
        self.scratch.record(scope, fact_id, hypothesis, entries)

    def __len__(self) -> int:
        return len(self.scratch) + len(self._archived)

    def __bool__(self) -> bool:  # an empty ledger is still a ledger
        return True


def replay_ledger(archive: str | Path, cache_path: str | Path | None) -> ReplayLedger:
    """The ledger a replay of ``archive`` uses (kept beside ``cache_path``, so chapters share it)."""
    db = open_archive(archive)
    try:
        (archive_id,) = db.execute("SELECT value FROM meta WHERE name = 'id'").fetchone()
        ledger_only = {row[0] for row in db.execute("SELECT fact FROM ledger_only")}
        archived: dict[tuple[str, str, str, str], Entry] = {}
        if ledger_only:
            _, rows = _rows(db, "SELECT scope, fact, hypothesis, candidate, entry FROM verdicts WHERE fact IN ({marks})",
                            sorted(ledger_only))
            archived = {tuple(row[:4]): (json.loads(row[4]) if row[4] is not None else None) for row in rows}
    finally:
        db.close()
    base = Path(cache_path).parent if cache_path else Path(tempfile.gettempdir())
    return ReplayLedger(SqliteLedger(base / f"replay-{archive_id[:12]}" / "verdicts.sqlite"), archived, ledger_only)


def replay_failures(result: Mapping[str, Any], archive: str | Path, out: str | Path) -> InputError | None:
    """The error for a replayed run whose facts needed calls the archive lacks (None when there were none)."""
    reasons = (result.get("failed_facts") or {}).get("reasons") or {}
    missing = {fact: why for fact, why in reasons.items() if str(why).startswith(REPLAY_PREFIX)}
    if not missing:
        return None
    fact, why = next(iter(missing.items()))
    return InputError(f"{len(missing)} fact(s) of the run replayed into {out} need calls the archive does not hold "
                      f"(the first: fact {fact}, {why[len(REPLAY_PREFIX):]})", path=archive,
                      fix="archive the runs that made those calls too (and their chapters' runs before them), "
                          "or rerun against a server without --replay")
