"""The LLM layer: cache keys, the persistent cache, the three backends and the factory.

Unit tests use fakes and a tiny in-test HTTP server. Tests marked ``model`` run
SmolLM2-135M and Qwen2.5-0.5B through llama.cpp on CPU (the cpu extra).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import socket
import sys
import threading
import time
import types
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import jsonschema
import pytest

from fhs.core.errors import InputError
from fhs.llm.backends import BASE_URLS_ENV_VAR
from fhs.llm import factory as F
from fhs.llm import llama_cpp as LC
from fhs.llm import vllm as V
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import BackendError, CallStats, Message, Request, Response, cache_key, derive_seed
from fhs.llm.factory import make_llm
from fhs.llm.jsonout import parse_object
from fhs.llm.openai import OpenAIBackend
from llama_server import serve_smollm2  # tests/llama_server.py

BASE = Request(messages=(Message("system", "Answer in JSON."), Message("user", "Revenue?")))


# --- cache keys and seeds ---------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.8},
        {"top_p": 0.9},
        {"max_tokens": 128},
        {"seed": 1},
        {"sample_index": 1},
        {"attempt": 1},
        {"schema": {"type": "object"}},
        {"messages": (Message("system", "Answer in JSON."), Message("user", "Expense?"))},
    ],
)
def test_cache_key_changes_with_every_decoding_input(change):
    assert cache_key("k", "m", replace(BASE, **change)) != cache_key("k", "m", BASE)


def test_cache_key_ignores_purpose_but_not_backend_or_model():
    key = cache_key("k", "m", BASE)
    assert cache_key("k", "m", replace(BASE, purpose="verifier")) == key
    assert cache_key("other", "m", BASE) != key
    assert cache_key("k", "other", BASE) != key


def test_cache_key_is_stable_for_equal_values():
    # 0 and 0.0 are the same temperature; a schema's key order does not matter.
    a = replace(BASE, temperature=0, schema={"a": 1, "b": [1, 2]})
    b = replace(BASE, temperature=0.0, schema={"b": (1, 2), "a": 1})
    assert cache_key("k", "m", a) == cache_key("k", "m", b)


def test_derived_seeds_differ_per_sample_and_attempt_and_replay():
    seeds = {derive_seed(0, j, a) for j in range(8) for a in range(2)}
    assert len(seeds) == 16
    assert derive_seed(3, 1) == derive_seed(3, 1)
    assert all(0 <= s < 2**31 for s in seeds)


# --- the persistent cache ---------------------------------------------------------------


@dataclass
class FakeBackend:
    """Echoes the request; counts calls; can be told to die on the n-th batch."""

    kind: str = "fake"
    model: str = "fake-model"
    name: str = "fake:fake-model"
    batches: list[list[Request]] = field(default_factory=list)
    fail_on_batch: int | None = None

    def complete(self, requests):
        if self.fail_on_batch is not None and len(self.batches) == self.fail_on_batch:
            raise KeyboardInterrupt("killed mid-run")
        self.batches.append(list(requests))
        return [
            Response(text=f"{r.messages[-1].content}#{r.sample_index}", tokens_in=7,
                     tokens_out=3, seconds=0.5, model=self.model)
            for r in requests
        ]

    @property
    def calls(self):
        return sum(len(b) for b in self.batches)


def _samples(n, purpose="hypothesis"):
    return [replace(BASE, sample_index=j, temperature=0.8, purpose=purpose) for j in range(n)]


def test_cached_llm_miss_then_hit(tmp_path):
    backend = FakeBackend()
    cached = CachedLLM(backend, ResponseCache(tmp_path / "c.sqlite"))
    first = cached.complete(_samples(2))
    second = cached.complete(_samples(2))
    assert [r.text for r in first] == [r.text for r in second] == ["Revenue?#0", "Revenue?#1"]
    assert [r.cached for r in first] == [False, False]
    assert [r.cached for r in second] == [True, True]
    assert backend.calls == 2
    stats = cached.stats
    assert (stats.calls, stats.cache_hits) == (2, 2)
    assert stats.seconds == pytest.approx(2 * 0.5)  # only real calls cost time
    assert stats.tokens_in == 4 * 7 and stats.by_purpose == {"hypothesis": 4}


def test_cached_llm_sends_duplicates_once(tmp_path):
    backend = FakeBackend()
    cached = CachedLLM(backend, ResponseCache(tmp_path / "c.sqlite"))
    out = cached.complete([BASE, BASE, replace(BASE, purpose="x")])
    assert backend.calls == 1
    assert [r.cached for r in out] == [False, True, True]
    assert len({r.text for r in out}) == 1


def test_cache_survives_reopen_and_purpose_is_not_part_of_the_key(tmp_path):
    path = tmp_path / "c.sqlite"
    CachedLLM(FakeBackend(), ResponseCache(path)).complete([replace(BASE, purpose="a")])
    backend = FakeBackend()
    out = CachedLLM(backend, ResponseCache(path)).complete([replace(BASE, purpose="b")])
    assert out[0].cached and backend.calls == 0


def test_killed_run_keeps_finished_batches_and_resumes(tmp_path):
    path = tmp_path / "c.sqlite"
    requests = _samples(10)
    dying = FakeBackend(fail_on_batch=2)
    with pytest.raises(KeyboardInterrupt):
        CachedLLM(dying, ResponseCache(path), batch_size=3).complete(requests)
    assert len(ResponseCache(path)) == 6  # two committed batches of 3
    resumed = FakeBackend()
    out = CachedLLM(resumed, ResponseCache(path), batch_size=3).complete(requests)
    assert resumed.calls == 4
    assert [r.cached for r in out] == [True] * 6 + [False] * 4


def test_cache_stats_for_the_cost_chapter(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    cached = CachedLLM(FakeBackend(), cache)
    cached.complete(_samples(3, "hypothesis") + [replace(BASE, purpose="verifier")])
    stats = cache.stats()
    assert stats.entries == 4 and stats.tokens_in == 4 * 7 and stats.tokens_out == 4 * 3
    assert stats.seconds == pytest.approx(4 * 0.5)
    assert stats.by_purpose["hypothesis"]["entries"] == 3
    assert stats.by_purpose["verifier"]["entries"] == 1
    assert stats.by_model == {"fake-model": 4}


def test_a_file_that_is_not_a_cache_is_a_clear_error(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(InputError, match="not a usable response cache"):
        ResponseCache(path)


# --- OpenAI-compatible HTTP against an in-test server -----------------------------------


class FakeServer:
    """A threaded HTTP server answering /v1/chat/completions with a canned completion."""

    def __init__(self, delay=0.0, fail_first=0, status=503):
        self.delay = delay
        self.fail_first = fail_first
        self.status = status
        self.bodies: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with outer.lock:
                    outer.bodies.append(body)
                    outer.in_flight += 1
                    outer.max_in_flight = max(outer.max_in_flight, outer.in_flight)
                    failing = len(outer.bodies) <= outer.fail_first
                try:
                    time.sleep(outer.delay)
                    if failing:
                        self._send(outer.status, {"error": "busy"})
                        return
                    user = body["messages"][-1]["content"]
                    self._send(200, {
                        "model": body["model"],
                        "choices": [{"message": {"role": "assistant",
                                                 "content": f"echo:{user}:{body['seed']}"}}],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 4},
                    })
                finally:
                    with outer.lock:
                        outer.in_flight -= 1

            def _send(self, status, payload):
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02},
                                       daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _users(n):
    return [replace(BASE, messages=(Message("user", f"q{i}"),), sample_index=i) for i in range(n)]


def test_openai_backend_answers_in_order_with_usage():
    with FakeServer() as server:
        backend = OpenAIBackend([server.url], "m", max_in_flight=4)
        requests = _users(6)
        out = backend.complete(requests)
    expected = [f"echo:q{i}:{derive_seed(r.seed, r.sample_index)}" for i, r in enumerate(requests)]
    assert [r.text for r in out] == expected
    assert all(r.tokens_in == 11 and r.tokens_out == 4 and r.seconds > 0 for r in out)


def test_openai_backend_keeps_max_in_flight_requests_busy():
    with FakeServer(delay=0.3) as server:
        backend = OpenAIBackend([server.url], "m", max_in_flight=3)
        started = time.perf_counter()
        backend.complete(_users(9))
        elapsed = time.perf_counter() - started
    assert server.max_in_flight == 3
    assert elapsed < 9 * 0.3  # serial could not be faster than nine delays


def test_openai_backend_spreads_requests_round_robin():
    with FakeServer() as a, FakeServer() as b:
        backend = OpenAIBackend([a.url, b.url + "/v1"], "m", max_in_flight=8)
        backend.complete(_users(8))
        backend.complete(_users(1))
        backend.complete(_users(1))
    assert (len(a.bodies), len(b.bodies)) == (5, 5)


def test_openai_backend_retries_on_503():
    with FakeServer(fail_first=2) as server:
        backend = OpenAIBackend([server.url], "m", backoff_s=0.01, max_retries=3)
        out = backend.complete(_users(1))
    assert out[0].text.startswith("echo:q0") and len(server.bodies) == 3


def test_openai_backend_gives_up_on_a_failing_server():
    with FakeServer(fail_first=100, status=500) as server:
        backend = OpenAIBackend([server.url], "m", backoff_s=0.01, max_retries=2)
        with pytest.raises(BackendError, match="kept failing after 3 tries"):
            backend.complete(_users(1))
    assert len(server.bodies) == 3


def test_openai_backend_does_not_retry_a_client_error():
    with FakeServer(fail_first=100, status=400) as server:
        backend = OpenAIBackend([server.url], "m", backoff_s=0.01)
        with pytest.raises(BackendError, match="HTTP 400"):
            backend.complete(_users(1))
    assert len(server.bodies) == 1


def test_unreachable_server_is_a_clear_error():
    url = f"http://127.0.0.1:{_free_port()}"
    backend = OpenAIBackend([url], "Qwen/Qwen3-32B", backoff_s=0.01, max_retries=1)
    with pytest.raises(BackendError) as error:
        backend.complete(_users(1))
    message = str(error.value)
    assert url in message and "is the server running?" in message and "vllm serve" in message


def test_retry_moves_on_to_the_next_server():
    dead = f"http://127.0.0.1:{_free_port()}"
    with FakeServer() as alive:
        backend = OpenAIBackend([dead, alive.url], "m", backoff_s=0.01, max_retries=2)
        out = backend.complete(_users(2))
    assert len(out) == 2 and len(alive.bodies) == 2


def test_openai_backend_works_inside_a_running_event_loop():
    # What Jupyter does: complete() is called synchronously while a loop runs.
    with FakeServer() as server:
        backend = OpenAIBackend([server.url], "m")

        async def notebook_cell():
            return backend.complete(_users(2))

        out = asyncio.run(notebook_cell())
    assert [r.text.split(":")[1] for r in out] == ["q0", "q1"]


SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


@pytest.mark.parametrize(
    "structured, expected",
    [
        ("json_schema", {"type": "json_schema", "json_schema": {"name": "response", "schema": SCHEMA}}),
        ("json_object", {"type": "json_object", "schema": SCHEMA}),
        ("none", None),
    ],
)
def test_structured_output_request_shapes(structured, expected):
    request = replace(BASE, schema=SCHEMA, temperature=0.8, top_p=0.9, max_tokens=64, seed=5)
    body = OpenAIBackend(["http://x"], "m", structured=structured).payload(request)
    assert body.get("response_format") == expected
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.8, 0.9, 64)
    assert body["seed"] == derive_seed(5, 0, 0)
    assert "response_format" not in OpenAIBackend(["http://x"], "m").payload(BASE)


def test_openai_backend_sends_the_api_key():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["auth"] = request.headers.get("authorization")
        return httpx.Response(200, json={"choices": [{"message": {"content": "ok"}}]})

    # A transport-level check without a socket: patch AsyncClient to use a mock transport.
    original = httpx.AsyncClient

    class MockClient(original):
        def __init__(self, *args, **kwargs):
            kwargs["transport"] = httpx.MockTransport(handler)
            super().__init__(*args, **kwargs)

    httpx.AsyncClient = MockClient
    try:
        out = OpenAIBackend(["http://x"], "m", api_key="secret").complete([BASE])
    finally:
        httpx.AsyncClient = original
    assert seen["auth"] == "Bearer secret" and out[0].text == "ok" and out[0].tokens_in == 0


def test_openai_backend_rejects_bad_configuration():
    with pytest.raises(InputError, match="structured"):
        OpenAIBackend(["http://x"], "m", structured="regex")
    with pytest.raises(InputError, match="base_urls"):
        OpenAIBackend([], "m")


# --- vLLM, with a fake module -----------------------------------------------------------


def _fake_vllm(monkeypatch, new_api=True):
    record: dict = {"chat_calls": []}

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class Params:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    class LLM:
        def __init__(self, **kwargs):
            record["engine_args"] = kwargs

        def chat(self, conversations, sampling_params=None, use_tqdm=True, chat_template_kwargs=None):
            record["chat_calls"].append((conversations, sampling_params, chat_template_kwargs))
            return [
                types.SimpleNamespace(
                    prompt_token_ids=list(range(5 + i)),
                    outputs=[types.SimpleNamespace(text=f"out{i}", token_ids=[1, 2, 3])],
                )
                for i in range(len(conversations))
            ]

    vllm = types.ModuleType("vllm")
    sampling = types.ModuleType("vllm.sampling_params")
    vllm.LLM, vllm.SamplingParams, vllm.sampling_params = LLM, SamplingParams, sampling
    setattr(sampling, "StructuredOutputsParams" if new_api else "GuidedDecodingParams", Params)
    monkeypatch.setitem(sys.modules, "vllm", vllm)
    monkeypatch.setitem(sys.modules, "vllm.sampling_params", sampling)
    return record


@pytest.mark.parametrize("new_api, keyword", [(True, "structured_outputs"), (False, "guided_decoding")])
def test_vllm_backend_maps_requests_to_one_chat_call(monkeypatch, new_api, keyword):
    record = _fake_vllm(monkeypatch, new_api)
    backend = V.VLLMBackend("Qwen/Qwen3-32B", max_num_seqs=8)
    assert record["engine_args"] == {"model": "Qwen/Qwen3-32B", "enable_prefix_caching": True,
                                     "max_num_seqs": 8}
    requests = [replace(BASE, temperature=0.8, sample_index=j, max_tokens=2048) for j in range(2)]
    requests.append(replace(BASE, schema=SCHEMA))
    out = backend.complete(requests)
    assert len(record["chat_calls"]) == 1
    conversations, params, template_kwargs = record["chat_calls"][0]
    assert template_kwargs == {"enable_thinking": False}
    assert conversations[0] == [{"role": "system", "content": "Answer in JSON."},
                                {"role": "user", "content": "Revenue?"}]
    first, second, structured = (p.kwargs for p in params)
    assert first == {"n": 1, "temperature": 0.8, "top_p": 1.0, "max_tokens": 2048,
                     "seed": derive_seed(0, 0)}
    assert second["seed"] == derive_seed(0, 1) != first["seed"]
    assert keyword not in first and structured[keyword].kwargs == {"json": SCHEMA}
    assert [(r.text, r.tokens_in, r.tokens_out) for r in out] == [
        ("out0", 5, 3), ("out1", 6, 3), ("out2", 7, 3)]


def _slow_engine(monkeypatch, seconds=0.2, fail_on=None):
    """A stand-in vLLM whose LLM.chat takes ``seconds`` and answers each conversation with its own text."""
    record = _fake_vllm(monkeypatch)
    calls = record["chat_calls"]

    def chat(self, conversations, sampling_params=None, use_tqdm=True, chat_template_kwargs=None):
        calls.append((conversations, sampling_params, chat_template_kwargs))
        time.sleep(seconds)
        texts = [c[-1]["content"] for c in conversations]
        if fail_on is not None and fail_on in texts:
            raise RuntimeError("CUDA out of memory")
        return [types.SimpleNamespace(prompt_token_ids=[1], outputs=[types.SimpleNamespace(
            text=text.upper(), token_ids=[1, 2], finish_reason="length" if "cut" in text else "stop")])
            for text in texts]

    sys.modules["vllm"].LLM.chat = chat
    return calls


def test_vllm_backend_batches_requests_from_many_threads(monkeypatch):
    calls = _slow_engine(monkeypatch)
    backend = V.VLLMBackend("Qwen/Qwen3-32B", batch_size=64)

    def one_fact(i):
        asked = [Request(messages=(Message("user", f"fact{i}-{j}"),), sample_index=j) for j in range(2)]
        return [r.text for r in backend.complete(asked)]

    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=12) as pool:
        answers = list(pool.map(one_fact, range(12)))
    assert answers == [[f"FACT{i}-0", f"FACT{i}-1"] for i in range(12)]
    assert sum(backend.batches) == 24 and len(calls) == len(backend.batches) < 12  # facts shared engine calls
    assert max(backend.batches) > 2


def test_vllm_batches_never_exceed_the_batch_size_and_keep_each_callers_order(monkeypatch):
    _slow_engine(monkeypatch, seconds=0.01)
    backend = V.VLLMBackend("m", batch_size=4)
    asked = [Request(messages=(Message("user", f"r{i}"),)) for i in range(10)]
    assert [r.text for r in backend.complete(asked)] == [f"R{i}" for i in range(10)]
    assert max(backend.batches) <= 4


def test_an_engine_error_reaches_every_caller_of_its_batch_and_the_next_batch_runs(monkeypatch):
    _slow_engine(monkeypatch, seconds=0.01, fail_on="boom")
    backend = V.VLLMBackend("m")
    with pytest.raises(RuntimeError, match="out of memory"):
        backend.complete([Request(messages=(Message("user", "boom"),))])
    assert backend.complete([Request(messages=(Message("user", "fine"),))])[0].text == "FINE"


def test_vllm_reports_finish_reason_and_thinking_from_the_caller(monkeypatch):
    calls = _slow_engine(monkeypatch, seconds=0)
    backend = make_llm("vllm", "served-alias", thinking=False)
    out = backend.complete([Request(messages=(Message("user", "cut short"),))])
    assert out[0].finish_reason == "length" and calls[-1][2] == {"enable_thinking": False}
    assert make_llm("vllm", "served-alias", thinking=True).kind == "vllm-thinking"


def test_missing_vllm_says_install_the_gpu_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # makes `import vllm` raise ImportError
    with pytest.raises(BackendError, match="gpu extra"):
        V.VLLMBackend("Qwen/Qwen3-32B")


# --- the factory --------------------------------------------------------------------------


def test_make_llm_openai_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv(BASE_URLS_ENV_VAR, "http://a:1, http://b:2")
    llm = make_llm("openai", "Qwen/Qwen3-32B")
    assert isinstance(llm, OpenAIBackend) and llm.base_urls == ["http://a:1", "http://b:2"]
    assert "chat_template_kwargs" not in llm.payload(BASE)  # the model's name decides nothing
    plain = make_llm("openai", "other", base_urls=["http://c:3"], structured="json_object")
    assert "chat_template_kwargs" not in plain.payload(BASE) and plain.structured == "json_object"
    cached = make_llm("openai", "other", base_urls=["http://c:3"], cache_path=tmp_path / "c.sqlite")
    assert isinstance(cached, CachedLLM) and cached.kind == "openai"


def test_make_llm_rejects_unknown_backend_and_model():
    with pytest.raises(InputError, match="openai, llama_cpp, vllm"):
        make_llm("transformers", "x")
    with pytest.raises(InputError, match="unknown local model"):
        make_llm("llama_cpp", "gpt-5")


# =========================================================================================
# Real models on CPU (pytest -m model). Short prompts, small max_tokens, n_ctx 2048.
# =========================================================================================

QUERY_SCHEMA = {
    "type": "object",
    "properties": {
        "retrieval_query": {"type": "string"},
        "family": {"type": "string", "enum": ["Revenue", "Expense", "Asset", "UNRESOLVED"]},
    },
    "required": ["retrieval_query", "family"],
    "additionalProperties": False,
}
QUERY_REQUEST = Request(
    messages=(
        Message("system", "You tag financial facts. Reply with JSON only."),
        Message("user", 'Fact: "Net sales 1,234" (monetary). Give retrieval_query and family.'),
    ),
    temperature=0.0,
    max_tokens=96,
    schema=QUERY_SCHEMA,
    purpose="hypothesis",
)


def _valid(text: str) -> dict:
    value = json.loads(text)  # strict: raw control characters would fail here
    jsonschema.validate(value, QUERY_SCHEMA)
    return value


@pytest.fixture(scope="module")
def smollm2():
    from fhs.llm.models import smollm2_path

    return LC.LlamaCppBackend(smollm2_path(), n_ctx=2048, model_name="smollm2-135m")


@pytest.mark.model
def test_llama_cpp_structured_output_validates(smollm2):
    out = smollm2.complete([QUERY_REQUEST])[0]
    _valid(out.text)
    assert out.tokens_in > 0 and 0 < out.tokens_out <= 96 and out.model == "smollm2-135m"


@pytest.mark.model
def test_llama_cpp_samples_differ_by_sample_index_and_replay(smollm2):
    free = replace(QUERY_REQUEST, temperature=1.0, schema=None, max_tokens=24)
    a, b, a_again = smollm2.complete([free, replace(free, sample_index=1), free])
    assert a.text == a_again.text and a.text != b.text


def test_llama_threads_come_from_the_argument_then_the_environment_then_two(monkeypatch):
    monkeypatch.delenv(LC.THREADS_ENV, raising=False)
    assert LC.thread_options() == {"n_threads": 2}  # prompts: llama.cpp's own default, every core
    assert LC.thread_options(3) == {"n_threads": 3, "n_threads_batch": 3}
    monkeypatch.setenv(LC.THREADS_ENV, "1")
    assert LC.thread_options() == {"n_threads": 1, "n_threads_batch": 1}
    assert LC.thread_options(4) == {"n_threads": 4, "n_threads_batch": 4}
    for bad in ("two", "0", "-1", "1.5"):
        monkeypatch.setenv(LC.THREADS_ENV, bad)
        with pytest.raises(InputError, match=f"{LC.THREADS_ENV}.*whole number of threads.*{bad!r}"):
            LC.thread_options()


@pytest.mark.model
def test_one_thread_gives_two_threads_logits_and_replies(monkeypatch):
    """Why make test may run model tests in two processes of one thread: the count changes no bit."""
    import numpy as np

    from fhs.llm.models import smollm2_path

    monkeypatch.setenv(LC.THREADS_ENV, "1")  # the environment's count, unless a count is given
    single = LC.LlamaCppBackend(smollm2_path(), n_ctx=2048, model_name="smollm2-135m")
    double = LC.LlamaCppBackend(smollm2_path(), n_ctx=2048, n_threads=2, model_name="smollm2-135m")
    assert (single._llm.n_threads, single._llm.n_threads_batch) == (1, 1)  # prompts too: no core is spun twice
    assert (double._llm.n_threads, double._llm.n_threads_batch) == (2, 2)
    free = replace(QUERY_REQUEST, temperature=1.0, schema=None, max_tokens=24)
    assert [r.text for r in single.complete([QUERY_REQUEST, free])] == [
        r.text for r in double.complete([QUERY_REQUEST, free])]
    tokens = double._llm.tokenize(b"Revenue from contracts with customers, excluding assessed tax")
    last = []
    for backend in (single, double):
        backend._llm.reset()
        backend._llm.eval(tokens)
        last.append(np.array(backend._llm.scores[backend._llm.n_tokens - 1]))
    assert np.array_equal(last[0], last[1])


STRING_SCHEMA = {
    "type": "object",
    "properties": {"poem": {"type": "string"}},
    "required": ["poem"],
}
CONTROL_BYTES = [b"\n", b"\t", b"\r", b"\x01", b"\x1b", b"\x7f"]


def _push_control_chars(backend):
    """A logit bias that makes the model want to write control characters everywhere."""
    bias = {}
    for raw in CONTROL_BYTES:
        for token in backend._llm.tokenize(raw, add_bos=False, special=False):
            bias[token] = 40.0
    return bias


@pytest.mark.model
def test_tightened_grammar_bans_control_characters_in_strings(smollm2, monkeypatch):
    request = replace(
        QUERY_REQUEST,
        messages=(Message("user", "Write a poem with many lines as JSON {\"poem\": ...}."),),
        schema=STRING_SCHEMA,
        max_tokens=40,
    )
    bias = _push_control_chars(smollm2)
    tight = smollm2.complete_with(request, logit_bias=bias).text
    assert not any(ord(c) < 0x20 or ord(c) == 0x7F for c in tight.split('"poem"', 1)[1])
    # The same push against llama.cpp's own (loose) grammar does produce raw control
    # characters inside the string: the quirk the tightening removes is real.
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    loose = smollm2._llama_cpp.LlamaGrammar.from_string(
        json_schema_to_gbnf(json.dumps(STRING_SCHEMA)), verbose=False)
    raw = smollm2.complete_with(request, logit_bias=bias, grammar=loose).text
    assert any(ord(c) < 0x20 for c in raw.split('"poem"', 1)[1])


@pytest.mark.model
def test_json_schema_grammar_text():
    grammar = LC.json_schema_grammar(STRING_SCHEMA)
    assert LC._TIGHT_STRING_CHAR in grammar and LC._LOOSE_STRING_CHAR not in grammar
    numbers_only = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert "char ::=" not in LC.json_schema_grammar(numbers_only)


@pytest.fixture(scope="module")
def llama_server():
    """llama-cpp-python's OpenAI-compatible server on a free port; always stopped."""
    with serve_smollm2(n_ctx=2048) as url:
        yield url


@dataclass
class Counting:
    inner: object
    calls: int = 0

    def __post_init__(self):
        self.kind, self.model, self.name = self.inner.kind, self.inner.model, self.inner.name

    def complete(self, requests):
        self.calls += len(requests)
        return self.inner.complete(requests)


@pytest.mark.model
def test_llama_cpp_server_structured_output_and_cache(llama_server, tmp_path):
    backend = Counting(OpenAIBackend([llama_server], "smollm2-135m", structured="json_object",
                                     max_in_flight=2))
    cached = CachedLLM(backend, ResponseCache(tmp_path / "c.sqlite"))
    stats = CallStats()
    [first] = cached.complete([QUERY_REQUEST])
    stats.add(QUERY_REQUEST, first)
    value = parse_object(first.text)
    _valid(first.text)
    assert value is not None and first.tokens_in > 0
    calls_before = backend.calls
    [again] = cached.complete([QUERY_REQUEST])
    stats.add(QUERY_REQUEST, again)
    assert parse_object(again.text) == value and again.cached
    assert backend.calls == calls_before  # zero backend calls the second time
    assert stats.cache_hits == 1


@pytest.fixture
def qwen05_file(tmp_path):
    from fhs.llm.models import qwen05_path

    path = qwen05_path(tmp_path)
    yield path
    path.unlink()  # 0.5 GB: do not leave it in pytest's kept temp folders


@pytest.mark.model
def test_qwen05_assembles_and_answers_structured(qwen05_file):
    from fhs.llm.models import QWEN05_PART_MODULES, qwen05_parts

    digest = hashlib.sha256()
    for part in qwen05_parts():
        digest.update(part.read_bytes())
    with open(qwen05_file, "rb") as handle:
        assert handle.read(4) == b"GGUF"
    assert len(qwen05_parts()) == len(QWEN05_PART_MODULES) == 6
    assert digest.hexdigest() == hashlib.sha256(qwen05_file.read_bytes()).hexdigest()
    assert digest.hexdigest() == "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    backend = LC.LlamaCppBackend(qwen05_file, n_ctx=2048)
    out = backend.complete([QUERY_REQUEST])[0]
    _valid(out.text)


@pytest.mark.model
def test_llama_cpp_server_with_the_tightened_grammar(llama_server, smollm2):
    """The server's own json_object grammar lets control characters in; ``gbnf`` does not."""
    request = Request(messages=(Message("user", "Write a poem with many lines as JSON."),),
                      max_tokens=40, schema=STRING_SCHEMA)
    # The same model file as the server's, so its tokenizer gives the server's token ids.
    newline_tab = {str(t): 40.0 for raw in (b"\n", b"\t")
                   for t in smollm2._llm.tokenize(raw, add_bos=False, special=False)}
    texts = {}
    for mode in ("json_object", "gbnf"):
        backend = OpenAIBackend([llama_server], "smollm2-135m", structured=mode,
                                extra_body={"logit_bias": newline_tab})
        texts[mode] = backend.complete([request])[0].text
    assert OpenAIBackend([llama_server], "m", structured="gbnf").payload(request)["grammar"] == (
        LC.json_schema_grammar(STRING_SCHEMA))
    assert any(c in texts["json_object"] for c in "\n\t")
    assert not any(ord(c) < 0x20 for c in texts["gbnf"])
