"""The persistent response cache: model answers in one SQLite file, and the LLM wrapper that uses it."""

from __future__ import annotations

import errno
import functools
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.llm.contract import BackendError, CallStats, Request, Response, cache_key
from fhs.llm.jsonout import MAX_REPLY_CHARS

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,
    text TEXT NOT NULL,
    tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL,
    seconds REAL NOT NULL,
    created REAL NOT NULL
)
"""
_COLUMNS = ("key", "kind", "model", "purpose", "text", "tokens_in", "tokens_out", "seconds", "created")
# Answers a stage could not parse, and why generation stopped where the backend said so, are
# kept apart from ``responses``: older readers of the file see the same table as before (an
# added column would break their positional inserts), and an older file gains the tables.
_UNPARSED_SQL = "CREATE TABLE IF NOT EXISTS unparsed (key TEXT PRIMARY KEY, marked REAL NOT NULL)"
_FINISH_SQL = "CREATE TABLE IF NOT EXISTS finish (key TEXT PRIMARY KEY, reason TEXT NOT NULL)"
# Every (kind, model, provenance) that stored answers here: the parts of a key that are not the
# request, so that an archive of this cache (fhs/run/archive.py) can be replayed without the server.
_IDENTITIES_SQL = (
    "CREATE TABLE IF NOT EXISTS identities (kind TEXT NOT NULL, model TEXT NOT NULL, "
    "provenance TEXT NOT NULL, PRIMARY KEY (kind, model, provenance))"
)


@dataclass(frozen=True)
class CacheStats:
    """What the cache holds: the cost of every distinct call ever made, for the cost chapter."""

    entries: int
    tokens_in: int
    tokens_out: int
    seconds: float
    by_purpose: dict[str, dict[str, float]]
    by_model: dict[str, int]


def cache_error(
    error: sqlite3.DatabaseError, path: Path, what: str = "response cache", lost: str = "its answers are asked again"
) -> Exception:
    """What an SQLite error on a cache file means, as one line with the right advice: a read-only
    file or folder, a damaged file, a full disk (an OSError), or another process's lock."""
    text = str(error).lower()
    if "full" in text:
        return OSError(errno.ENOSPC, f"No space left on device (writing the {what})", str(path))
    if "readonly" in text or "read-only" in text or "unable to open" in text or "permission" in text:
        folder = path.parent
        where = (
            f"its folder {folder} is"
            if not os.access(folder, os.W_OK)
            else "the file is"
            if path.exists() and not os.access(path, os.W_OK)
            else "the file or its folder is"
        )
        return InputError(
            f"cannot write the {what}: {where} read-only ({error})",
            path=path,
            fix="make it writable, or pass another --cache; a copy of this file keeps what it holds",
        )
    if "locked" in text or "busy" in text:
        return InputError(
            f"the {what} is busy ({error}): another process is writing it",
            path=path,
            fix="wait for the other run to finish, or pass another --cache",
        )
    if "malformed" in text or "corrupt" in text:
        return InputError(
            f"the {what} is damaged ({error})",
            path=path,
            fix=f"move it aside to start a new one ({lost}), or keep what it holds with "
            f"`sqlite3 FILE .recover | sqlite3 NEW.sqlite` and use NEW.sqlite in its place",
        )
    return InputError(f"not a usable {what} ({error})", path=path, fix="move the file aside, or pass another --cache")


def _guarded(method: Callable) -> Callable:
    """The method with every SQLite error turned into :func:`cache_error`'s one line."""

    @functools.wraps(method)
    def guarded(self: ResponseCache, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as error:
            raise cache_error(error, self.path) from None

    return guarded


class ResponseCache:
    """Model answers in one SQLite file, keyed by :func:`cache_key`.

    WAL journaling and one commit per stored batch: a killed run loses at most
    the batch in flight and the next run resumes from the rest. Meant for one
    writer at a time. An SQLite error (a damaged page, a read-only folder, a full
    disk) is one line naming the file and what to do (:func:`cache_error`).
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # one connection, shared by the threads of a run
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA_SQL)
            self._db.execute(_UNPARSED_SQL)
            self._db.execute(_FINISH_SQL)
            self._db.execute(_IDENTITIES_SQL)
            self._db.commit()
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
        except sqlite3.DatabaseError as error:
            raise cache_error(error, self.path) from None
        missing = [name for name in _COLUMNS if name not in columns]
        if missing:
            self._db.close()
            raise InputError(
                f"a response cache of another layout (its table 'responses' has no column {', '.join(missing)})",
                path=self.path,
                fix="delete the file or pass another --cache; it was not written by this version",
            )

    @_guarded
    def get_many(self, keys: Sequence[str], *, unparsed: bool = True) -> dict[str, Response]:
        """Stored answers by key; ``unparsed=False`` leaves out those marked unparseable."""
        with self._lock:
            return self._get_many(keys, unparsed)

    def _get_many(self, keys: Sequence[str], unparsed: bool = True) -> dict[str, Response]:
        found: dict[str, Response] = {}
        unique = list(dict.fromkeys(keys))
        skip = "" if unparsed else " AND key NOT IN (SELECT key FROM unparsed)"
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, text, tokens_in, tokens_out, seconds, model, "
                f"(SELECT reason FROM finish WHERE finish.key = responses.key) "
                f"FROM responses WHERE key IN ({marks}){skip}",
                chunk,
            )
            for key, text, tokens_in, tokens_out, seconds, model, reason in rows:
                found[key] = Response(
                    text=text,
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                    seconds=seconds,
                    cached=True,
                    model=model,
                    finish_reason=reason,
                )
        return found

    @_guarded
    def put_many(self, entries: Sequence[tuple[str, str, str, str, Response]]) -> None:
        """Store (key, kind, model, purpose, response) rows in one transaction.

        An answer cut at ``max_tokens`` (``finish_reason == "length"``) or longer
        than any stage parses (``MAX_REPLY_CHARS``) is stored already marked
        unparsed: no stage can use it, so the next run asks again. Of a longer one
        only its first ``MAX_REPLY_CHARS + 1`` characters are kept.
        """
        now = time.time()
        with self._lock, self._db:
            self._db.executemany(
                f"INSERT OR REPLACE INTO responses ({', '.join(_COLUMNS)}) VALUES ({', '.join('?' * len(_COLUMNS))})",
                [
                    (key, kind, model, purpose, _kept_text(r.text), r.tokens_in, r.tokens_out, r.seconds, now)
                    for key, kind, model, purpose, r in entries
                ],
            )
            # a new answer is innocent until its stage says otherwise
            self._db.executemany("DELETE FROM unparsed WHERE key = ?", [(e[0],) for e in entries])
            self._db.executemany("DELETE FROM finish WHERE key = ?", [(e[0],) for e in entries])
            self._db.executemany(
                "INSERT INTO finish VALUES (?, ?)", [(e[0], e[4].finish_reason) for e in entries if e[4].finish_reason]
            )
            self._db.executemany("INSERT INTO unparsed VALUES (?, ?)", [(e[0], now) for e in entries if unusable(e[4])])

    @_guarded
    def note_identity(self, kind: str, model: str, provenance: str) -> None:
        """Remember that answers under this kind, model and provenance are stored here."""
        with self._lock, self._db:
            self._db.execute("INSERT OR IGNORE INTO identities VALUES (?, ?, ?)", (kind, model, provenance))

    @_guarded
    def mark_unparsed(self, key: str) -> None:
        """Remember that the answer under ``key`` could not be parsed by the stage that asked."""
        with self._lock, self._db:
            self._db.execute("INSERT OR REPLACE INTO unparsed VALUES (?, ?)", (key, time.time()))

    @_guarded
    def unparsed_count(self) -> int:
        with self._lock:
            return int(
                self._db.execute("SELECT COUNT(*) FROM unparsed WHERE key IN (SELECT key FROM responses)").fetchone()[0]
            )

    @_guarded
    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def __bool__(self) -> bool:  # never count the table (a full scan) to test a cache's presence
        return True

    @_guarded
    def stats(self) -> CacheStats:
        total = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(tokens_in),0), COALESCE(SUM(tokens_out),0), "
            "COALESCE(SUM(seconds),0) FROM responses"
        ).fetchone()
        by_purpose = {
            purpose or "other": {"entries": n, "tokens_in": tin, "tokens_out": tout, "seconds": sec}
            for purpose, n, tin, tout, sec in self._db.execute(
                "SELECT purpose, COUNT(*), SUM(tokens_in), SUM(tokens_out), SUM(seconds) "
                "FROM responses GROUP BY purpose ORDER BY purpose"
            )
        }
        by_model = dict(
            self._db.execute("SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY model").fetchall()
        )
        return CacheStats(
            entries=int(total[0]),
            tokens_in=int(total[1]),
            tokens_out=int(total[2]),
            seconds=float(total[3]),
            by_purpose=by_purpose,
            by_model=by_model,
        )

    def close(self) -> None:
        self._db.close()


def _kept_text(text: str) -> str:
    """The text stored for an answer: whole, or for one longer than any stage parses, only as much as
    still says so (it is stored marked unparsed either way; a cache must not grow by megabytes an answer)."""
    return text if len(text or "") <= MAX_REPLY_CHARS else text[: MAX_REPLY_CHARS + 1]


def unusable(response: Response) -> bool:
    """An answer no stage can take: cut at max_tokens, or longer than any reply is parsed."""
    return response.cut_short or len(response.text or "") > MAX_REPLY_CHARS


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class CachedLLM:
    """Any backend behind the persistent cache: a repeated request never reaches the model.

    Answers a stage marked unparseable (``mark_unparsed``), and those no stage
    can use (cut at max_tokens, or over ``MAX_REPLY_CHARS``), count as misses
    unless ``replay_unparsed``. Misses go to the backend in batches of ``batch_size`` (each batch committed
    as it returns); identical requests within one call are sent once. Hits come
    back with ``cached=True``. ``stats`` tallies every response served.
    Single flight: a request identical to one another thread is asking right
    now waits for that answer instead of asking again, so concurrent callers
    send what a sequential run would (the later one is served, as from the cache).
    """

    def __init__(
        self,
        backend: Any,
        cache: ResponseCache,
        *,
        batch_size: int = 64,
        stats: CallStats | None = None,
        replay_unparsed: bool = False,
    ) -> None:
        self.backend = backend
        self.cache = cache
        self.batch_size = max(1, batch_size)
        self.stats = stats if stats is not None else CallStats()
        self._stats_lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}  # keys being asked of the backend now (single flight)
        self._flights_lock = threading.Lock()
        self.kind = getattr(backend, "kind", type(backend).__name__)
        self.model = getattr(backend, "model", getattr(backend, "name", ""))
        self.name = getattr(backend, "name", f"{self.kind}:{self.model}")
        self.replay_unparsed = replay_unparsed
        # Where the answers come from, beyond kind and model: a server backend's URLs, so that
        # another server's answers are never replayed as this one's (in-process engines: none).
        self.provenance = str(getattr(backend, "provenance", "") or "")
        self._identity_noted = False

    def key(self, request: Request) -> str:
        return cache_key(self.kind, self.model, request, provenance=self.provenance)

    def mark_unparsed(self, request: Request) -> None:
        """The stage could not use this answer: the next run asks again (unless ``replay_unparsed``)."""
        self.cache.mark_unparsed(self.key(request))

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        if not self._identity_noted:  # also for a run served wholly from the cache: it may be archived
            self.cache.note_identity(self.kind, self.model, self.provenance)
            self._identity_noted = True
        served = self._serve(requests)
        with self._stats_lock:
            for request, response in zip(requests, served):
                self.stats.add(request, response)
        return served

    def _serve(self, requests: Sequence[Request]) -> list[Response]:
        keys = [self.key(r) for r in requests]
        found = self.cache.get_many(keys, unparsed=self.replay_unparsed)
        first_index: dict[str, int] = {}
        for index, key in enumerate(keys):
            if key not in found and key not in first_index:
                first_index[key] = index
        lead, follow = self._claim(list(first_index))
        made: dict[str, Response] = {}  # asked of the backend by this call
        try:
            if lead:  # answered and stored by another caller between the lookup and the claim
                found.update(self.cache.get_many(list(lead), unparsed=self.replay_unparsed))
            asked = [k for k in lead if k not in found]
            for chunk in _chunks(asked, self.batch_size):
                batch = [requests[first_index[k]] for k in chunk]
                answers = self.backend.complete(batch)
                if len(answers) != len(batch):
                    raise BackendError(f"{self.name} returned {len(answers)} answers for {len(batch)} requests")
                self.cache.put_many(
                    [(k, self.kind, self.model, r.purpose, a) for k, r, a in zip(chunk, batch, answers)]
                )
                made.update((k, replace(a, cached=False)) for k, a in zip(chunk, answers))
                self._land({k: lead[k] for k in chunk}, made)
        finally:
            self._land(lead, {**found, **made})  # a key with no answer failed: its followers ask again
        for key, flight in follow.items():
            answer = flight.wait()
            # served as the cache would have served it; if the other caller's request failed, ask ourselves
            found[key] = (
                replace(answer, cached=True) if answer is not None else self._serve([requests[first_index[key]]])[0]
            )
        results = []
        for index, key in enumerate(keys):
            answer = made.get(key) or found[key]
            results.append(answer if key not in made or index == first_index[key] else replace(answer, cached=True))
        return results

    def _claim(self, keys: Sequence[str]) -> tuple[dict[str, _Flight], dict[str, _Flight]]:
        """Single flight: the keys this caller asks the backend for, and those another caller is asking now."""
        lead: dict[str, _Flight] = {}
        follow: dict[str, _Flight] = {}
        with self._flights_lock:
            for key in keys:
                if key in self._flights:
                    follow[key] = self._flights[key]
                else:
                    lead[key] = self._flights[key] = _Flight()
        return lead, follow

    def _land(self, flights: Mapping[str, _Flight], answers: Mapping[str, Response]) -> None:
        """Hand this caller's flights their answers (none: the request failed) and retire them."""
        with self._flights_lock:
            mine = [(key, flight) for key, flight in flights.items() if self._flights.get(key) is flight]
            for key, _ in mine:
                del self._flights[key]
        for key, flight in mine:
            flight.land(answers.get(key))


class _Flight:
    """One request being asked of the backend; identical requests wait for its answer instead of asking too."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._answer: Response | None = None

    def land(self, answer: Response | None) -> None:
        self._answer = answer
        self._done.set()

    def wait(self) -> Response | None:
        self._done.wait()
        return self._answer


# --- the factory --------------------------------------------------------------------------
