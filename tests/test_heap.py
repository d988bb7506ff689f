"""fhs.core.glibc_heap: the C heap's free pages go back to the system, and threads share few heaps (glibc Linux)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from fhs.core.glibc_heap import release_free_heap

SCRIPT = textwrap.dedent("""
    from fhs.core.glibc_heap import release_free_heap

    def rss():
        return int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS")).split()[1]) // 1024

    # 200 MB in 2 KB blocks (above Python's small-object limit: malloc's), then every block but
    # each tenth freed: the free runs lie between live blocks, below the heap's top, where the
    # allocator alone never returns them
    blocks = [bytes(2000) for _ in range(100_000)]
    kept = blocks[::10]
    del blocks
    before = rss()
    release_free_heap()
    print(before, rss())
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="malloc_trim is glibc's")
def test_free_pages_between_live_blocks_leave_the_resident_set():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, check=True)
    before, after = map(int, done.stdout.split())
    assert before - after > 100, (before, after)  # MiB: most of the 180 MB freed


def test_release_says_whether_the_allocator_can():
    assert release_free_heap() is sys.platform.startswith("linux")


ARENAS = textwrap.dedent("""
    import ctypes, sys, threading
    from fhs.core.glibc_heap import limit_arenas

    if sys.argv[1] != "glibc":
        assert limit_arenas(int(sys.argv[1]))
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    start = threading.Barrier(8)

    def allocate():  # ctypes lets go of the GIL, so the threads ask malloc at the same time
        start.wait()
        for _ in range(2000):
            libc.malloc(1024)

    threads = [threading.Thread(target=allocate) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    libc.malloc_stats()  # one "Arena N:" paragraph per heap, on stderr
""")


def _arenas(setting: str) -> int:
    done = subprocess.run([sys.executable, "-c", ARENAS, setting], capture_output=True, text=True, check=True)
    return sum(line.startswith("Arena ") for line in done.stderr.splitlines())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mallopt(M_ARENA_MAX) is glibc's")
def test_eight_threads_share_the_heaps_the_limit_allows():
    assert _arenas("glibc") > 2  # glibc gives each new thread a heap of its own, up to eight per core
    assert _arenas("2") <= 2


TCACHE = textwrap.dedent("""
    import ctypes, threading

    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]

    class Info(ctypes.Structure):  # glibc's struct mallinfo2
        _fields_ = [(name, ctypes.c_size_t) for name in
                    "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]

    libc.mallinfo2.restype = Info
    freed, measured = threading.Barrier(9), threading.Event()

    def churn():  # seven blocks of each small size, all freed; the thread stays alive (its cache too)
        blocks = [libc.malloc(size) for size in range(24, 1032, 16) for _ in range(7)]
        for block in blocks:
            libc.free(block)
        freed.wait()
        measured.wait()

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for thread in threads:
        thread.start()
    freed.wait()
    print(libc.mallinfo2().uordblks)  # a block in a thread's cache counts as in use
    measured.set()
    for thread in threads:
        thread.join()
""")


def _held_after_free(env: dict[str, str]) -> int:
    done = subprocess.run([sys.executable, "-c", TCACHE], capture_output=True, text=True, check=True, env=env)
    return int(done.stdout)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's tunables")
def test_a_child_without_thread_caches_holds_no_freed_blocks_per_thread():
    import os

    from fhs.core.glibc_heap import without_thread_caches

    cached = _held_after_free({k: v for k, v in os.environ.items() if k != "GLIBC_TUNABLES"})
    uncached = _held_after_free(without_thread_caches(os.environ))
    # eight threads each keep about 230 KB of freed blocks with their caches, nothing without
    assert cached - uncached > 1_000_000, (cached, uncached)


def test_other_tunables_are_kept_and_an_explicit_cache_setting_wins():
    from fhs.core.glibc_heap import NO_THREAD_CACHES, without_thread_caches

    assert without_thread_caches({})["GLIBC_TUNABLES"] == NO_THREAD_CACHES
    kept = without_thread_caches({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2", "HOME": "/h"})
    assert kept == {"GLIBC_TUNABLES": f"glibc.malloc.arena_max=2:{NO_THREAD_CACHES}", "HOME": "/h"}
    mine = {"GLIBC_TUNABLES": "glibc.malloc.tcache_count=3"}
    assert without_thread_caches(mine) == mine


def test_only_a_profile_with_several_facts_in_flight_turns_the_caches_off():
    from fhs.book.execute import kernel_environment
    from fhs.run.profiles import PROFILES

    for name, profile in PROFILES.items():
        env = kernel_environment(name, {"HOME": "/h"})
        assert ("GLIBC_TUNABLES" in env) is (profile.workers > 1), name
    assert kernel_environment("cpu", {"HOME": "/h"}) == {"HOME": "/h"}
    assert "GLIBC_TUNABLES" in kernel_environment("paper", {})
