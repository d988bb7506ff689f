"""A tiny OpenAI-compatible server for misbehaving-server tests: 127.0.0.1 only, scripted replies.

Not collected by pytest (no ``test_`` prefix). ``serve(reply)`` yields the base URL;
``reply(body) -> (status, json_or_text, headers)`` answers each POST to
``/v1/chat/completions``. The server runs on a daemon thread and is shut down on exit.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = Callable[[dict], tuple[int, Any, dict]]


def completion(content: Any, usage: Any = None, model: str | None = None) -> dict:
    """A chat completion whose message content is ``content`` (a string, None or a list of parts);
    it names ``model`` where given (else no model, as the client then takes the one it asked)."""
    body: dict = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    if model is not None:
        body["model"] = model
    if usage is not None:
        body["usage"] = usage
    return body


@contextlib.contextmanager
def serve(reply: Reply) -> Iterator[tuple[str, list[dict]]]:
    """Yield (base URL, list of request bodies received); stop the server on exit."""
    received: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server's name)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(min(length, 1 << 24)) or b"{}")
            received.append(body)
            status, payload, headers = reply(body)
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.timeout = 5
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
