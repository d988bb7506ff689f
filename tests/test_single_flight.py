"""Single flight: identical requests in flight at once reach the backend once, as a sequential run would."""

from __future__ import annotations

import threading
import time

from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import Message, Request, RequestRefused, Response

REQUEST = Request(messages=(Message("user", "Value: 12"),), purpose="hypothesis")


class Slow:
    """A backend whose every call takes a while (so callers overlap), counting the requests it sees."""

    kind, model = "slow", "slow"

    def __init__(self, refuse: bool = False) -> None:
        self.requests = 0
        self.refuse = refuse
        self._lock = threading.Lock()

    def complete(self, requests):
        with self._lock:
            self.requests += len(requests)
        time.sleep(0.3)
        if self.refuse:
            raise RequestRefused("refused for good")
        return [Response(text="answer", tokens_in=3, tokens_out=1) for _ in requests]


def together(function, n: int = 8):
    """``function()`` in ``n`` threads released at once; their results (or exceptions)."""
    barrier, out = threading.Barrier(n), [None] * n

    def call(i):
        barrier.wait()
        try:
            out[i] = function()
        except Exception as error:  # noqa: BLE001 - the test inspects it
            out[i] = error

    threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return out


def test_identical_requests_in_flight_together_are_sent_once(tmp_path):
    backend = Slow()
    llm = CachedLLM(backend, ResponseCache(tmp_path / "c.sqlite"))
    answers = together(lambda: llm.complete([REQUEST])[0])
    assert backend.requests == 1
    assert {a.text for a in answers} == {"answer"} and sum(not a.cached for a in answers) == 1
    assert (llm.stats.calls, llm.stats.cache_hits) == (1, 7)


def test_a_refused_request_fails_each_caller_and_nobody_waits_forever(tmp_path):
    backend = Slow(refuse=True)
    llm = CachedLLM(backend, ResponseCache(tmp_path / "c.sqlite"))
    outcomes = together(lambda: llm.complete([REQUEST]), n=4)
    assert all(isinstance(o, RequestRefused) for o in outcomes)
    assert backend.requests == 4  # nothing was stored, so each caller asked (as one after another would)
    assert llm._flights == {}
