"""The verdict ledger: every verifier verdict ever parsed, keyed by fact, hypothesis and candidate.

A verdict depends on the evidence, the hypothesis the verifier reads and the
candidate it judges, not on where the candidate sat in the fused order. So
a variant that only moves the window (another fusion, rendering, normalisation
or w_cov) needs the model only for candidates it never judged under that
hypothesis, and a variant that only re-scores (beta, fusion, normalisation)
needs it for none. The ledger is what lets ``verify_pool`` skip them.

Keys: ``scope`` (model and the verifier settings that shape its prompt),
fact id, a content hash of the hypothesis as the verifier sees it (its
dimension values), candidate id. The value is the parsed verdict record
``{dimension: support|contradict|abstain}``, or ``None`` when the candidate
was asked about and the reply held no entry for it (asking again would
replay the same reply).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Protocol

from fhs.method.config import FHSConfig
from fhs.method.hypotheses import Hypothesis

Entry = dict[str, str] | None


def hypothesis_key(hypothesis: Hypothesis) -> str:
    """A content hash of what the verifier reads of a hypothesis: its dimension values."""
    text = json.dumps(list(hypothesis.dimensions), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def verifier_scope(model: str, config: FHSConfig) -> str:
    """Which model judged, under which prompt settings (a different setting is a different verdict)."""
    settings = {name: getattr(config, name) for name in (
        "json_schema", "definition_chars", "context_chars", "max_tokens_verifier",
        "verifier_prompt_tokens", "prompt_order", "seed")}
    return model + ":" + hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:12]


class VerdictLedger(Protocol):
    """What ``verify_pool`` needs: look verdicts up, and record new ones."""

    def lookup(self, scope: str, fact_id: str, hypothesis: str, candidates: Iterable[str]) -> dict[str, Entry]: ...

    def record(self, scope: str, fact_id: str, hypothesis: str, entries: Mapping[str, Entry]) -> None: ...


class MemoryLedger:
    """A ledger in a dict: for tests, and for one process's re-scoring."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str, str], Entry] = {}
        self._lock = threading.Lock()

    def lookup(self, scope, fact_id, hypothesis, candidates):
        with self._lock:
            return {cid: self._entries[(scope, fact_id, hypothesis, cid)] for cid in candidates
                    if (scope, fact_id, hypothesis, cid) in self._entries}

    def record(self, scope, fact_id, hypothesis, entries):
        with self._lock:
            for cid, entry in entries.items():
                self._entries[(scope, fact_id, hypothesis, cid)] = entry

    def __len__(self) -> int:
        return len(self._entries)


_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    scope TEXT NOT NULL, fact TEXT NOT NULL, hypothesis TEXT NOT NULL, candidate TEXT NOT NULL,
    entry TEXT, PRIMARY KEY (scope, fact, hypothesis, candidate)
)
"""


class SqliteLedger:
    """The persistent ledger: one SQLite file beside the response cache (one commit per record call)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(self.path), check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(_SCHEMA)
        self._db.commit()

    def lookup(self, scope, fact_id, hypothesis, candidates):
        wanted = list(dict.fromkeys(candidates))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        with self._lock:
            rows = self._db.execute(
                f"SELECT candidate, entry FROM verdicts WHERE scope=? AND fact=? AND hypothesis=? "
                f"AND candidate IN ({marks})", [scope, fact_id, hypothesis, *wanted]).fetchall()
        return {cid: (json.loads(entry) if entry is not None else None) for cid, entry in rows}

    def record(self, scope, fact_id, hypothesis, entries):
        rows = [(scope, fact_id, hypothesis, cid, json.dumps(entry) if entry is not None else None)
                for cid, entry in entries.items()]
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO verdicts VALUES (?, ?, ?, ?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def close(self) -> None:
        self._db.close()


def ledger_beside(cache_path: str | os.PathLike | None) -> SqliteLedger | None:
    """The ledger file next to a response cache (``verdicts.sqlite``), or None without a cache."""
    return SqliteLedger(Path(cache_path).with_name("verdicts.sqlite")) if cache_path else None

