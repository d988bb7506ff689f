"""A process-wide limit on the requests in flight to each server, and the event loop that sends them.

vLLM reaches its throughput only with many sequences in one batch, so the
client keeps up to a fixed number of requests in flight per server URL. The
limit belongs to the server, not to one backend object: a chapter, the run
engine's threads and the relocator may each hold a backend for the same URL,
and together they must neither overrun the server nor leave it idle. Every
backend of the process therefore takes its slots from one :class:`InFlightGate`
per URL (:func:`server_gate`).

Backends own their event loop (:class:`BackgroundLoop`): one daemon thread
per backend runs every request that backend sends, so connections are reused
and ``complete()`` stays a plain blocking call that any thread may make, also
from inside Jupyter's running loop. Gates are shared across those loops, so
they are built on a thread lock and hand slots over with
``call_soon_threadsafe``, not on ``asyncio.Semaphore`` (which belongs to one loop).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import os
import threading
from collections.abc import Callable, Coroutine
from typing import Any

DEFAULT_MAX_IN_FLIGHT = 128  # requests per server: enough to fill a vLLM batch on one large GPU
# The most requests in flight to one server whatever the host allows: many times any server's batch
# (vLLM's --max-num-seqs is a few hundred), and each request in flight holds a connection.
MAX_IN_FLIGHT = 4096
FILES_KEPT = 128  # open files kept for everything but connections (caches, data, the interpreter)


def _open_file_limits() -> tuple[int, int | None] | None:
    """``(soft, hard)`` open-file limits of this process (``ulimit -n``; an unlimited one is None), or None
    where they are not known."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        unlimited = resource.RLIM_INFINITY
    except (ImportError, OSError, ValueError):
        return None
    return (-1 if soft == unlimited else soft), (None if hard == unlimited or hard < 0 else hard)


def in_flight_cap(servers: int = 1) -> int:
    """The most requests in flight per server this process can hold: each holds a connection, an open
    file, so all servers together stay under the hard open-file limit (the soft one is raised to what
    is needed, :func:`check_in_flight`) less ``FILES_KEPT``, and never over ``MAX_IN_FLIGHT``."""
    limits = _open_file_limits()
    if limits is None or limits[1] is None:
        return MAX_IN_FLIGHT
    return max(1, min(MAX_IN_FLIGHT, (limits[1] - FILES_KEPT) // max(1, servers)))


def check_in_flight(limit: object, servers: int = 1) -> int:
    """``limit`` if it is a whole number from 1 to :func:`in_flight_cap`, else a one-line InputError;
    the soft open-file limit is raised (up to the hard one) to hold that many connections."""
    from fhs.core.errors import InputError

    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InputError(f"must be a whole number of at least 1, got {limit!r}", field="max-in-flight")
    cap = in_flight_cap(servers)
    if limit > cap:
        per = f" for each of {servers} servers" if servers > 1 else ""
        raise InputError(
            f"{limit:,} requests in flight{per} is more than this machine can hold: at most {cap:,} "
            f"(each holds a connection, an open file: the hard open-file limit less {FILES_KEPT} "
            f"kept for files, and never over {MAX_IN_FLIGHT:,})",
            field="max-in-flight",
            fix=f"pass --max-in-flight {cap} or less, matched to the server's --max-num-seqs",
        )
    _raise_soft_limit(limit * max(1, servers) + FILES_KEPT)
    return limit


def _raise_soft_limit(needed: int) -> None:
    """Let this process open ``needed`` files, where the hard limit allows (a courtesy: nothing fails if not)."""
    limits = _open_file_limits()
    if limits is None or limits[0] < 0 or limits[0] >= needed:
        return
    try:
        import resource

        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed if limits[1] is None else min(needed, hard), hard))
    except (ImportError, OSError, ValueError):
        pass


class InFlightGate:
    """At most ``limit`` holders at once, waiters served first come first served, from any event loop."""

    def __init__(self, limit: int) -> None:
        self._lock = threading.Lock()
        self._limit = limit
        self._held = 0
        self._waiters: collections.deque[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = collections.deque()

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def held(self) -> int:
        return self._held

    def set_limit(self, limit: int) -> None:
        """Change the limit; a higher one admits waiters at once, a lower one takes effect as holders leave."""
        with self._lock:
            self._limit = limit
            while self._waiters and self._held < self._limit:
                self._held += 1
                self._grant(*self._waiters.popleft())

    async def acquire(self) -> None:
        with self._lock:
            if self._held < self._limit and not self._waiters:
                self._held += 1
                return
            loop = asyncio.get_running_loop()
            waiter = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                try:
                    self._waiters.remove((loop, waiter))
                    granted = False
                except ValueError:  # a slot was handed over before the cancellation arrived
                    granted = True
            if granted:
                self.release()
            raise

    def release(self) -> None:
        with self._lock:
            if self._waiters and self._held <= self._limit:
                self._grant(*self._waiters.popleft())  # the slot passes on: ``held`` is unchanged
            else:
                self._held -= 1

    @staticmethod
    def _grant(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future) -> None:
        def wake() -> None:
            if not waiter.done():
                waiter.set_result(None)

        loop.call_soon_threadsafe(wake)


_GATES: dict[str, InFlightGate] = {}
_GATES_LOCK = threading.Lock()


def server_gate(url: str, limit: int) -> InFlightGate:
    """The process's gate for ``url``, set to ``limit`` (the backend built last sets the server's limit)."""
    with _GATES_LOCK:
        gate = _GATES.get(url)
        if gate is None:
            gate = _GATES[url] = InFlightGate(limit)
    if gate.limit != limit:
        gate.set_limit(limit)
    return gate


class BackgroundLoop:
    """An asyncio loop on a daemon thread, started on first use; ``call`` runs a coroutine there and waits.

    A forked child starts its own loop (the parent's thread does not exist there).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._pid = 0

    def _running_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=_serve_forever, args=(loop,), name=self.name, daemon=True)
                thread.start()
                self._loop, self._thread, self._pid = loop, thread, os.getpid()
            return self._loop

    def call(self, make: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
        """Run ``make()`` on the loop and return its result; an interrupted caller cancels it."""
        loop = self._running_loop()
        if threading.current_thread() is self._thread:
            raise RuntimeError(f"{self.name}: a request made from inside its own event loop would wait forever")
        future = asyncio.run_coroutine_threadsafe(make(), loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def close(self, last: Callable[[], Coroutine[Any, Any, Any]] | None = None) -> None:
        """Run ``last()`` (e.g. closing a client) on the loop, then stop the loop and its thread."""
        with self._lock:
            loop, thread, pid = self._loop, self._thread, self._pid
            self._loop = self._thread = None
        if loop is None or pid != os.getpid() or loop.is_closed():
            return
        if last is not None and thread is not threading.current_thread():
            try:
                asyncio.run_coroutine_threadsafe(last(), loop).result(timeout=5)
            except (concurrent.futures.TimeoutError, RuntimeError, OSError):
                pass  # closing connections is a courtesy; the thread ends either way
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=5)


def _serve_forever(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        loop.close()
