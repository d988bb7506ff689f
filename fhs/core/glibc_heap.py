"""Keep a long run's C heap small: few heaps for its threads, free pages handed back.

A run with many facts in flight allocates and frees on many threads; glibc keeps
what is freed inside its per-thread arenas, scattered between live blocks, so the
resident size creeps up with the number of facts although the live data does not
(``dev/bench_memory.py``). ``limit_arenas`` caps how many heaps the threads
spread over; ``malloc_trim(0)`` returns the pages that hold no live block. Pages with
one live block stay, so both slow that creep without stopping it. Elsewhere (macOS,
musl) there are no such calls and both do nothing. Each thread's own cache of freed
blocks can only be turned off when a process starts: ``without_thread_caches`` gives
the environment for such a child (a chapter's kernel).
"""

from __future__ import annotations

import ctypes
import ctypes.util
from collections.abc import Mapping
from functools import lru_cache

# glibc's mallopt parameter for the most arenas it creates (malloc.h)
M_ARENA_MAX = -8
# glibc's tunable that leaves each thread without a cache of freed blocks (tcache), read at start
NO_THREAD_CACHES = "glibc.malloc.tcache_count=0"


@lru_cache(maxsize=1)
def _libc():
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
        libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


def release_free_heap() -> bool:
    """Return the C heap's free pages to the system; True if the allocator has the call."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def limit_arenas(arenas: int) -> bool:
    """Let glibc create at most ``arenas`` heaps for the threads to come; True if it took the setting.

    By default it gives each new thread a heap of its own, up to eight per core, each keeping its
    own free pages: on a 16-core GPU box with 128 facts in flight that is up to 128
    partly empty heaps. Called before a run's threads start; heaps already made stay.
    """
    libc = _libc()
    return libc is not None and libc.mallopt(M_ARENA_MAX, arenas) == 1


def without_thread_caches(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` for a child process whose C heap keeps no per-thread cache of freed blocks.

    glibc gives every thread a cache of up to seven freed blocks of each of 64 sizes
    (about 230 KB at most). A run with 128 facts in flight has 128 threads, whose
    caches fill over its first thousands of facts, a large share of what its resident
    size grows (``python -m dev.bench_memory --tcache on,off`` measures it).
    Other tunables in ``GLIBC_TUNABLES`` are kept; other C libraries ignore the variable.
    """
    child = dict(env)
    present = [t for t in child.get("GLIBC_TUNABLES", "").split(":") if t]
    if not any(t.startswith("glibc.malloc.tcache_count=") for t in present):
        child["GLIBC_TUNABLES"] = ":".join([*present, NO_THREAD_CACHES])
    return child
