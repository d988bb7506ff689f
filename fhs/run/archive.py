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
(``replay-<digest>/verdicts.sqlite``) that fills as the runs replay in
their original order, as the ledger did on the GPU box; archived ledger rows
answer only for facts whose verdicts came wholly from the ledger there (no
archived verifier call), where replaying the calls cannot rebuild them.

An archive is a file from a stranger (``fhs.llm.replay.open_archive`` checks
it): nothing in it names a path, since the replay's ledger folder is named
after the SHA-256 of its content that this process computed, and a replayed
run's metrics are compared with the ones the archive carries
(:func:`replay_failures`): a difference is an error naming the run and the
metric, never a quiet new number. Only the archived runs of the replayed run's settings are
decompressed, each to at most ``ReadLimits.records_bytes`` (``fhs.core.untrusted``), so a
gzip bomb in a run's records stops there with one line. ``fhs archive`` refuses to write over its
own inputs and writes the archive as an ordinary file (the umask decides).
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import platform
import sqlite3
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError, warn
from fhs.core.outputs import check_out
from fhs.core.untrusted import LIMITS, ReadLimits, TooLarge, gunzip
from fhs.llm.factory import backend_identity
from fhs.llm.replay import ARCHIVE_FORMAT, ARCHIVE_VERSION, REPLAY_PREFIX, archive_digest, content_digest, open_archive
from fhs.method.verifier import Entry
from fhs.run.evaluate import MISS, metrics
from fhs.run.ledger import Ledger, SqliteLedger, ledger_path
from fhs.run.records import STAMP_NAME, read_records

VERIFIER_PURPOSE = "verifier"  # fhs.method.verifier.PURPOSE
UNRECORDED_PURPOSES = ("relocate",)  # calls no run record names (fhs.run.relocation): packed by model
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
                raise InputError(
                    "holds no run (no records.jsonl under it)",
                    path=path,
                    fix="pass the --out folder of `fhs run`, or a folder of such folders",
                )
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
        chunk = list(values[start : start + _CHUNK])
        cursor = db.execute(sql.format(marks=",".join("?" * len(chunk))), chunk)
        columns = [c[0] for c in cursor.description]
        rows.extend(cursor.fetchall())
    return columns, rows


def _copy_table(
    source: sqlite3.Connection, target: sqlite3.Connection, table: str, columns: list[str], rows: list[tuple]
) -> None:
    """Create ``table`` in ``target`` as ``source`` declares it and insert ``rows``."""
    (create,) = source.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    target.execute(create)
    if rows:
        target.executemany(
            f"INSERT OR REPLACE INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})", rows
        )


def _has_table(db: sqlite3.Connection, table: str) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone() is not None


def pack(paths: Sequence[str | Path], out: str | Path, *, cache: str | Path) -> dict[str, Any]:
    """Write the archive of the runs under ``paths``, whose answers are in the response cache ``cache``."""
    runs = find_run_dirs(paths)
    cache, out = Path(cache), Path(out)
    if not cache.is_file():
        raise InputError("no such response cache", path=cache, fix="pass --cache with the file the runs used")
    _check_out(out, cache, runs)
    archived: list[ArchivedRun] = []
    first_use: dict[str, tuple[str, str, str]] = {}  # key -> (run, fact, purpose), for messages
    verifier_facts: set[str] = set()
    scopes: set[str] = set()
    for run in runs:
        records = read_records(run / "records.jsonl")
        config = _read_json(run / STAMP_NAME)
        archived.append(ArchivedRun(str(run), records, config, _read_json(run / "metrics.json")))
        unkeyed = [
            (r["id"], c.get("purpose", "")) for r in records for c in r.get("llm_calls") or [] if not c.get("key")
        ]
        if unkeyed:
            raise InputError(
                f"{len(unkeyed)} model call(s) carry no cache key (the first: the {unkeyed[0][1]} "
                f"call of fact {unkeyed[0][0]}); records made before keys were recorded",
                path=run,
                fix="rerun the run with the same command and --fresh: the cache answers every call",
            )
        for record in records:
            for call in record.get("llm_calls") or []:
                first_use.setdefault(call["key"], (str(run), record["id"], call.get("purpose", "")))
                if call.get("purpose") == VERIFIER_PURPOSE:
                    verifier_facts.add(record["id"])
        model = (config or {}).get("model")
        if isinstance(model, Mapping) and model.get("backend") and model.get("model"):
            scopes.add(backend_identity(str(model["backend"]), str(model["model"]))[2] + ":")
    source = _open_cache(cache)
    try:
        return _pack(source, cache, out, archived, first_use, verifier_facts, scopes)
    except sqlite3.DatabaseError as error:
        raise InputError(
            f"cannot read the response cache ({error})",
            path=cache,
            fix="pass --cache with the responses.sqlite the runs used; a damaged one can be "
            "recovered with `sqlite3 FILE .recover`",
        ) from None
    finally:
        source.close()


def _open_cache(cache: Path) -> sqlite3.Connection:
    """The response cache read-only; one line when it is not SQLite or has no answers table."""
    try:
        source = _read_only(cache)
        usable = _has_table(source, "responses")
    except sqlite3.DatabaseError as error:
        raise InputError(
            f"not a response cache ({error})", path=cache, fix="pass --cache with the responses.sqlite the runs used"
        ) from None
    if not usable:
        source.close()
        raise InputError(
            "not a response cache: an SQLite file with no table 'responses'",
            path=cache,
            fix="pass --cache with the responses.sqlite the runs used",
        )
    return source


def _check_out(out: Path, cache: Path, runs: Sequence[Path]) -> None:
    """Refuse an ``--out`` that is a folder, or one of the files the archive is made from."""
    if out.is_dir():
        raise InputError(
            "is a directory", path=out, field="out", fix=f"pass a file for the archive, e.g. {out / 'runs.fhsa'}"
        )
    inputs = [(cache, "response cache"), (ledger_path(cache), "verdict ledger")]
    inputs += [
        (Path(f"{path}{suffix}"), f"{what}'s journal")
        for path, what in list(inputs)
        for suffix in ("-wal", "-shm", "-journal")
    ]
    inputs += [
        (run / name, f"run {run}'s {name}")
        for run in runs
        for name in ("records.jsonl", STAMP_NAME, "metrics.json", "run.lock")
    ]
    check_out(out, files=inputs, reads="the archive is made from")


def _pack(
    source: sqlite3.Connection,
    cache: Path,
    out: Path,
    archived: list[ArchivedRun],
    first_use: dict[str, tuple[str, str, str]],
    verifier_facts: set[str],
    scopes: set[str],
) -> dict[str, Any]:
    """The archive of ``archived`` from the cache ``source`` (``pack`` has checked both)."""
    columns, responses = _rows(source, "SELECT * FROM responses WHERE key IN ({marks})", list(first_use))
    found = {row[columns.index("key")] for row in responses}
    missing = [key for key in first_use if key not in found]
    if missing:
        run, fact, purpose = first_use[missing[0]]
        raise InputError(
            f"{len(missing)} answer(s) the runs used are not in this cache (the first: the {purpose} "
            f"call of fact {fact} in {run})",
            path=cache,
            fix="pass --cache with the response cache the runs were made with",
        )
    kinds = {(row[columns.index("kind")], row[columns.index("model")]) for row in responses}
    for kind, model in sorted(kinds):
        for purpose in UNRECORDED_PURPOSES:
            cursor = source.execute(
                "SELECT * FROM responses WHERE kind = ? AND model = ? AND purpose = ?", (kind, model, purpose)
            )
            responses.extend(row for row in cursor.fetchall() if row[columns.index("key")] not in found)
    keys = [row[columns.index("key")] for row in responses]
    unparsed_rows = (
        _rows(source, "SELECT * FROM unparsed WHERE key IN ({marks})", keys)
        if _has_table(source, "unparsed")
        else ([], [])
    )
    finish = (
        _rows(source, "SELECT key, reason FROM finish WHERE key IN ({marks})", keys)
        if _has_table(source, "finish")
        else ([], [])
    )
    unparsed = (unparsed_rows, finish)
    identities = (
        [
            row
            for row in source.execute("SELECT kind, model, provenance FROM identities").fetchall()
            if (row[0], row[1]) in kinds
        ]
        if _has_table(source, "identities")
        else []
    )
    verdicts = _ledger_rows(ledger_path(cache), {r["id"] for run in archived for r in run.records}, scopes)
    ledger_only = sorted({row[1] for row in verdicts[1]} - verifier_facts)
    return _write(out, source, archived, (columns, responses), unparsed, identities, verdicts, ledger_only, cache)


def _ledger_rows(path: Path, fact_ids: set[str], scopes: set[str]) -> tuple[list[str], list[tuple]]:
    """Ledger rows of these facts under the runs' models (scopes start with the model's name)."""
    if not path.is_file() or not fact_ids:
        return [], []
    ledger = _read_only(path)
    try:
        if not _has_table(ledger, "verdicts"):
            return [], []
        columns, rows = _rows(
            ledger,
            "SELECT scope, fact, hypothesis, candidate, entry FROM verdicts WHERE fact IN ({marks})",
            sorted(fact_ids),
        )
        return columns, [row for row in rows if any(str(row[0]).startswith(s) for s in scopes)]
    except sqlite3.DatabaseError as error:
        raise InputError(
            f"not a usable verdict ledger ({error})",
            path=path,
            fix="move it aside: the archive then holds no ledger rows, and a replay asks the "
            "archived verifier calls instead",
        ) from None
    finally:
        ledger.close()


def _write(
    out: Path,
    source: sqlite3.Connection,
    runs: list[ArchivedRun],
    responses,
    unparsed,
    identities,
    verdicts,
    ledger_only: list[str],
    cache: Path,
) -> dict[str, Any]:
    """Build the archive in a temporary file beside ``out`` and rename it into place (never half a file).

    The file is created as an ordinary one (0666 less the umask, e.g. 0644): an archive is meant to be shared.
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = str(out.parent / f".{out.name}.{uuid.uuid4().hex[:12]}.partial")
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    summary = {
        "archive": str(out),
        "runs": len(runs),
        "facts": sum(len(r.records) for r in runs),
        "answers": len(responses[1]),
        "verdicts": len(verdicts[1]),
        "ledger_only_facts": len(ledger_only),
    }
    provenance = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "fhs": _package_version(),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "command": sys.argv,
        "cache": str(cache.resolve()),
        "runs": [r.name for r in runs],
        **summary,
    }
    try:
        db = sqlite3.connect(temporary)
        with db:
            db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
            db.executemany(
                "INSERT INTO meta VALUES (?, ?)",
                [
                    ("format", ARCHIVE_FORMAT),
                    ("version", str(ARCHIVE_VERSION)),
                    ("id", uuid.uuid4().hex),
                    ("provenance", json.dumps(provenance, ensure_ascii=False)),
                ],
            )
            _copy_table(source, db, "responses", *responses)
            unparsed, finish = unparsed  # answers marked unparseable, and why generation stopped (where not "stop")
            db.execute("CREATE TABLE finish (key TEXT PRIMARY KEY, reason TEXT NOT NULL)")
            db.executemany("INSERT INTO finish VALUES (?, ?)", finish[1])
            db.execute("CREATE TABLE unparsed (key TEXT PRIMARY KEY, marked REAL NOT NULL)")
            if unparsed[1]:
                db.executemany(f"INSERT INTO unparsed ({', '.join(unparsed[0])}) VALUES (?, ?)", unparsed[1])
            db.execute(
                "CREATE TABLE identities (kind TEXT NOT NULL, model TEXT NOT NULL, provenance TEXT NOT NULL, "
                "PRIMARY KEY (kind, model, provenance))"
            )
            db.executemany("INSERT OR IGNORE INTO identities VALUES (?, ?, ?)", identities)
            db.execute(
                "CREATE TABLE verdicts (scope TEXT NOT NULL, fact TEXT NOT NULL, hypothesis TEXT NOT NULL, "
                "candidate TEXT NOT NULL, entry TEXT, PRIMARY KEY (scope, fact, hypothesis, candidate))"
            )
            db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)", verdicts[1])
            db.execute("CREATE TABLE ledger_only (fact TEXT PRIMARY KEY)")
            db.executemany("INSERT INTO ledger_only VALUES (?)", [(fact,) for fact in ledger_only])
            db.execute(
                "CREATE TABLE runs (name TEXT PRIMARY KEY, records BLOB NOT NULL, run_config TEXT, metrics TEXT)"
            )
            db.executemany(
                "INSERT INTO runs VALUES (?, ?, ?, ?)",
                [
                    (
                        run.name,
                        gzip.compress(
                            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in run.records).encode("utf-8"),
                            mtime=0,
                        ),
                        json.dumps(run.run_config) if run.run_config is not None else None,
                        json.dumps(run.metrics) if run.metrics is not None else None,
                    )
                    for run in runs
                ],
            )
        with db:  # the digest of everything above (fhs.llm.replay.content_digest), checked before any use
            digest = content_digest(db)
            db.execute("INSERT INTO meta VALUES ('digest', ?)", (digest,))
        db.execute("VACUUM")
        db.close()
        with open(temporary, "rb") as written:
            os.fsync(written.fileno())
        try:
            os.replace(temporary, out)
        except IsADirectoryError:  # made a directory since the check: name it, not the temporary file
            raise InputError("is a directory", path=out, field="out", fix="pass a file for the archive") from None
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    summary["bytes"] = out.stat().st_size
    summary["sha256"] = digest
    return summary


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("fhs")
    except PackageNotFoundError:
        return "unknown"


def archived_runs(
    archive: str | Path, *, limits: ReadLimits = LIMITS, where: Callable[[dict | None], bool] | None = None
) -> list[ArchivedRun]:
    """The runs an archive holds, records decompressed (open_archive has checked the JSON columns).

    ``where`` picks runs by their ``run_config`` before any records are decompressed; each
    run's records expand to at most ``limits.records_bytes``, or the archive is refused.
    """
    db = open_archive(archive)
    try:
        runs = []
        for name, blob, config, metrics in db.execute("SELECT name, records, run_config, metrics FROM runs"):
            config = json.loads(config) if config else None
            if where is None or where(config):
                runs.append(
                    ArchivedRun(
                        name,
                        _archived_records(blob, name, archive, limits.records_bytes),
                        config,
                        json.loads(metrics) if metrics else None,
                    )
                )
        return runs
    finally:
        db.close()


def _archived_records(blob: bytes, name: str, archive: str | Path, limit: int) -> list[dict]:
    """A run's records from their gzip'd JSON lines; one line naming the run when they are not."""
    try:
        records = [json.loads(line.decode("utf-8")) for line in io.BytesIO(gunzip(blob, limit)) if line.strip()]
    except TooLarge as error:
        raise InputError(
            f"not a usable fhs archive: the records of run {name[:200]} expand to {error}, the limit "
            f"on one run's records (a gzip bomb)",
            path=archive,
            fix="make the archive again",
        ) from None
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise InputError(
            f"not a usable fhs archive: the records of run {name[:200]} are not gzip'd JSON lines "
            f"({type(error).__name__})",
            path=archive,
            fix="make the archive again",
        ) from None
    if not all(isinstance(r, dict) and isinstance(r.get("id"), str) for r in records):
        raise InputError(
            f"not a usable fhs archive: the records of run {name[:200]} hold a line that is not a record",
            path=archive,
            fix="make the archive again",
        )
    return records


def archive_provenance(archive: str | Path) -> dict[str, Any]:
    """What the archive says about where it came from (for reading only: no path in it is ever used),
    and the digest of its content."""
    db = open_archive(archive)
    try:
        meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
    finally:
        db.close()
    try:
        provenance = json.loads(meta.get("provenance") or "{}")
    except (TypeError, ValueError, RecursionError):
        provenance = None
    return {
        "id": meta.get("id", ""),
        **(provenance if isinstance(provenance, dict) else {}),
        "sha256": archive_digest(archive),
    }


class ReplayLedger(Ledger):
    """A replay's verdict ledger: its own file, plus the archived rows of ledger-only facts.

    Verdicts the replayed calls produce are recorded in ``scratch`` and found by
    later runs, in the order the runs replay; a fact the GPU run judged only from
    its ledger (no archived verifier call) gets the archived rows.
    """

    def __init__(
        self, scratch: SqliteLedger, archived: Mapping[tuple[str, str, str, str], Entry], ledger_only: set[str]
    ) -> None:
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
    """The ledger a replay of ``archive`` uses, kept beside ``cache_path`` so chapters share it.

    Its folder is named after the digest of the archive's content as this process computed it
    (``replay-<digest>``), never after anything the archive says: another archive, or this one
    changed, gets a folder of its own, and no archive can reach the cache's own ledger.
    """
    db = open_archive(archive)
    try:
        ledger_only = {row[0] for row in db.execute("SELECT fact FROM ledger_only")}
        archived: dict[tuple[str, str, str, str], Entry] = {}
        if ledger_only:
            _, rows = _rows(
                db,
                "SELECT scope, fact, hypothesis, candidate, entry FROM verdicts WHERE fact IN ({marks})",
                sorted(ledger_only),
            )
            archived = {tuple(row[:4]): _archived_entry(row[4], row[1], archive) for row in rows}
    finally:
        db.close()
    base = Path(cache_path).parent if cache_path else Path(tempfile.gettempdir())
    folder = base / f"replay-{archive_digest(archive)[:32]}"
    return ReplayLedger(SqliteLedger(folder / "verdicts.sqlite"), archived, ledger_only)


def _archived_entry(text: Any, fact: str, archive: str | Path) -> Entry:
    """An archived verdict: null, or a JSON object of dimension -> verdict word."""
    if text is None:
        return None
    try:
        entry = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        entry = ...
    if not isinstance(entry, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in entry.items()):
        raise InputError(
            f"not a usable fhs archive: a verdict of fact {fact[:200]} in table 'verdicts' is not an "
            f"object of dimension -> verdict",
            path=archive,
            fix="make the archive again",
        )
    return entry


def replay_failures(result: Mapping[str, Any], archive: str | Path, out: str | Path) -> InputError | None:
    """The error for a replayed run (None when it is sound): facts that needed calls the archive lacks,
    or results that differ from those the archive carries for the same run (:func:`replay_mismatch`)."""
    reasons = (result.get("failed_facts") or {}).get("reasons") or {}
    missing = {fact: why for fact, why in reasons.items() if str(why).startswith(REPLAY_PREFIX)}
    if not missing:
        return replay_mismatch(result, archive, out)
    fact, why = next(iter(missing.items()))
    return InputError(
        f"{len(missing)} fact(s) of the run replayed into {out} need calls the archive does not hold "
        f"(the first: fact {fact}, {why[len(REPLAY_PREFIX) :]})",
        path=archive,
        fix="archive the runs that made those calls too (and their chapters' runs before them), "
        "or rerun against a server without --replay",
    )


# what a replay may legitimately change in a stamp: where the inputs were read, and the server URLs
# the model was asked at (a replay need not name the GPU box's; the archive's identities decide)
_NOT_COMPARED = ("sources",)


def _comparable(stamp: Mapping[str, Any]) -> dict[str, Any]:
    settled = {key: value for key, value in stamp.items() if key not in _NOT_COMPARED}
    inputs = settled.get("inputs")
    if isinstance(inputs, Mapping):
        settled["inputs"] = {key: value for key, value in inputs.items() if key != "model"}
    return settled


# what each fact's record concluded: the fields its metrics are computed from
OUTCOME_FIELDS = ("rank", "selected", "correct")


def replay_mismatch(result: Mapping[str, Any], archive: str | Path, out: str | Path) -> InputError | None:
    """The error for a replayed run whose results differ from the archived run's with the same settings.

    The metrics first: over the same facts (and refused-facts policy) the archive's ``metrics.json``
    is the reference; over a part of them, the metrics of the archived records of those facts. Then
    each fact's outcome (:data:`OUTCOME_FIELDS`), which a tampered answer may change while the
    means stay the same. An archived run of other settings checks nothing (a warning says so).
    """
    stamp = result.get("config") if isinstance(result.get("config"), Mapping) else None
    if stamp is None:
        try:
            stamp = json.loads((Path(out) / STAMP_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
    records_file = Path(out) / "records.jsonl"
    if not records_file.is_file():
        return None
    ids = list(dict.fromkeys(r["id"] for r in read_records(records_file)))
    policy = result.get("refused", MISS)
    same = archived_runs(
        archive, where=lambda config: isinstance(config, Mapping) and _comparable(config) == _comparable(stamp)
    )
    for run in same:
        by_id = {r["id"]: r for r in run.records}
        if not set(ids) <= set(by_id):
            continue
        whole = (
            set(ids) == set(by_id)
            and isinstance(run.metrics, Mapping)
            and run.metrics.get("refused", MISS) == policy
            and run.metrics.get("n_facts") == result.get("n_facts")
        )
        expected = (
            run.metrics if whole and run.metrics is not None else metrics([by_id[i] for i in ids], refused=policy)
        )
        where = "metrics.json" if whole else f"records of those {len(ids)} facts"
        fix = (
            "do not use this archive's numbers: get the archive again from whoever published it, or rerun "
            "against a server without --replay"
        )
        for name, archived_value, rebuilt in _differences(expected, result):
            return InputError(
                f"the replay of run {run.name[:200]} rebuilt {name} = {_shown(rebuilt)} where the "
                f"archive's {where} says {_shown(archived_value)} (replayed into {out}): the archive's "
                f"answers do not give its own results",
                path=archive,
                fix=fix,
            )
        for record in read_records(records_file):
            archived_record = by_id[record["id"]]
            for name in OUTCOME_FIELDS:
                if record.get(name) != archived_record.get(name):
                    return InputError(
                        f"the replay of run {run.name[:200]} rebuilt fact {record['id'][:200]}'s "
                        f"{name} = {_shown(record.get(name))} where the archive's record says "
                        f"{_shown(archived_record.get(name))} (replayed into {out}): the archive's "
                        f"answers do not give its own results",
                        path=archive,
                        fix=fix,
                    )
        return None
    warn(
        f"{archive} holds no run with the settings of the run replayed into {out}, so its metrics are not "
        f"compared with archived ones"
    )
    return None


def _differences(expected: Mapping[str, Any], rebuilt: Mapping[str, Any], prefix: str = ""):
    """(name, archived value, rebuilt value) of every metric ``fhs.run.evaluate.metrics`` computes that differs."""
    for name in metrics([]):
        yield from _differ(expected.get(name), rebuilt.get(name), prefix + name)


def _differ(expected: Any, rebuilt: Any, name: str):
    if isinstance(expected, Mapping) or isinstance(rebuilt, Mapping):
        expected = expected if isinstance(expected, Mapping) else {}
        rebuilt = rebuilt if isinstance(rebuilt, Mapping) else {}
        for key in sorted(set(expected) | set(rebuilt), key=str):
            yield from _differ(expected.get(key), rebuilt.get(key), f"{name}.{key}")
        return
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (expected, rebuilt))
    if numbers and math.isclose(expected, rebuilt, rel_tol=1e-9, abs_tol=1e-12):
        return
    if not numbers and expected == rebuilt:
        return
    yield name, expected, rebuilt


def _shown(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)[:80]
