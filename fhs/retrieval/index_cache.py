"""BM25 indexes kept on disk for a user's own concept file, keyed by its content.

A large concept file (ICD-10-PCS: 68,672 concepts) takes most of a minute to
index and a quarter of a second to read back; every ``fhs run`` on the same
file would otherwise pay the build again. The key is the file's SHA-256 with
the index parameters (k1, b), the datatype partition and the source of
``fhs/retrieval/bm25.py``, so an edited file, setting or scorer never reads a
stale index.

Caches are shared (``$FHS_CACHE`` may be a team's folder), so an index file is
data that cannot run code: a NumPy ``.npz`` archive of plain numeric arrays,
read with ``allow_pickle=False``, plus one JSON document (ids and vocabularies)
stored in it as UTF-8 bytes. A file that cannot be read as such, or whose
parts do not fit together, is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from fhs.core import text as text_module
from fhs.core.files import atomic_write, cache_dir

FORMAT = 2  # 1 was a pickle, never read again
_META = "meta_json"


def index_path(content_key: str, k1: float, b: float, datatype: str | None) -> Path:
    """Where the index of one datatype partition of a taxonomy with content ``content_key`` lives."""
    # the scorer and the tokenizer that built it: either changed, the index is built again
    scorer = Path(__file__).with_name("bm25.py").read_bytes() + Path(text_module.__file__).read_bytes()
    digest = hashlib.sha256(repr((FORMAT, content_key, k1, b, datatype)).encode("utf-8") + scorer).hexdigest()
    return cache_dir("indexes", f"{content_key[:16]}-{digest[:16]}.npz")


def read_arrays(path: Path) -> tuple[dict[str, np.ndarray], dict[str, Any]] | None:
    """The numeric arrays and the JSON document of an index file, or None when missing or unreadable.

    Only numeric arrays are accepted (no object arrays: ``allow_pickle=False``).
    """
    try:
        with np.load(path, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        meta = json.loads(arrays.pop(_META).tobytes().decode("utf-8"))
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, UnicodeDecodeError):
        return None
    if not isinstance(meta, dict) or any(a.dtype.kind not in "biuf" for a in arrays.values()):
        return None
    return arrays, meta


def write_arrays(path: Path, arrays: Mapping[str, np.ndarray], meta: Mapping[str, Any]) -> None:
    """Write numeric ``arrays`` and the JSON-able ``meta`` as one ``.npz`` file, atomically."""
    document = np.frombuffer(json.dumps(meta, ensure_ascii=False).encode("utf-8"), dtype=np.uint8)
    with atomic_write(path, "wb") as handle:
        # numpy's stub reads a ** mapping as if it might name savez's allow_pickle; these are array names
        np.savez(handle, **{_META: document}, **arrays)  # type: ignore[arg-type]
