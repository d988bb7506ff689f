"""Dense rankings that are the same on every CPU, for the candidate lists a model reads.

ONNX Runtime's float32 vectors differ from one CPU's kernels to another's by about 1e-7 a
component, enough to swap two candidates whose cosines are that close; on a two-fact
sample one swapped list moves a row of the book by a whole fact. A ranking that a model
reads is therefore decided by vectors that do not depend on the CPU
(``fhs.retrieval.minilm``, bit for bit the same everywhere), while the fast vectors only
say which concepts can be in it:

1. the fast cosine ``s`` of every concept is within ``margin`` of its exact cosine ``e``:
   ``|s - e| <= gamma(n) + DRIFT + |q - q_exact|`` (the float32 product's rounding bound, the
   concept vector's drift allowance, the query vector's measured drift; unit vectors);
2. so every concept of the exact top ``k`` has ``s >= s_k - 2 margin`` (``s_k`` the k-th
   best fast cosine): those few concepts get exact vectors (computed once, kept on disk);
3. they are ordered by exact cosine, summed in a fixed order, ties by taxonomy order.

The order and the scores of the list then depend on the texts alone. Runs that ask no model
(the readiness gap over thousands of queries) keep the fast ranking: there a near-tie moves
one fact's share of an average at most, within the chapters' tolerance.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fhs.core.errors import InputError

UNIT_ROUNDING = 2.0**-24  # float32
# Allowance for |v_fast - v_exact| of a concept vector. Measured across all of US-GAAP's and a
# sample of ICD-10-CM's concepts under AVX-512 and AVX2 kernels (dev/dense_drift.py): at most
# about 1.2e-6; every exact vector computed is checked against DRIFT / 4 (``ExactVectors``).
DRIFT = 2e-5


def gamma(dimensions: int) -> float:
    """Bound on the rounding of a float32 dot product of two unit vectors, in any order, with or without
    fused multiply-adds: n u / (1 - n u) (Higham, Accuracy and Stability of Numerical Algorithms, 3.1),
    with a little room for norms that are 1 only to float32 rounding."""
    return 1.001 * dimensions * UNIT_ROUNDING / (1 - dimensions * UNIT_ROUNDING)


def margin(fast_query: np.ndarray, exact_query: np.ndarray) -> float:
    """How far a fast cosine can be from the exact one for this query (point 1 above)."""
    drift = float(np.linalg.norm(fast_query.astype(np.float64) - exact_query.astype(np.float64)))
    return gamma(fast_query.size) + DRIFT + drift


def candidate_rows(fast: np.ndarray, want: int, slack: float) -> np.ndarray:
    """Rows whose fast cosine is within ``2 slack`` of the ``want``-th best: a superset of the exact top."""
    if want >= fast.size:
        return np.arange(fast.size)
    kth = np.partition(fast, fast.size - want)[fast.size - want]
    return np.flatnonzero(fast >= np.float64(kth) - 2 * slack)


def exact_scores(vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Each row's cosine with ``query`` in float64, summed in column order (the same on every CPU)."""
    from fhs.retrieval import exact_math

    out = np.empty(vectors.shape[0])
    exact_math.dots(np.ascontiguousarray(vectors), np.arange(vectors.shape[0]), np.ascontiguousarray(query), out)
    return out


class ExactVectors:
    """A taxonomy's exact concept vectors, computed on demand and kept in a SQLite file beside the fast ones."""

    def __init__(self, texts: Sequence[str], encoder, path: Path | None, dimensions: int) -> None:
        self.texts = texts
        self.dimensions = dimensions
        self.encoder = encoder
        self.path = path
        self._rows: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self._loaded = False
        self.computed = 0

    def _connect(self) -> sqlite3.Connection:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(self.path, timeout=60)
        connection.execute("create table if not exists vectors (position integer primary key, vector blob not null)")
        return connection

    def _load(self) -> None:
        if self._loaded or self.path is None:
            self._loaded = True
            return
        try:
            with self._connect() as connection:
                for position, blob in connection.execute("select position, vector from vectors"):
                    if len(blob) == self.dimensions * 4 and 0 <= position < len(self.texts):
                        self._rows[position] = np.frombuffer(blob, dtype="<f4")
        except sqlite3.DatabaseError as error:
            raise InputError(
                f"not a usable cache of exact concept vectors ({error})",
                path=self.path,
                field="dense cache",
                fix="delete the file; it is rebuilt on demand",
            ) from None
        self._loaded = True

    def rows(self, positions: np.ndarray, fast: np.ndarray) -> np.ndarray:
        """The exact vectors of ``positions`` (taxonomy order), computing the missing ones; ``fast`` holds
        their fast vectors, against which each new one's drift is checked."""
        with self._lock:
            self._load()
            missing = [i for i, p in enumerate(positions.tolist()) if p not in self._rows]
            if missing:
                new = self.encoder.encode([self.texts[positions[i]] for i in missing], documents=True)
                for slot, i in enumerate(missing):
                    check_drift(fast[i], new[slot], self.texts[positions[i]])
                    self._rows[int(positions[i])] = new[slot]
                self.computed += len(missing)
                if self.path is not None:
                    with self._connect() as connection:
                        connection.executemany(
                            "insert or replace into vectors values (?, ?)",
                            [(int(positions[i]), new[slot].astype("<f4").tobytes()) for slot, i in enumerate(missing)],
                        )
            return (
                np.stack([self._rows[int(p)] for p in positions.tolist()])
                if len(positions)
                else np.zeros((0, self.dimensions), dtype=np.float32)
            )


def check_drift(fast: np.ndarray, exact: np.ndarray, text: str) -> None:
    """Stop, rather than rank on a broken premise, when a fast vector strays from its exact one."""
    drift = float(np.linalg.norm(fast.astype(np.float64) - exact.astype(np.float64)))
    if drift > DRIFT / 4:
        raise RuntimeError(
            f"the fast dense vector of {text[:60]!r} is {drift:.2e} from its exact one, beyond the "
            f"allowance {DRIFT / 4:.1e} that exact rankings rely on (fhs/retrieval/exact_dense.py): "
            "the fast index was built by another model or runtime; delete $FHS_CACHE/dense and rerun"
        )


class ExactSearch:
    """A dense or hybrid retriever whose ``search`` ranks by exact vectors (for runs that ask a model).

    Everything else (configuration, partitions, warm-up) is the wrapped retriever's."""

    exact = True

    def __init__(self, retriever) -> None:
        self.inner = retriever

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def search(self, query: str, datatype: str | None = None, top_k: int | None = None):
        return self.inner.search(query, datatype, top_k, exact=True)


def model_facing(retriever):
    """``retriever`` as a run that asks a model uses it: exact rankings where it embeds (dense, hybrid)."""
    return ExactSearch(retriever) if getattr(retriever, "kind", "bm25") in ("dense", "hybrid") else retriever
