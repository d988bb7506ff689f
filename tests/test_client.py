"""The HTTP client that keeps a server full: one loop and pool per backend, a process-wide limit per URL,
an overall deadline per request, ``finish_reason``, and thinking from the caller, never the model's name."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fake_openai import completion, serve
from fhs.llm.contract import BackendError, Message, Request
from fhs.llm.factory import backend_identity, make_llm
from fhs.llm.inflight import InFlightGate, server_gate
from fhs.llm.openai import PURPOSE_HEADER, UNREACHABLE_TRIES, OpenAIBackend


class CountingServer:
    """Answers after ``delay`` seconds and records how many requests it held at once (and on which connections)."""

    def __init__(self, delay: float = 0.2, finish_reason: str | None = "stop") -> None:
        self.delay, self.finish_reason = delay, finish_reason
        self.lock = threading.Lock()
        self.now = self.peak = self.total = 0
        self.ports: set[int] = set()
        self.purposes: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse shows

            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.now += 1
                    outer.total += 1
                    outer.peak = max(outer.peak, outer.now)
                    outer.ports.add(self.client_address[1])
                    outer.purposes.append(self.headers.get(PURPOSE_HEADER, ""))
                try:
                    time.sleep(outer.delay)
                    choice = {"message": {"content": body["messages"][-1]["content"]}}
                    if outer.finish_reason is not None:
                        choice["finish_reason"] = outer.finish_reason
                    data = json.dumps({"choices": [choice], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data.encode())
                finally:
                    with outer.lock:
                        outer.now -= 1

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def counting():
    servers: list[CountingServer] = []

    def make(**kw) -> CountingServer:
        servers.append(CountingServer(**kw))
        return servers[-1]

    yield make
    for server in servers:
        server.close()


def requests(n: int, purpose: str = "hypothesis") -> list[Request]:
    return [Request(messages=(Message("user", f"q{i}"),), sample_index=i, purpose=purpose) for i in range(n)]


def test_many_threads_share_one_limit_per_server_and_get_their_own_answers(counting):
    server = counting(delay=0.15)
    backend = OpenAIBackend([server.url], "m", max_in_flight=6)

    def one_fact(i: int) -> list[str]:
        asked = [Request(messages=(Message("user", f"fact{i}-{j}"),), sample_index=j) for j in range(2)]
        return [r.text for r in backend.complete(asked)]

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(one_fact, range(20)))
    assert answers == [[f"fact{i}-0", f"fact{i}-1"] for i in range(20)]
    assert server.peak == 6  # 40 requests from 20 threads, never more than the limit, and the limit reached
    assert len(server.ports) <= 6 * 2  # connections are reused (a new client per call opened one per request)
    backend.close()


def test_the_limit_belongs_to_the_server_url_not_to_one_backend(counting):
    server = counting(delay=0.15)
    first = OpenAIBackend([server.url], "m", max_in_flight=4)
    second = OpenAIBackend([server.url + "/v1"], "m", max_in_flight=4)  # the same endpoint, another spelling
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [pool.submit(b.complete, requests(12)) for b in (first, second)]
        assert all(len(f.result()) == 12 for f in done)
    assert server.peak == 4


def test_a_limit_of_one_sends_one_request_at_a_time(counting):
    server = counting(delay=0.05)
    backend = OpenAIBackend([server.url], "m", max_in_flight=1)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda _: backend.complete(requests(3)), range(4)))
    assert (server.peak, server.total) == (1, 12)


def test_the_gate_admits_waiters_in_order_and_across_event_loops():
    gate = InFlightGate(1)
    order: list[str] = []

    async def hold(name: str, seconds: float) -> None:
        await gate.acquire()
        order.append(name)
        await asyncio.sleep(seconds)
        gate.release()

    def loop_running(name: str, delay: float) -> None:
        async def main():
            await asyncio.sleep(delay)
            await hold(name, 0.05)
        asyncio.run(main())

    threads = [threading.Thread(target=loop_running, args=(name, 0.02 * i)) for i, name in enumerate("abc")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(5)
    assert order == ["a", "b", "c"] and gate.held == 0


def test_a_cancelled_waiter_gives_its_slot_back():
    gate = InFlightGate(1)

    async def main():
        await gate.acquire()
        waiter = asyncio.ensure_future(gate.acquire())
        await asyncio.sleep(0.01)
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        gate.release()
        await asyncio.wait_for(gate.acquire(), 1)  # not lost to the cancelled waiter
        gate.release()

    asyncio.run(main())
    assert gate.held == 0


def test_raising_a_servers_limit_admits_the_waiting_requests_at_once():
    gate = server_gate("http://limit-test.invalid/v1/chat/completions", 1)

    async def main():
        await gate.acquire()
        waiters = [asyncio.ensure_future(gate.acquire()) for _ in range(3)]
        await asyncio.sleep(0.01)
        server_gate("http://limit-test.invalid/v1/chat/completions", 4)
        await asyncio.wait_for(asyncio.gather(*waiters), 1)
        for _ in range(4):
            gate.release()

    asyncio.run(main())
    assert gate.held == 0 and gate.limit == 4


def test_finish_reason_is_read_from_the_choice(counting):
    cut = counting(delay=0, finish_reason="length")
    silent = counting(delay=0, finish_reason=None)
    assert OpenAIBackend([cut.url], "m").complete(requests(1))[0].finish_reason == "length"
    assert OpenAIBackend([silent.url], "m").complete(requests(1))[0].finish_reason is None


def test_each_request_names_its_stage_in_a_header(counting):
    server = counting(delay=0)
    OpenAIBackend([server.url], "m").complete(requests(2, purpose="verifier"))
    assert server.purposes == ["verifier", "verifier"]


class Trickle:
    """Sends headers at once, then the body one byte a second: every read succeeds, the answer never ends."""

    def __init__(self) -> None:
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.socket.listen(8)
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.stopped = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.socket.settimeout(0.2)
        while not self.stopped.is_set():
            try:
                connection, _ = self.socket.accept()
            except OSError:
                continue
            threading.Thread(target=self._drip, args=(connection,), daemon=True).start()

    def _drip(self, connection: socket.socket) -> None:
        with connection:
            connection.recv(65536)
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n")
            while not self.stopped.is_set():
                try:
                    connection.sendall(b" ")
                except OSError:
                    return
                time.sleep(1.0)

    def close(self) -> None:
        self.stopped.set()
        self.socket.close()


def test_a_server_that_trickles_bytes_is_cut_at_each_deadline_and_named_at_the_give_up_time():
    trickle = Trickle()
    try:
        backend = OpenAIBackend([trickle.url], "m", timeout=2.0, give_up_s=3.0, backoff_s=0.01)
        started = time.perf_counter()
        with pytest.raises(BackendError) as error:
            backend.complete(requests(1))
        elapsed = time.perf_counter() - started
    finally:
        trickle.close()
    message = str(error.value)
    assert trickle.url in message and "2 s deadline" in message and "--give-up-after" in message
    # the first attempt is cut at its 2 s deadline (not one per read); the second at the 3 s give-up time,
    # which bounds a request in flight too (it no longer runs on to its own deadline)
    assert 2.9 < elapsed < 4.5


@pytest.mark.parametrize("thinking, sent", [(False, {"enable_thinking": False}), (True, {"enable_thinking": True}),
                                            (None, None)])
def test_thinking_is_sent_as_asked_whatever_the_model_is_called(thinking, sent):
    for name in ("Qwen/Qwen3-32B", "my-served-alias"):
        body = make_llm("openai", name, base_urls=["http://x"], thinking=thinking).payload(requests(1)[0])
        assert body.get("chat_template_kwargs") == sent


def test_thinking_on_answers_are_kept_apart_in_the_cache_and_off_keeps_the_old_keys():
    off = OpenAIBackend(["http://x"], "Qwen/Qwen3-32B", thinking=False)
    on = OpenAIBackend(["http://x"], "Qwen/Qwen3-32B", thinking=True)
    unset = OpenAIBackend(["http://x"], "Qwen/Qwen3-32B")
    assert off.kind == unset.kind == "openai" and on.kind == "openai-thinking"
    assert backend_identity("openai", "Qwen/Qwen3-32B", base_urls=["http://x"], thinking=True)[0] == on.kind


def test_the_paper_profile_turns_thinking_off_for_an_alias(tmp_path):
    from fhs.run.inputs import ModelChoice

    choice = ModelChoice.resolve("paper", model="served-alias", base_urls=["http://x"], cache=tmp_path / "c.sqlite")
    assert choice.llm().backend.payload(requests(1)[0])["chat_template_kwargs"] == {"enable_thinking": False}
    assert choice.llm().backend.max_in_flight == 128
    on = ModelChoice.resolve("paper", model="served-alias", base_urls=["http://x"], thinking=True,
                             max_in_flight=32, cache=tmp_path / "c.sqlite")
    assert on.llm().backend.payload(requests(1)[0])["chat_template_kwargs"] == {"enable_thinking": True}
    assert on.llm().backend.max_in_flight == 32 and on.describe()["thinking"] is True
    assert "thinking" not in choice.describe()  # off leaves the run's recorded settings as they were


def test_complete_works_inside_a_running_event_loop_and_after_close(counting):
    server = counting(delay=0)
    backend = OpenAIBackend([server.url], "m")

    async def notebook_cell():
        return backend.complete(requests(2))

    assert [r.text for r in asyncio.run(notebook_cell())] == ["q0", "q1"]
    backend.close()
    assert [r.text for r in backend.complete(requests(1))] == ["q0"]  # a later call starts a fresh loop



# ---- a busy server: deadlines retried, 429/503 for as long as the server answers something, a stated give-up


def test_a_request_that_reaches_its_deadline_is_retried_like_a_reset_and_frees_its_slot():
    arrivals = []

    def reply(body):
        arrivals.append(time.perf_counter())
        if len(arrivals) == 1:
            time.sleep(30)  # a hung connection: the answer never comes in time
        return 200, completion(body["messages"][-1]["content"]), {}

    with serve(reply) as (url, _):
        backend = OpenAIBackend([url], "m", max_in_flight=1, timeout=0.5, backoff_s=0.01)
        started = time.perf_counter()
        out = backend.complete(requests(2))  # one slot: the second waits for the first's slot
        elapsed = time.perf_counter() - started
    assert [r.text for r in out] == ["q0", "q1"]
    assert len(arrivals) == 3  # the hung request was asked again; the other request once
    assert arrivals[1] - arrivals[0] >= 0.45  # the slot came free at the deadline, not before
    assert elapsed < 5  # and not after 30 s


def test_a_busy_server_is_asked_again_for_as_long_as_it_answers_something():
    answers = [(429, {"error": "slow down"}, {"Retry-After": "0"})] * 6 + [(503, {"error": "busy"}, {})] * 6
    queue = iter(answers)

    def reply(body):
        return next(queue, (200, completion("ok"), {}))

    with serve(reply) as (url, received):
        backend = OpenAIBackend([url], "m", backoff_s=0.01, max_backoff_s=0.02)  # twelve short waits
        assert backend.complete(requests(1))[0].text == "ok"
    assert len(received) == 13  # the old limit was 5 tries


def test_the_runs_retry_backoff_reaches_the_client_and_the_longest_wait_is_the_clients_own(tmp_path):
    from fhs.run.inputs import ModelChoice

    choice = ModelChoice.resolve("paper", backend="openai", base_urls=["http://127.0.0.1:9/v1"],
                                 cache=tmp_path / "c.sqlite", retry_backoff=0.05)
    assert choice.llm().backend.backoff_s == 0.05  # `fhs run --retry-backoff 0.05`
    assert OpenAIBackend(["http://127.0.0.1:9"], "m").max_backoff_s == 30.0  # fhs.llm.openai.MAX_BACKOFF_S


def test_a_server_with_no_successful_answer_gives_up_after_the_stated_time():
    with serve(lambda body: (503, {"error": "overloaded"}, {})) as (url, received):
        backend = OpenAIBackend([url], "m", backoff_s=0.05, give_up_s=1.0)
        started = time.perf_counter()
        with pytest.raises(BackendError) as error:
            backend.complete(requests(1))
        elapsed = time.perf_counter() - started
    message = str(error.value)
    assert url in message and "no successful answer" in message and "HTTP 503" in message
    assert "--give-up-after" in message
    assert 1.0 <= elapsed < 3 and len(received) > 5


def test_a_server_that_never_answered_anything_is_named_after_a_few_quick_tries():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{holder.getsockname()[1]}"  # bound, not listening: connection refused
        backend = OpenAIBackend([url], "m", backoff_s=0.01)
        started = time.perf_counter()
        with pytest.raises(BackendError, match=f"after {UNREACHABLE_TRIES} tries.*is the server running"):
            backend.complete(requests(1))
    assert time.perf_counter() - started < 5  # not the give-up time


def test_timeouts_must_be_seconds_above_zero():
    from fhs.core.errors import InputError

    for bad in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(InputError):
            OpenAIBackend(["http://127.0.0.1:9"], "m", timeout=bad)
        with pytest.raises(InputError):
            OpenAIBackend(["http://127.0.0.1:9"], "m", give_up_s=bad)
