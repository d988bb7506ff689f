"""A model that only replays: answers from a run archive, never a request to a server.

``fhs archive`` (``fhs/run/archive.py``) packs the answers a GPU run used into
one SQLite file whose ``responses`` table is the response cache's. This
backend serves a rebuild from it: each request's cache key is looked up, and a
request the archive does not hold is refused (:class:`ReplayMissing`), which
fails only its own fact and names the stage; the caller turns those into one
error. Nothing is written to the archive, so it may be read-only.

An archive is a file from a stranger. :func:`open_archive` is the one way in:
it refuses a file of another format or version, one missing a table or column
a reader uses, one whose values are not of their column's type, and one whose
content does not match the SHA-256 digest it carries (:func:`content_digest`:
every table's declaration and rows, in a fixed order, the digest row aside).
Nothing in an archive names a path: the replay's own files live under a folder
named after the digest this module computed (``fhs.run.archive.replay_ledger``).

Keys include who answered (kind, model, server URLs: ``fhs.llm.contract.cache_key``).
The archive lists every such identity its cache held; a replay tries the run's
own identity first, then the archived ones of the same kind and model, so a
laptop's rebuild finds a GPU box's answers without naming that box's URL.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fhs.core.errors import InputError
from fhs.llm.contract import CallStats, Request, RequestRefused, Response, cache_key

ARCHIVE_FORMAT = "fhs-archive"
# 2: the meta table carries the digest of the content (content_digest); 1 carried none and is refused
ARCHIVE_VERSION = 2
REPLAY_PREFIX = "replay: "  # how a refused replay call begins, so the run can tell it from a server's refusal
# Every table an archive holds and the columns its readers use (the responses table is the cache's own)
TABLES: dict[str, tuple[str, ...]] = {
    "meta": ("name", "value"),
    "responses": ("key", "kind", "model", "purpose", "text", "tokens_in", "tokens_out", "seconds"),
    "finish": ("key", "reason"),
    "unparsed": ("key", "marked"),
    "identities": ("kind", "model", "provenance"),
    "verdicts": ("scope", "fact", "hypothesis", "candidate", "entry"),
    "ledger_only": ("fact",),
    "runs": ("name", "records", "run_config", "metrics"),
}
_REMAKE = "make the archive again with `fhs archive`, or get it again from whoever published it"
_VERIFIED: dict[tuple, str] = {}  # (path, device, inode, size, mtime) -> its digest, checked once per process
_VERIFIED_LOCK = threading.Lock()


class ReplayMissing(RequestRefused):
    """A request the archive holds no answer for: replay never asks a server instead."""


@dataclass(frozen=True)
class Identity:
    kind: str
    model: str
    provenance: str


def open_archive(path: str | Path) -> sqlite3.Connection:
    """The archive opened read-only, once its format, tables, values and digest are checked (once a process).

    Anything amiss is one InputError naming the file and what is wrong with it.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such archive", path=path, fix="make one with `fhs archive RUN_DIR... --out FILE`")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        row = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    except sqlite3.DatabaseError as error:
        raise InputError(
            f"not an fhs archive ({error})", path=path, fix="pass a file written by `fhs archive`"
        ) from None
    if not row or row[0] != ARCHIVE_FORMAT:
        db.close()
        raise InputError("not an fhs archive", path=path, fix="pass a file written by `fhs archive`")
    try:
        _verified(db, path)
    except sqlite3.DatabaseError as error:
        db.close()
        raise InputError(f"a damaged fhs archive ({error})", path=path, fix=_REMAKE) from None
    except BaseException:
        db.close()
        raise
    return db


def archive_digest(path: str | Path) -> str:
    """The SHA-256 of the archive's content, as this process computed and checked it."""
    open_archive(path).close()
    return _VERIFIED[_identity(Path(path))]


def _identity(path: Path) -> tuple:
    stat = path.stat()
    return (str(path.resolve()), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _verified(db: sqlite3.Connection, path: Path) -> str:
    """Check the archive once per process and file version; its digest."""
    identity = _identity(path)
    with _VERIFIED_LOCK:
        if identity in _VERIFIED:
            return _VERIFIED[identity]
    meta = dict(db.execute("SELECT name, value FROM meta").fetchall())
    version = meta.get("version")
    if version != str(ARCHIVE_VERSION):
        older = version is not None and str(version).isdigit() and int(version) < ARCHIVE_VERSION
        raise InputError(
            f"an fhs archive of format version {str(version)[:20]!r}, not {ARCHIVE_VERSION}"
            + (" (it carries no digest of its content, so it cannot be checked)" if older else ""),
            path=path,
            fix="make it again with this version's `fhs archive`" if older else _REMAKE,
        )
    _check_tables(db, path)
    carried = meta.get("digest")
    if not isinstance(carried, str) or not carried:
        raise InputError("the archive carries no digest of its content", path=path, fix=_REMAKE)
    computed = content_digest(db)
    if computed != carried:
        raise InputError(
            f"the archive's content does not match the digest it carries (sha256 {carried[:16]}..., "
            f"computed {computed[:16]}...): it was changed after `fhs archive` wrote it",
            path=path,
            fix=_REMAKE,
        )
    _check_values(db, path)
    with _VERIFIED_LOCK:
        _VERIFIED[identity] = computed
    return computed


def _check_tables(db: sqlite3.Connection, path: Path) -> None:
    for table, wanted in TABLES.items():
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        if not columns:
            raise InputError(f"not a usable fhs archive: it has no table '{table}'", path=path, fix=_REMAKE)
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise InputError(
                f"not a usable fhs archive: its table '{table}' has no column {', '.join(missing)}",
                path=path,
                fix=_REMAKE,
            )


def _check_values(db: sqlite3.Connection, path: Path) -> None:
    """Every value a replay reads has its column's type: one line naming the table, row and column if not."""
    checks = {
        "key": "text",
        "kind": "text",
        "model": "text",
        "purpose": "text",
        "text": "text",
        "tokens_in": "count",
        "tokens_out": "count",
        "seconds": "number",
    }
    condition = " OR ".join(_wrong(column, kind) for column, kind in checks.items())
    row = db.execute(f"SELECT {', '.join(checks)} FROM responses WHERE {condition} LIMIT 1").fetchone()
    if row is not None:
        column, kind = next((c, k) for (c, k), value in zip(checks.items(), row) if not _fits(value, k))
        raise InputError(
            f"not a usable fhs archive: in table 'responses', the answer under key {str(row[0])[:24]!r} "
            f"has {column} = {str(row[list(checks).index(column)])[:24]!r}, not {_KINDS[kind]}",
            path=path,
            fix=_REMAKE,
        )
    for table, columns in (
        ("identities", ("kind", "model", "provenance")),
        ("finish", ("key", "reason")),
        ("ledger_only", ("fact",)),
        ("verdicts", ("scope", "fact", "hypothesis", "candidate")),
    ):
        condition = " OR ".join(_wrong(column, "text") for column in columns)
        if db.execute(f"SELECT 1 FROM {table} WHERE {condition} LIMIT 1").fetchone() is not None:
            raise InputError(
                f"not a usable fhs archive: table '{table}' holds a value that is not text", path=path, fix=_REMAKE
            )
    for name, records, config, metrics in db.execute("SELECT name, records, run_config, metrics FROM runs"):
        if not isinstance(name, str) or not isinstance(records, bytes):
            raise InputError(
                "not a usable fhs archive: table 'runs' holds a run without a name or records", path=path, fix=_REMAKE
            )
        for column, text in (("run_config", config), ("metrics", metrics)):
            if text is None:
                continue
            try:
                value = json.loads(text) if isinstance(text, str) else None
            except (ValueError, RecursionError):
                value = None
            if not isinstance(value, dict):
                raise InputError(
                    f"not a usable fhs archive: the {column} of run {name[:200]} is not a JSON object",
                    path=path,
                    fix=_REMAKE,
                )


_KINDS = {"text": "text", "count": "a whole number of at least 0", "number": "a number"}


def _wrong(column: str, kind: str) -> str:
    if kind == "count":
        return f"typeof({column}) != 'integer' OR {column} < 0"
    if kind == "number":
        return f"typeof({column}) NOT IN ('integer', 'real')"
    return f"typeof({column}) != 'text'"


def _fits(value, kind: str) -> bool:
    if kind == "count":
        return isinstance(value, int) and value >= 0
    if kind == "number":
        return isinstance(value, (int, float))
    return isinstance(value, str)


def content_digest(db: sqlite3.Connection) -> str:
    """SHA-256 over every table's declaration and rows (sorted), with each value's type; the meta row
    ``digest`` itself aside. Rows are read in value order, so a copy, ``VACUUM`` or another SQLite
    version gives the same digest, and any changed, added or removed value gives another."""
    digest = hashlib.sha256(b"fhs-archive-content-1\n")
    tables = db.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' ORDER BY name").fetchall()
    for name, sql in tables:
        digest.update(_framed(b"T", name) + _framed(b"D", sql or ""))
        quoted = '"' + name.replace('"', '""') + '"'
        width = len(db.execute(f"SELECT * FROM {quoted} LIMIT 0").description)
        where = " WHERE name != 'digest'" if name == "meta" else ""
        order = ", ".join(str(i + 1) for i in range(width))
        for row in db.execute(f"SELECT * FROM {quoted}{where} ORDER BY {order}"):
            digest.update(b"R" + b"".join(_value(value) for value in row))
    return digest.hexdigest()


def _framed(tag: bytes, text: str) -> bytes:
    data = text.encode("utf-8", "surrogatepass")
    return tag + str(len(data)).encode() + b":" + data


def _value(value) -> bytes:
    if value is None:
        return b"N"
    if isinstance(value, int):
        return b"I" + str(value).encode() + b";"
    if isinstance(value, float):
        return b"F" + value.hex().encode() + b";"
    if isinstance(value, bytes):
        return b"B" + str(len(value)).encode() + b":" + value
    return _framed(b"S", str(value))


class ReplayLLM:
    """The ``LLM`` protocol over an archive: cached answers only, ``cached=True`` on every one."""

    def __init__(self, archive: str | Path, *, kind: str, model: str, name: str, provenance: str = "") -> None:
        self.archive = Path(archive)
        self._db = open_archive(self.archive)
        self._lock = threading.Lock()
        self.kind, self.model, self.name, self.provenance = kind, model, name, provenance
        own = Identity(kind, model, provenance)
        archived = [
            Identity(*row)
            for row in self._db.execute(
                "SELECT kind, model, provenance FROM identities ORDER BY kind, model, provenance"
            )
        ]
        if archived and not any((i.kind, i.model) == (kind, model) for i in archived):
            held = ", ".join(sorted({f"{i.kind}:{i.model}" for i in archived}))
            raise InputError(
                f"the archive holds answers of {held}, not of {kind}:{model}",
                path=self.archive,
                fix="replay with the archived run's --backend, --model, --schema-transport and --thinking",
            )
        # the same model and request kind from another server URL: the archive's own answers
        self._identities = [own, *(i for i in archived if i != own and (i.kind, i.model) == (kind, model))]
        self.stats = CallStats()
        self.context_tokens = _archived_context(self._db)
        self._has_finish = (
            self._db.execute(  # archives written before finish reasons were kept have none
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'finish'"
            ).fetchone()
            is not None
        )

    def _find(self, request: Request) -> tuple[str, Response] | None:
        for identity in self._identities:
            key = cache_key(identity.kind, identity.model, request, provenance=identity.provenance)
            with self._lock:
                cursor = self._db.execute("SELECT * FROM responses WHERE key = ?", (key,))
                row = cursor.fetchone()
                description = cursor.description
                reason = (
                    self._db.execute("SELECT reason FROM finish WHERE key = ?", (key,)).fetchone()
                    if self._has_finish
                    else None
                )
            if row is not None:
                entry = dict(zip((c[0] for c in description), row))
                finish = reason[0] if reason else None
                return key, Response(
                    text=entry["text"],
                    tokens_in=entry["tokens_in"],
                    tokens_out=entry["tokens_out"],
                    seconds=entry["seconds"],
                    cached=True,
                    model=entry["model"],
                    finish_reason=finish if isinstance(finish, str) else None,
                )
        return None

    def key(self, request: Request) -> str:
        """The key the archived answer is stored under (the run's own key when there is none)."""
        found = self._find(request)
        own = self._identities[0]
        return found[0] if found else cache_key(own.kind, own.model, request, provenance=own.provenance)

    def mark_unparsed(self, request: Request) -> None:
        """Nothing to remember: a replay never asks again."""

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        served = []
        for request in requests:
            found = self._find(request)
            if found is None:
                raise ReplayMissing(
                    f"{REPLAY_PREFIX}the {request.purpose or 'model'} call (sample {request.sample_index}, attempt "
                    f"{request.attempt}) is not in the archive {self.archive}: a replay never asks a server"
                )
            served.append(found[1])
        with self._lock:
            for request, response in zip(requests, served):
                self.stats.add(request, response)
        return served

    def close(self) -> None:
        self._db.close()


def _archived_context(db) -> int | None:
    """The context length the archived runs fitted their prompts to (fhs.llm.server_info.context_window
    reads it), so a replay renders the same prompts as the GPU run; None unless the runs agree on one."""
    lengths = set()
    for (config,) in db.execute("SELECT run_config FROM runs WHERE run_config IS NOT NULL"):
        settings = json.loads(config).get("fhs")  # open_archive checked that each config is a JSON object
        tokens = settings.get("context_tokens") if isinstance(settings, dict) else None
        if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
            lengths.add(tokens)
    return lengths.pop() if len(lengths) == 1 else None
