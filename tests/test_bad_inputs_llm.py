"""Hostile input to the model client, the run command and the benchmarks: each is one line, or the right answer.

A server's URL may carry a password (never recorded), may lack a scheme or name
another protocol (refused at once); a server may answer with no text, with cut
JSON, with another model, with a huge or deeply nested body, or not at all (each
refused or bounded, and a rerun after the server is fixed asks again); a flag
may ask for more than the host can hold or combine what cannot go together.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import sqlite3
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from fake_openai import completion, serve
from fhs.cli import main
from fhs.core.errors import InputError
from fhs.llm.factory import server_urls
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import BackendError, Message, Request, RequestRefused
from fhs.llm.inflight import FILES_KEPT, check_in_flight, in_flight_cap
from fhs.llm.jsonout import MAX_REPLY_CHARS
from fhs.llm.openai import MAX_REPLY_BYTES, MAX_WAIT_S, OpenAIBackend, UnusableReply
from fhs.llm.server_info import served_context_length
from fhs.plan.sim_server import running
from llama_server import free_port
from server_runs import fhs_run, write_inputs

SECRET = "s3cretPW-7f1c"


def one_request(text: str = "q") -> list[Request]:
    return [Request(messages=(Message("user", text),), purpose="hypothesis")]


def one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("fhs: error")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.fixture(scope="module")
def sim():
    with running(free_port(), "--fixed-latency", "0.01") as url:
        yield url


# ---- credentials in a server URL (case 5) -----------------------------------------------------

def _texts_of_archive(path: Path) -> list[bytes]:
    """Every value of every table of an archive, gzip or zlib blobs opened."""
    found = [path.read_bytes()]
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f"SELECT * FROM {table}"):
                for value in row:
                    if isinstance(value, bytes):
                        for opener in (gzip.decompress, zlib.decompress):
                            try:
                                value = opener(value)
                                break
                            except (OSError, zlib.error, EOFError):
                                pass
                    found.append(value if isinstance(value, bytes) else str(value).encode())
    return found


def test_a_password_in_the_base_url_reaches_the_server_but_no_file_and_no_line(sim, tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path, n=2)
    secret_url = sim.replace("http://", f"http://alice:{SECRET}@")
    out, cache, archive = tmp_path / "run", tmp_path / "c.sqlite", tmp_path / "a.fhsa"
    code, metrics, err = fhs_run(capsys, facts, concepts, out, "--backend", "openai", "--base-url", secret_url,
                                 "--cache", str(cache), method="structured")
    assert code == 0, err
    assert metrics["llm_calls"] > 0
    assert main(["archive", str(out), "--out", str(archive), "--cache", str(cache)]) == 0
    printed, err2 = capsys.readouterr()
    stamp = json.loads((out / "run-config.json").read_text())
    assert stamp["inputs"]["model"]["base_urls"] == [sim]  # the server is named, without its user info
    for blob in [*(p.read_bytes() for p in out.rglob("*") if p.is_file()), *_texts_of_archive(archive),
                 json.dumps(metrics).encode(), (err + printed + err2).encode()]:
        assert SECRET.encode() not in blob and b"alice" not in blob


def test_a_password_in_the_base_url_is_left_out_of_an_error_line(tmp_path, capsys):
    with serve(lambda body: (400, {"error": f"bad request for http://alice:{SECRET}@x"}, {})) as (url, _):
        secret_url = url.replace("http://", f"http://alice:{SECRET}@")
        backend = OpenAIBackend([secret_url], "m", backoff_s=0.01)
        with pytest.raises(RequestRefused) as error:
            backend.complete(one_request())
    assert SECRET not in str(error.value) and url in str(error.value)


def test_the_api_key_comes_from_openai_api_key_and_is_sent_as_a_bearer_token(monkeypatch):
    seen = []

    class Handler(BaseHandler):
        def answer(self):
            seen.append(self.headers.get("Authorization"))
            return 200, completion("ok")

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with raw_server(Handler) as url:
        assert OpenAIBackend([url], "m").complete(one_request())[0].text == "ok"
    assert seen == [f"Bearer {SECRET}"]


# ---- a reply that is not an answer (case 8) ----------------------------------------------------

class Proxy:
    """The simulated server behind a switch: ``mode`` "null", "tools" or "cut" breaks its answers, "fixed" not."""

    def __init__(self, sim: str) -> None:
        self.sim, self.mode = sim, "fixed"

    def __call__(self, body: dict):
        if self.mode in ("null", "tools"):
            message = {"role": "assistant", "content": None}
            if self.mode == "tools":
                message["tool_calls"] = [{"id": "1", "type": "function",
                                          "function": {"name": "answer", "arguments": "{}"}}]
            return 200, {"model": body["model"], "choices": [{"index": 0, "message": message,
                                                               "finish_reason": "tool_calls"}]}, {}
        answer = httpx.post(f"{self.sim}/chat/completions", json=body, timeout=30, trust_env=False).json()
        if self.mode == "cut":
            choice = answer["choices"][0]
            choice["message"]["content"] = choice["message"]["content"][: len(choice["message"]["content"]) // 2]
            choice["finish_reason"] = "length"
        return 200, answer, {}


def _metric(metrics: dict) -> dict:
    return {k: v for k, v in metrics.items() if k.startswith(("recall", "mrr", "accuracy"))}


@pytest.mark.parametrize("mode", ["null", "tools"])
def test_a_reply_with_no_text_fails_its_fact_and_the_same_command_asks_again(sim, tmp_path, capsys, mode):
    facts, concepts = write_inputs(tmp_path, n=2)
    proxy = Proxy(sim)
    with serve(proxy) as (url, received):
        code, right, err = fhs_run(capsys, facts, concepts, tmp_path / "right", "--backend", "openai",
                                   "--base-url", url, "--cache", str(tmp_path / "right.sqlite"), method="structured")
        assert code == 0, err
        proxy.mode = mode
        command = ("--backend", "openai", "--base-url", url, "--cache", str(tmp_path / "c.sqlite"))
        code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", *command, method="structured")
        assert code == 3  # every fact failed: no metric of nothing
        line = one_line_error(err)
        assert ("tool calls" if mode == "tools" else "no text") in line and "run the same command again" in line
        assert len(ResponseCache(tmp_path / "c.sqlite")) == 0  # nothing kept as an answer
        proxy.mode, before = "fixed", len(received)
        code, again, err = fhs_run(capsys, facts, concepts, tmp_path / "run", *command, method="structured")
    assert code == 0, err
    assert len(received) > before and again["llm_calls"] > 0  # the server was asked again
    assert again["failed_facts"]["count"] == 0 and _metric(again) == _metric(right)


def test_a_reply_cut_at_max_tokens_is_asked_again_by_the_flag_the_warning_names(sim, tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path, n=2)
    proxy = Proxy(sim)
    with serve(proxy) as (url, received):
        code, right, err = fhs_run(capsys, facts, concepts, tmp_path / "right", "--backend", "openai",
                                   "--base-url", url, "--cache", str(tmp_path / "right.sqlite"), method="structured")
        assert code == 0, err
        proxy.mode = "cut"
        command = ("--backend", "openai", "--base-url", url, "--cache", str(tmp_path / "c.sqlite"))
        code, cut, err = fhs_run(capsys, facts, concepts, tmp_path / "run", *command, method="structured")
        assert code == 0, err
        assert sum(cut["truncations"].values()) > 0 and "--retry-unusable" in err
        proxy.mode, before = "fixed", len(received)
        code, again, err = fhs_run(capsys, facts, concepts, tmp_path / "run", *command, "--retry-unusable",
                                   method="structured")
    assert code == 0, err
    assert len(received) > before and again["n_new"] == 2  # both facts were run again, the server asked
    assert sum(again["truncations"].values()) == 0 and _metric(again) == _metric(right)


def test_retry_unusable_and_replay_unparsed_cannot_go_together(tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path, n=1)
    code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--retry-unusable",
                           "--cache-unparsed", method="structured")
    assert code == 2 and "--cache-unparsed" in one_line_error(err)


# ---- another model, a huge body, deep nesting (cases 10, 21, nesting) ---------------------------

def test_a_reply_from_another_model_is_refused_naming_both_and_nothing_is_cached(tmp_path):
    with serve(lambda body: (200, completion("ok", model="other/model-7b"), {})) as (url, _):
        llm = CachedLLM(OpenAIBackend([url], "asked/model-32b"), ResponseCache(tmp_path / "c.sqlite"))
        with pytest.raises(BackendError) as error:
            llm.complete(one_request())
    message = str(error.value)
    assert "'other/model-7b'" in message and "'asked/model-32b'" in message and "\n" not in message
    assert len(ResponseCache(tmp_path / "c.sqlite")) == 0


def test_a_dated_snapshot_of_the_model_asked_is_the_same_model():
    with serve(lambda body: (200, completion("ok", model="gpt-4o-2024-08-06"), {})) as (url, _):
        assert OpenAIBackend([url], "gpt-4o").complete(one_request())[0].text == "ok"


def test_a_reply_over_the_size_limit_is_refused_naming_it_and_nothing_is_cached(tmp_path):
    huge = "x" * (MAX_REPLY_BYTES + 10)
    with serve(lambda body: (200, completion(huge), {})) as (url, _):
        llm = CachedLLM(OpenAIBackend([url], "m"), ResponseCache(tmp_path / "c.sqlite"))
        with pytest.raises(RequestRefused) as error:
            llm.complete(one_request())
    assert f"{MAX_REPLY_BYTES:,} bytes" in str(error.value)
    assert len(ResponseCache(tmp_path / "c.sqlite")) == 0


def test_a_reply_longer_than_any_stage_parses_is_not_cached_whole(tmp_path):
    long = "x" * (MAX_REPLY_CHARS * 20)
    with serve(lambda body: (200, completion(long), {})) as (url, _):
        llm = CachedLLM(OpenAIBackend([url], "m"), ResponseCache(tmp_path / "c.sqlite"))
        assert llm.complete(one_request())[0].text == long  # this run sees it (and no stage parses it)
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("SELECT length(text) FROM responses").fetchone()[0] == MAX_REPLY_CHARS + 1
    assert ResponseCache(tmp_path / "c.sqlite").unparsed_count() == 1  # so the next run asks again


def test_a_reply_without_a_length_that_runs_past_the_limit_is_cut_off():
    class Endless(BaseHandler):
        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()  # no Content-Length: the body ends when the connection closes
            try:
                chunk = b"[" * 65536
                for _ in range(MAX_REPLY_BYTES // len(chunk) + 8):
                    self.wfile.write(chunk)
            except OSError:
                pass

    with raw_server(Endless) as url:
        with pytest.raises(RequestRefused) as error:
            OpenAIBackend([url], "m").complete(one_request())
    assert "ran past it" in str(error.value)


def test_a_chat_reply_nested_100000_deep_is_one_line():
    deep = '{"choices": [{"message": {"content": "x"}}], "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with serve(lambda body: (200, deep, {})) as (url, _):
        with pytest.raises(BackendError) as error:
            OpenAIBackend([url], "m").complete(one_request())
    assert "nested deeper" in str(error.value) and "\n" not in str(error.value)


def test_a_model_listing_nested_100000_deep_says_nothing_with_one_warning(capsys):
    class Deep(BaseHandler):
        def do_GET(self):  # noqa: N802
            self.reply(200, '{"data": ' + "[" * 100_000 + "]" * 100_000 + "}")

    with raw_server(Deep) as url:
        assert served_context_length(url, "m") is None
    assert "nested deeper" in capsys.readouterr().err


# ---- URLs, in-flight limits, deadlines (cases 18, 22, 23) ----------------------------------------

@pytest.mark.parametrize("url", ["127.0.0.1:8000/v1", "localhost:8000", "ftp://127.0.0.1/v1", "file:///tmp/v1",
                                 "http://[::1", "http://127.0.0.1:99999/v1", "http:///v1", ""])
def test_a_base_url_that_is_not_an_http_server_is_refused_at_once(tmp_path, capsys, url):
    facts, concepts = write_inputs(tmp_path, n=1)
    started = time.perf_counter()
    code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--base-url", url,
                           "--cache", str(tmp_path / "c.sqlite"), method="structured")
    assert code == 2 and time.perf_counter() - started < 5
    assert "base-url" in one_line_error(err) and "http://127.0.0.1:8000/v1" in err
    assert not (tmp_path / "run").exists()


def test_a_bad_url_in_the_environment_is_named_by_its_variable(monkeypatch):
    monkeypatch.setenv("FHS_LLM_BASE_URLS", "ftp://127.0.0.1/v1")
    with pytest.raises(InputError) as error:
        server_urls(None)
    assert "FHS_LLM_BASE_URLS" in str(error.value) and "ftp" in str(error.value)


def test_more_requests_in_flight_than_the_host_holds_is_one_line_at_once(tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path, n=1)
    started = time.perf_counter()
    code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--base-url",
                           "http://127.0.0.1:9/v1", "--max-in-flight", "100000", method="structured")
    assert code == 2 and time.perf_counter() - started < 5
    line = one_line_error(err)
    assert "max-in-flight" in line and f"at most {in_flight_cap():,}" in line


def test_the_cap_follows_the_hard_open_file_limit_and_the_soft_one_is_raised_to_match(monkeypatch):
    import resource

    asked = []
    monkeypatch.setattr(resource, "getrlimit", lambda which: (256, 1024))
    monkeypatch.setattr(resource, "setrlimit", lambda which, limits: asked.append(limits))
    assert in_flight_cap() == 1024 - FILES_KEPT and in_flight_cap(servers=2) == (1024 - FILES_KEPT) // 2
    with pytest.raises(InputError, match=f"at most {1024 - FILES_KEPT}"):
        check_in_flight(1000)
    assert check_in_flight(200) == 200 and asked == [(200 + FILES_KEPT, 1024)]  # a low soft limit is raised


def test_clients_are_made_as_requests_need_them():
    with serve(lambda body: (200, completion("ok"), {})) as (url, _):
        backend = OpenAIBackend([url], "m", max_in_flight=in_flight_cap())
        assert backend._client == []  # nothing made up front, however high the limit
        backend.complete(one_request())
        assert len(backend._client) == 1
        backend.close()


@pytest.mark.parametrize("flag", ["--request-timeout", "--give-up-after"])
def test_a_timeout_over_a_week_is_refused(tmp_path, capsys, flag):
    facts, concepts = write_inputs(tmp_path, n=1)
    code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--base-url",
                           "http://127.0.0.1:9/v1", flag, "1e300", method="structured")
    assert code == 2 and flag in one_line_error(err) and "a week" in err
    with pytest.raises(ValueError):
        OpenAIBackend(["http://127.0.0.1:9"], "m", timeout=MAX_WAIT_S * 2)


def test_the_give_up_time_cuts_a_request_already_in_flight():
    with hung_server() as url:
        backend = OpenAIBackend([url], "m", timeout=MAX_WAIT_S, give_up_s=1.0)
        started = time.perf_counter()
        with pytest.raises(BackendError) as error:
            backend.complete(one_request())
        elapsed = time.perf_counter() - started
    assert "give-up time" in str(error.value) and "unanswered" in str(error.value)
    assert 0.9 < elapsed < 3.5  # not the request's own deadline of a week


# ---- the oracle's flags, the benchmarks (cases 11, 12, bench) -----------------------------------

def test_the_oracle_backend_refuses_a_replay(tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path, n=1)
    (tmp_path / "a.fhsa").write_bytes(b"")
    code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "oracle", "--replay",
                           str(tmp_path / "a.fhsa"), method="structured")
    assert code == 2 and "--replay" in one_line_error(err)


def test_oracle_noise_given_twice_is_refused(tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path, n=1)
    code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "oracle", "--oracle-noise",
                           "hypotheses=1,hypotheses=0", method="structured")
    assert code == 2 and "hypotheses is given twice" in one_line_error(err)


def test_bench_llm_with_no_method_names_the_methods_not_a_package(capsys):
    assert main(["bench", "llm", "--methods", ",,,"]) == 2
    line = one_line_error(capsys.readouterr().err)
    assert "methods" in line and "no method" in line


def test_bench_retrieval_on_a_taxonomy_smaller_than_k_times_shorter_lists(tmp_path, capsys):
    concepts = "id,label,definition,datatype\n" + "".join(
        f"C{i},Concept {i},Amount of thing {i} recognized.,monetaryItemType\n" for i in range(12))
    (tmp_path / "concepts.csv").write_text(concepts)
    rows = [{"id": f"f{i}", "context_id": f"c{i}", "modality": "table", "value": "1", "datatype": "monetaryItemType",
             "context": f"Thing {i} amount 1", "gold": [f"C{i}"]} for i in range(3)]
    (tmp_path / "facts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "my.yaml").write_text("name: mine\nfacts: facts.jsonl\ntaxonomy: concepts.csv\n")
    code = main(["bench", "retrieval", "--dataset", str(tmp_path / "my.yaml"), "--queries", "3",
                 "--reference-queries", "2", "--repeats", "1"])
    out, err = capsys.readouterr()
    assert code == 0, err
    result = json.loads(out)
    assert result["retrieval_config"]["top_k"] == 12 and "fewer than top_k" in err


# ---- small servers -----------------------------------------------------------------------------

class BaseHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status: int, payload) -> None:
        data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def answer(self):
        return 200, completion("ok")

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        self.reply(*self.answer())


@contextlib.contextmanager
def raw_server(handler):
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextlib.contextmanager
def hung_server():
    """Accepts connections, reads the request, never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    stop = threading.Event()
    held = []

    def accept():
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
                held.append(connection)
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        for connection in held:
            connection.close()
        listener.close()
