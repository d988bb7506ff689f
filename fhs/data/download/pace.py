"""How long a fetch may take and how much a server may send: a stranger's mirror must not stall or fill us.

``FetchLimits`` holds ``fhs data fetch``'s bounds (``--deadline``, ``--min-rate``,
``--max-download``); ``Pace`` is one fetch's clock against them. A server that drips bytes
is stopped by the minimum rate, one that sends nothing by the read timeout (never longer
than the time left), and every server by the overall deadline. What arrived stays in the
``.part`` file, so the next ``fhs data fetch`` resumes it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from fhs.core.errors import InputError


@dataclass(frozen=True)
class FetchLimits:
    """``deadline_s``: the whole fetch; ``min_rate``: bytes a second over each ``rate_window_s`` of a
    download (0: no minimum); ``max_download``: bytes of any one download, pinned size or not."""

    deadline_s: float = 6 * 3600.0
    min_rate: float = 1000.0
    rate_window_s: float = 60.0
    max_download: int = 10**9
    read_timeout_s: float = 60.0
    connect_timeout_s: float = 20.0

    def __post_init__(self) -> None:
        for name in ("deadline_s", "rate_window_s", "read_timeout_s", "connect_timeout_s"):
            if not 0 < getattr(self, name) < float("inf"):
                raise InputError(f"must be a number of seconds above 0, got {getattr(self, name)!r}", field=name)
        if not 0 <= self.min_rate < float("inf"):
            raise InputError(f"must be a finite number of bytes a second >= 0, got {self.min_rate!r}", field="min_rate")
        if self.max_download < 1:
            raise InputError(f"must be at least 1 byte, got {self.max_download!r}", field="max_download")


class PaceError(InputError):
    """A server slower than the limits allow; what arrived is kept for the next fetch."""


class Pace:
    """One fetch's deadline, and the rate of the download under way (``start`` then ``received``)."""

    def __init__(self, limits: FetchLimits | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = limits or FetchLimits()
        self.clock = clock
        self.end = clock() + self.limits.deadline_s
        self._window_start, self._window_bytes = 0.0, 0

    def left(self) -> float:
        return self.end - self.clock()

    def timeout(self):
        """The httpx timeout of the next request: never past the deadline."""
        import httpx

        left = max(self.left(), 0.01)
        return httpx.Timeout(min(self.limits.read_timeout_s, left), connect=min(self.limits.connect_timeout_s, left))

    def check(self, label: str, url: str) -> None:
        if self.left() <= 0:
            raise PaceError(
                f"the fetch passed its deadline of {self.limits.deadline_s:g} s (--deadline) while "
                f"{url} was sending; what arrived is kept, run `fhs data fetch` again (with a larger "
                f"--deadline) to resume",
                path=label,
            )

    def start(self) -> None:
        self._window_start, self._window_bytes = self.clock(), 0

    def received(self, count: int, label: str, url: str) -> None:
        """``count`` more bytes: past the deadline, or a window below the minimum rate, stops the fetch."""
        self.check(label, url)
        self._window_bytes += count
        elapsed = self.clock() - self._window_start
        if elapsed < self.limits.rate_window_s:
            return
        if self._window_bytes < self.limits.min_rate * elapsed:
            raise PaceError(
                f"{url} sent {self._window_bytes:,} bytes in {elapsed:.1f} s, below the minimum of "
                f"{self.limits.min_rate:g} bytes a second (--min-rate); what arrived is kept, run "
                f"`fhs data fetch` again to resume, or lower --min-rate",
                path=label,
            )
        self.start()
