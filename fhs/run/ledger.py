"""The verdict ledger: every verifier verdict ever parsed, keyed by everything it depends on.

A verdict depends on the evidence, the hypothesis the verifier reads and the
candidate it judges, not on where the candidate sat in the fused order. So
a variant that only moves the window (another fusion, rendering, normalisation
or w_cov) needs the model only for candidates it never judged under that
hypothesis, and a variant that only re-scores (beta, fusion, normalisation)
needs it for none. The ledger wraps the verifier's calls (``Ledger.judge``
around ``fhs.method.fhs.ask_verifier``) so they skip them.

A verdict is only reused where every input of the prompt that produced it is
unchanged, so each key column folds in a digest of what it depends on:

- ``scope``: the model and where its answers come from (the cached client's
  kind, model and server URLs), the verifier settings that shape its prompt,
  the verifier's prompt templates as loaded, and the domain's content;
- ``fact``: the fact id, plain, so other tools can select a fact's rows;
- ``hypothesis``: the hypothesis's dimension values and the fact's evidence
  (every field the prompt can show; the gold ids are not shown and not keyed);
- ``candidate``: ``<id>#<digest>`` of the concept as shown (label, definition,
  datatype), so an edited concept is judged again.

The value is the parsed verdict record ``{dimension: support|contradict|abstain}``,
or ``None`` when the candidate was asked about in a complete reply that held
no entry for it (asking again would replay the same reply). ``fhs run --fresh``
wraps the ledger in :class:`RecordOnly`: that run records what it parses and
reuses nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.data.domain import Domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept
from fhs.llm.cache import cache_error
from fhs.method.config import FHSConfig
from fhs.method.hypotheses import Hypothesis
from fhs.method.prompting import load_template
from fhs.method.verifier import VERIFIER_TEMPLATES, Ask, Entry, Judged, Verification, concept_or_stub

# The settings that change the verifier's request for a given window (fhs/method/verifier.py).
PROMPT_SETTINGS = (
    "json_schema",
    "compact_outputs",
    "definition_chars",
    "context_chars",
    "max_tokens_verifier",
    "verifier_prompt_tokens",
    "prompt_order",
    "seed",
)


def _digest(value: Any, length: int = 16) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def evidence_of(fact: Fact) -> dict[str, Any]:
    """What a prompt can show of a fact: every field but its id (a key column of its own) and gold."""
    return {name: value for name, value in fact.to_dict().items() if name not in ("id", "gold")}


def hypothesis_key(hypothesis: Hypothesis, fact: Fact) -> str:
    """A content hash of the hypothesis as the verifier reads it (its dimension values) and the evidence."""
    return _digest([list(hypothesis.dimensions), evidence_of(fact)])


def candidate_key(concept: Concept) -> str:
    """``<id>#<digest>`` of the candidate as the verifier is shown it: label, definition, datatype."""
    return f"{concept.id}#{_digest([concept.label, concept.definition, concept.datatype], 12)}"


def domain_digest(domain: Domain) -> str:
    """The domain's content (dimensions, glosses, operators, category profiles), not the file's path."""
    return _digest(
        {
            "name": domain.name,
            "taxonomy": domain.taxonomy,
            "evidence": domain.evidence,
            "query_guidance": domain.query_guidance,
            "dimensions": [[d.name, d.gloss, d.verifier_gloss, list(d.examples)] for d in domain.dimensions],
            "operators": [[o.name, o.gloss] for o in domain.operators],
            "profile": [
                [
                    p.name,
                    p.from_metadata,
                    [[name, [phrase.text for phrase in phrases]] for name, phrases in p.categories],
                ]
                for p in domain.profile
            ],
        }
    )


def model_identity(llm: Any) -> dict[str, str]:
    """Which model answered and from where: the cached client's name, kind, model and provenance."""
    return {
        "name": str(getattr(llm, "name", type(llm).__name__)),
        "kind": str(getattr(llm, "kind", "")),
        "model": str(getattr(llm, "model", "")),
        "provenance": str(getattr(llm, "provenance", "") or ""),
    }


def verifier_scope(llm: Any, config: FHSConfig, domain: Domain) -> str:
    """``<model name>:<digest>`` of the model identity, prompt settings, prompt templates and domain."""
    identity = model_identity(llm)
    parts = {
        "llm": identity,
        "settings": {name: getattr(config, name) for name in PROMPT_SETTINGS},
        "templates": [load_template(name, config.prompt_order).template for name in VERIFIER_TEMPLATES],
        "domain": domain_digest(domain),
    }
    return f"{identity['name']}:{_digest(parts)}"


class Ledger:
    """A verdict ledger's part in the verifier stage, on its ``lookup`` and ``record`` (the method's
    ``KnownVerdicts``): verdicts known for each asked hypothesis, the model asked about the rest, and
    what the calls learned kept under the same keys."""

    def lookup(self, scope: str, fact_id: str, hypothesis: str, candidates: Iterable[str]) -> dict[str, Entry]:
        raise NotImplementedError

    def record(self, scope: str, fact_id: str, hypothesis: str, entries: Mapping[str, Entry]) -> None:
        raise NotImplementedError

    def judge(self, verification: Verification, ask: Ask) -> dict[int, Judged]:
        v = verification
        scope = verifier_scope(v.llm, v.config, v.domain)
        keyed = {cid: candidate_key(concept_or_stub(v.taxonomy, cid)) for cid in v.window.ids}
        known = {}
        for j in v.asks:
            found = self.lookup(scope, v.fact.id, hypothesis_key(v.hypotheses[j], v.fact), keyed.values())
            known[j] = {cid: found[key] for cid, key in keyed.items() if key in found}
        judged = ask(v, known)
        for j, result in judged.items():
            learned = result.learned()
            if learned:
                self.record(
                    scope,
                    v.fact.id,
                    hypothesis_key(v.hypotheses[j], v.fact),
                    {keyed[cid]: entry for cid, entry in learned.items()},
                )
        return judged


class RecordOnly(Ledger):
    """A ledger that records and never answers: ``fhs run --fresh`` reuses no verdict."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def lookup(self, scope, fact_id, hypothesis, candidates):
        return {}

    def record(self, scope, fact_id, hypothesis, entries):
        self.ledger.record(scope, fact_id, hypothesis, entries)


class MemoryLedger(Ledger):
    """A ledger in a dict: for tests, and for one process's re-scoring."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str, str], Entry] = {}
        self._lock = threading.Lock()

    def lookup(self, scope, fact_id, hypothesis, candidates):
        with self._lock:
            return {
                cid: self._entries[(scope, fact_id, hypothesis, cid)]
                for cid in candidates
                if (scope, fact_id, hypothesis, cid) in self._entries
            }

    def record(self, scope, fact_id, hypothesis, entries):
        with self._lock:
            for cid, entry in entries.items():
                self._entries[(scope, fact_id, hypothesis, cid)] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def __bool__(self) -> bool:  # an empty ledger is still a ledger
        return True


_COLUMNS = ("scope", "fact", "hypothesis", "candidate", "entry")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS verdicts (
    scope TEXT NOT NULL, fact TEXT NOT NULL, hypothesis TEXT NOT NULL, candidate TEXT NOT NULL,
    entry TEXT, PRIMARY KEY (scope, fact, hypothesis, candidate)
)
"""


class SqliteLedger(Ledger):
    """The persistent ledger: one SQLite file beside the response cache (one commit per record call)."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        fix = "delete it (it only saves re-reading verdicts the response cache holds) or pass another --cache"
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            # as the response cache: a crashed process loses no committed verdict
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA)
            self._db.commit()
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(verdicts)")}
        except sqlite3.DatabaseError as error:
            problem = cache_error(
                error, self.path, "verdict ledger", "its verdicts are read again from the response cache"
            )
            if isinstance(problem, InputError) and problem.problem.startswith("not a usable"):
                problem = InputError(problem.problem, path=self.path, fix=fix)
            raise problem from None
        missing = [name for name in _COLUMNS if name not in columns]
        if missing:
            self._db.close()
            raise InputError(
                f"a verdict ledger of another layout (no column {', '.join(missing)})", path=self.path, fix=fix
            )

    def lookup(self, scope, fact_id, hypothesis, candidates):
        wanted = list(dict.fromkeys(candidates))
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        try:
            with self._lock:
                rows = self._db.execute(
                    f"SELECT candidate, entry FROM verdicts WHERE scope=? AND fact=? AND hypothesis=? "
                    f"AND candidate IN ({marks})",
                    [scope, fact_id, hypothesis, *wanted],
                ).fetchall()
        except sqlite3.DatabaseError as error:
            raise self._problem(error) from None
        return {cid: (json.loads(entry) if entry is not None else None) for cid, entry in rows}

    def record(self, scope, fact_id, hypothesis, entries):
        rows = [
            (scope, fact_id, hypothesis, cid, json.dumps(entry) if entry is not None else None)
            for cid, entry in entries.items()
        ]
        try:
            with self._lock, self._db:
                self._db.executemany(
                    f"INSERT OR REPLACE INTO verdicts ({', '.join(_COLUMNS)}) VALUES (?, ?, ?, ?, ?)", rows
                )
        except sqlite3.DatabaseError as error:
            raise self._problem(error) from None

    def _problem(self, error: sqlite3.DatabaseError) -> Exception:
        return cache_error(error, self.path, "verdict ledger", "its verdicts are read again from the response cache")

    def __len__(self) -> int:
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM verdicts").fetchone()[0])

    def __bool__(self) -> bool:  # never count the table (a full scan) to test a ledger's presence
        return True

    def close(self) -> None:
        self._db.close()


def ledger_path(cache_path: str | os.PathLike) -> Path:
    """The ledger of one response cache: ``verdicts.sqlite`` beside ``responses.sqlite``, else
    ``<cache name>.verdicts.sqlite``, so two caches in one folder never share verdicts."""
    cache = Path(cache_path)
    return cache.with_name("verdicts.sqlite" if cache.stem == "responses" else f"{cache.stem}.verdicts.sqlite")


def ledger_beside(cache_path: str | os.PathLike | None) -> SqliteLedger | None:
    """The ledger file of a response cache (:func:`ledger_path`), or None without a cache."""
    return SqliteLedger(ledger_path(cache_path)) if cache_path else None
