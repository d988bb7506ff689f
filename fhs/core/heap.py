"""Hand the C heap's free pages back to the operating system during long runs.

A run with many facts in flight allocates and frees on many threads; glibc keeps
what is freed inside its per-thread arenas, scattered between live blocks, so the
resident size creeps up with the number of facts although the live data does not
(``scripts/bench_memory.py``). ``malloc_trim(0)`` returns the pages that hold no
live block; pages with one live block stay, so it slows that creep but does not stop
it. Elsewhere (macOS, musl) there is no such call and this does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
from functools import lru_cache


@lru_cache(maxsize=1)
def _trim():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    return trim


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system; True if the allocator has the call."""
    trim = _trim()
    if trim is None:
        return False
    trim(0)
    return True
