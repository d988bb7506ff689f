"""Start llama-cpp-python's OpenAI-compatible server for a test, and always stop it."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_smollm2(n_ctx: int = 2048, port: int | None = None):
    """Yield the base URL of a SmolLM2-135M server on 127.0.0.1; stop it on exit."""
    from fhs.llm.llama_cpp import thread_options
    from fhs.llm.models import smollm2_path

    port = port or free_port()
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_path()),
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    for keyword, count in thread_options().items():
        command += [f"--{keyword}", str(count)]
    log = open(os.devnull, "wb")
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {process.returncode}")
            try:
                if httpx.get(f"{url}/v1/models", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not become ready in 120 s")
            time.sleep(0.2)
        print(f"\nllama_cpp.server ready in {time.perf_counter() - started:.2f} s")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
