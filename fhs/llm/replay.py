"""A model that only replays: answers from a run archive, never a request to a server.

``fhs archive`` (``fhs/run/archive.py``) packs the answers a GPU run used into
one SQLite file whose ``responses`` table is the response cache's. This
backend serves a rebuild from it: each request's cache key is looked up, and a
request the archive does not hold is refused (:class:`ReplayMissing`), which
fails only its own fact and names the stage; the caller turns those into one
error. Nothing is written to the archive, so it may be read-only.

Keys include who answered (kind, model, server URLs: ``fhs.llm.contract.cache_key``).
The archive lists every such identity its cache held; a replay tries the run's
own identity first, then the archived ones of the same kind and model, so a
laptop's rebuild finds a GPU box's answers without naming that box's URL.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fhs.core.errors import InputError
from fhs.llm.contract import CallStats, Request, RequestRefused, Response, cache_key

ARCHIVE_FORMAT = "fhs-archive"
REPLAY_PREFIX = "replay: "  # how a refused replay call begins, so the run can tell it from a server's refusal


class ReplayMissing(RequestRefused):
    """A request the archive holds no answer for: replay never asks a server instead."""


@dataclass(frozen=True)
class Identity:
    kind: str
    model: str
    provenance: str


def open_archive(path: str | Path) -> sqlite3.Connection:
    """The archive opened read-only; an InputError when it is missing or is not an fhs archive."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such archive", path=path, fix="make one with `fhs archive RUN_DIR... --out FILE`")
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)
        row = db.execute("SELECT value FROM meta WHERE name = 'format'").fetchone()
    except sqlite3.DatabaseError as error:
        raise InputError(f"not an fhs archive ({error})", path=path,
                         fix="pass a file written by `fhs archive`") from None
    if not row or row[0] != ARCHIVE_FORMAT:
        raise InputError("not an fhs archive", path=path, fix="pass a file written by `fhs archive`")
    return db


class ReplayLLM:
    """The ``LLM`` protocol over an archive: cached answers only, ``cached=True`` on every one."""

    def __init__(self, archive: str | Path, *, kind: str, model: str, name: str, provenance: str = "") -> None:
        self.archive = Path(archive)
        self._db = open_archive(self.archive)
        self._lock = threading.Lock()
        self.kind, self.model, self.name, self.provenance = kind, model, name, provenance
        own = Identity(kind, model, provenance)
        archived = [Identity(*row) for row in self._db.execute(
            "SELECT kind, model, provenance FROM identities ORDER BY kind, model, provenance")]
        if archived and not any((i.kind, i.model) == (kind, model) for i in archived):
            held = ", ".join(sorted({f"{i.kind}:{i.model}" for i in archived}))
            raise InputError(f"the archive holds answers of {held}, not of {kind}:{model}", path=self.archive,
                             fix="replay with the archived run's --backend, --model, --structured and --thinking")
        # the same model and request kind from another server URL: the archive's own answers
        self._identities = [own, *(i for i in archived if i != own and (i.kind, i.model) == (kind, model))]
        self.stats = CallStats()
        self.context_tokens = _archived_context(self._db)
        self._has_finish = self._db.execute(  # archives written before finish reasons were kept have none
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'finish'").fetchone() is not None

    def _find(self, request: Request) -> tuple[str, Response] | None:
        for identity in self._identities:
            key = cache_key(identity.kind, identity.model, request, provenance=identity.provenance)
            with self._lock:
                cursor = self._db.execute("SELECT * FROM responses WHERE key = ?", (key,))
                row = cursor.fetchone()
                description = cursor.description
                reason = self._db.execute("SELECT reason FROM finish WHERE key = ?", (key,)).fetchone() \
                    if self._has_finish else None
            if row is not None:
                entry = dict(zip((c[0] for c in description), row))
                finish = reason[0] if reason else None
                return key, Response(text=entry["text"], tokens_in=entry["tokens_in"],
                                     tokens_out=entry["tokens_out"], seconds=entry["seconds"], cached=True,
                                     model=entry["model"], finish_reason=finish if isinstance(finish, str) else None)
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
                    f"{request.attempt}) is not in the archive {self.archive}: a replay never asks a server")
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
    import json

    lengths = set()
    for (config,) in db.execute("SELECT run_config FROM runs WHERE run_config IS NOT NULL"):
        tokens = ((json.loads(config) or {}).get("fhs") or {}).get("context_tokens")
        if isinstance(tokens, int) and tokens > 0:
            lengths.add(tokens)
    return lengths.pop() if len(lengths) == 1 else None
