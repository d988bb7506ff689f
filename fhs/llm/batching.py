"""Requests from many threads gathered into one batch for an engine that serves one caller at a time.

vLLM in process (``LLM.chat``) batches only what one call hands it, while the
run engine asks from one thread per fact in flight, a few requests each. A
:class:`BatchCollector` owns the engine: one collector thread takes whatever
is queued (up to ``batch_size``), runs it as one batch and hands every caller
its own answers back, so the engine sees many facts' requests at once.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

from fhs.llm.contract import BackendError

In = TypeVar("In")
Out = TypeVar("Out")


class _Job(Generic[Out]):
    """One caller's items: results fill in as batches finish; the first failure ends the job."""

    def __init__(self, size: int) -> None:
        self.results: list[Any] = [None] * size
        self.remaining = size
        self.error: BaseException | None = None
        self.done = threading.Event()

    def put(self, index: int, result: Out) -> None:
        self.results[index] = result
        self.remaining -= 1
        if self.remaining == 0:
            self.done.set()

    def fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.done.set()


class BatchCollector(Generic[In, Out]):
    """``submit(items)`` from any thread; ``run(batch)`` is called on the collector thread only.

    A batch holds items of several callers in the order they were queued; a
    caller whose items do not fit wholly in one batch gets them from several.
    If ``run`` raises, every caller with an item in that batch gets the error.
    """

    def __init__(self, run: Callable[[list[In]], Sequence[Out]], batch_size: int, name: str = "fhs-batch") -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self._run = run
        self.batch_size = batch_size
        self.name = name
        self._queue: collections.deque[tuple[_Job, int, In]] = collections.deque()
        self._ready = threading.Condition()
        self._thread: threading.Thread | None = None
        self.batches: list[int] = []  # the size of each batch run, for tests and diagnostics

    def submit(self, items: Sequence[In]) -> list[Out]:
        if not items:
            return []
        job: _Job[Out] = _Job(len(items))
        with self._ready:
            self._queue.extend((job, index, item) for index, item in enumerate(items))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name=self.name, daemon=True)
                self._thread.start()
            self._ready.notify()
        job.done.wait()
        if job.error is not None:
            raise job.error
        return list(job.results)

    def _take(self) -> list[tuple[_Job, int, In]]:
        with self._ready:
            while not self._queue:
                self._ready.wait()
            size = min(len(self._queue), self.batch_size)
            return [self._queue.popleft() for _ in range(size)]

    def _serve(self) -> None:
        while True:
            batch = [entry for entry in self._take() if entry[0].error is None]  # a failed job's rest is dropped
            if not batch:
                continue
            self.batches.append(len(batch))
            try:
                outputs = list(self._run([item for _, _, item in batch]))
                if len(outputs) != len(batch):
                    raise BackendError(
                        f"{self.name}: the engine returned {len(outputs)} answers for {len(batch)} requests"
                    )
            except BaseException as error:  # noqa: BLE001 - handed to the callers, who raise it
                for job, _, _ in batch:
                    job.fail(error)
                continue
            for (job, index, _), output in zip(batch, outputs):
                if job.error is None:
                    job.put(index, output)
