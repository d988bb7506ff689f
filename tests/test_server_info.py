"""The model's context length, read from the server (GET /v1/models) or the in-process engine."""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.openai import OpenAIBackend
from fhs.llm.server_info import context_length_of, context_window, served_context_length

LISTING = {"object": "list", "data": [
    {"id": "Qwen/Qwen3-32B", "object": "model", "root": "Qwen/Qwen3-32B", "max_model_len": 32_768},
    {"id": "alias", "object": "model", "root": "/models/qwen3", "max_model_len": 16_384},
]}


@contextlib.contextmanager
def models_server(listing: object, status: int = 200) -> Iterator[tuple[str, list[dict]]]:
    """A loopback server answering GET /v1/models with ``listing``; yields its /v1 base URL and the headers seen."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            seen.append({"path": self.path, **dict(self.headers)})
            data = json.dumps(listing).encode() if not isinstance(listing, str) else listing.encode()
            self.send_response(status if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_the_served_max_model_len_is_read_by_model_id_or_root():
    assert context_length_of(LISTING, "Qwen/Qwen3-32B") == 32_768
    assert context_length_of(LISTING, "/models/qwen3") == 16_384
    assert context_length_of(LISTING, "other") is None
    assert context_length_of({"data": [{"id": "m", "context_length": 8_192}]}, "m") == 8_192
    assert context_length_of({"data": [{"id": "m"}]}, "m") is None
    assert context_length_of({"nothing": 1}, "m") is None


def test_served_context_length_asks_the_server_and_sends_the_key():
    with models_server(LISTING) as (url, seen):
        assert served_context_length(url, "Qwen/Qwen3-32B", api_key="k") == 32_768
        assert served_context_length(url.removesuffix("/v1"), "alias") == 16_384
    assert seen[0]["path"] == "/v1/models" and seen[0]["Authorization"] == "Bearer k"


def test_an_unreachable_or_silent_server_gives_none():
    with models_server("not json") as (url, _):
        assert served_context_length(url, "Qwen/Qwen3-32B") is None
    with models_server(LISTING, status=500) as (url, _):
        assert served_context_length(url, "Qwen/Qwen3-32B") is None
    assert served_context_length(url, "Qwen/Qwen3-32B", timeout=0.5) is None  # the server is gone


def test_context_window_looks_through_the_cache_and_takes_the_smallest_server(tmp_path):
    small = {"data": [{"id": "Qwen/Qwen3-32B", "max_model_len": 20_000}]}
    with models_server(LISTING) as (a, _), models_server(small) as (b, _):
        llm = CachedLLM(OpenAIBackend([a, b], "Qwen/Qwen3-32B"), ResponseCache(tmp_path / "c.sqlite"))
        assert context_window(llm) == 20_000
        assert context_window(OpenAIBackend([a], "unlisted")) is None

    class InProcess:
        context_tokens = 8_192

    assert context_window(InProcess()) == 8_192
    assert context_window(object()) is None


def test_the_method_context_gets_the_models_window_else_the_profiles(tmp_path):
    from fhs.run.ledger import MemoryLedger
    from fhs.run.inputs import ModelChoice, load_experiment_from_files

    (tmp_path / "concepts.csv").write_text("id,label,definition,datatype\nRevenues,Revenues,Amount of revenue.,"
                                           "monetaryItemType\n")
    (tmp_path / "facts.jsonl").write_text(json.dumps({
        "id": "f1", "context_id": "c1", "modality": "table", "value": "5", "datatype": "monetaryItemType",
        "context": "Revenues 5", "gold": ["Revenues"]}) + "\n")
    experiment = load_experiment_from_files(tmp_path / "facts.jsonl", tmp_path / "concepts.csv", domain="us-gaap")

    class Engine:
        name = "engine"

        def __init__(self, window):
            self.context_tokens = window

    for window, expected in ((4_096, 4_096), (None, 32_768)):
        choice = ModelChoice.resolve("paper", cache=tmp_path / "c.sqlite")
        choice._llm = Engine(window)
        ctx = experiment.llm_context(choice, ledger=MemoryLedger())
        assert ctx.config.context_tokens == expected
