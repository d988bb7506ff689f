"""BM25 indexes kept on disk for a user's own concept file, keyed by its content.

A large concept file (ICD-10-PCS: 68,672 concepts) takes most of a minute to
index and a quarter of a second to read back; every ``fhs run`` on the same
file would otherwise pay the build again. The key is the file's SHA-256 with
the index parameters (k1, b), the datatype partition and the source of
``fhs/retrieval/bm25.py``, so an edited file, setting or scorer never reads a
stale index. The files are pickles the project writes itself under
``$FHS_CACHE/indexes`` (never read one from elsewhere); one that cannot be read
is rebuilt.
"""

from __future__ import annotations

import hashlib
import pickle
from pathlib import Path
from typing import Any

from fhs.core.files import atomic_write, cache_dir

FORMAT = 1


def index_path(content_key: str, k1: float, b: float, datatype: str | None) -> Path:
    """Where the index of one datatype partition of a taxonomy with content ``content_key`` lives."""
    scorer = Path(__file__).with_name("bm25.py").read_bytes()
    digest = hashlib.sha256(repr((FORMAT, content_key, k1, b, datatype)).encode("utf-8") + scorer).hexdigest()
    return cache_dir("indexes", f"{content_key[:16]}-{digest[:16]}.pkl")


def read_index(path: Path) -> Any | None:
    """The cached partition, or None when missing or unreadable."""
    try:
        with path.open("rb") as handle:
            return pickle.load(handle)
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, TypeError, ValueError):
        return None


def write_index(path: Path, partition: Any) -> None:
    with atomic_write(path, "wb") as handle:
        pickle.dump(partition, handle, protocol=pickle.HIGHEST_PROTOCOL)
