"""The OpenAI-compatible HTTP backend: ``vllm serve``, the llama.cpp server, any compatible endpoint."""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import json
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

from fhs.core.errors import InputError, warn
from fhs.llm.contract import BackendError, Request, RequestRefused, Response, chat_messages, derive_seed, plain
from fhs.llm.llama_cpp import json_schema_grammar


def _run_coroutine(coro: Any) -> Any:
    """Run ``coro`` to completion, also from inside Jupyter's already running loop.

    ``asyncio.run`` refuses to nest, so with a loop running in this thread the
    coroutine gets its own loop on a short-lived worker thread.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()


# --- OpenAI-compatible HTTP (vllm serve, llama.cpp server, any compatible endpoint) -------

STRUCTURED_MODES = ("json_schema", "json_object", "gbnf", "none")
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def _chat_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return f"{base}/v1/chat/completions"


class OpenAIBackend:
    """``/v1/chat/completions`` over HTTP, many requests in flight, spread over servers.

    ``structured`` says how a request's ``schema`` is sent: ``"json_schema"``
    (vLLM, OpenAI), ``"json_object"`` with the schema inside (llama-cpp-python's
    server, which then builds llama.cpp's loose grammar), ``"gbnf"`` (the
    tightened grammar of :func:`json_schema_grammar` in the ``grammar`` field
    that llama.cpp servers accept; needs llama-cpp-python on the client) or
    ``"none"`` (the prompt alone asks for JSON, as in the paper's code).
    Connection errors, timeouts, 429 and 5xx are retried with exponential
    backoff, each retry on the next server; other 4xx fail at once.
    """

    def __init__(
        self,
        base_urls: Sequence[str],
        model: str,
        max_in_flight: int = 8,
        timeout: float = 600.0,
        api_key: str | None = None,
        structured: str = "json_schema",
        *,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        any_server: bool = False,
    ) -> None:
        if isinstance(base_urls, str):
            base_urls = [base_urls]
        if not base_urls:
            raise InputError("no server URL given", field="base_urls",
                             fix="pass e.g. ['http://127.0.0.1:8000']")
        if structured not in STRUCTURED_MODES:
            raise InputError(f"unknown structured mode '{structured}'", field="structured",
                             fix=f"use one of {', '.join(STRUCTURED_MODES)}")
        if max_in_flight < 1:
            raise InputError("must be at least 1", field="max_in_flight")
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self._endpoints = [_chat_url(u) for u in self.base_urls]
        self.model = model
        self.max_in_flight = max_in_flight
        self.timeout = timeout
        self.api_key = api_key
        self.structured = structured
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.extra_body = dict(extra_body or {})
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        # How the schema is enforced changes the answer, so it is part of the cache identity.
        self.kind = "openai" if structured == "json_schema" else f"openai-{structured}"
        self.name = f"openai:{model}"
        # Part of the cache key (fhs/llm/cache.py): another server may serve other weights under
        # the same model name. ``any_server`` shares answers across servers on purpose.
        self.provenance = "" if any_server else ",".join(sorted(self.base_urls))
        self._round_robin = itertools.count()
        self._grammar_texts: dict[str, str] = {}

    def _grammar_text(self, schema: Mapping[str, Any]) -> str:
        key = json.dumps(plain(schema), sort_keys=True)
        if key not in self._grammar_texts:
            self._grammar_texts[key] = json_schema_grammar(schema)
        return self._grammar_texts[key]

    def payload(self, request: Request) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": chat_messages(request),
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
            "seed": derive_seed(request.seed, request.sample_index, request.attempt),
        }
        if request.schema is not None and self.structured == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "response", "schema": plain(request.schema)},
            }
        elif request.schema is not None and self.structured == "json_object":
            body["response_format"] = {"type": "json_object", "schema": plain(request.schema)}
        elif request.schema is not None and self.structured == "gbnf":
            body["grammar"] = self._grammar_text(request.schema)
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        body.update(self.extra_body)
        return body

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        if not requests:
            return []
        slots = [next(self._round_robin) for _ in requests]
        return _run_coroutine(self._complete_all(list(requests), slots))

    async def _complete_all(self, requests: list[Request], slots: list[int]) -> list[Response]:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        limits = httpx.Limits(max_connections=self.max_in_flight,
                              max_keepalive_connections=self.max_in_flight)
        gate = asyncio.Semaphore(self.max_in_flight)
        # A proxy from the environment must not intercept a server on this machine.
        local = all(_is_loopback(u) for u in self.base_urls)
        async with httpx.AsyncClient(timeout=self.timeout, headers=headers, limits=limits,
                                     trust_env=not local) as client:
            tasks = [asyncio.ensure_future(self._one(client, gate, r, s))
                     for r, s in zip(requests, slots)]
            try:
                return list(await asyncio.gather(*tasks))
            except BaseException:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                raise

    async def _one(self, client: Any, gate: asyncio.Semaphore, request: Request, slot: int) -> Response:
        import httpx

        body = self.payload(request)
        tried: list[str] = []
        last_problem = ""
        for attempt in range(self.max_retries + 1):
            url = self._endpoints[(slot + attempt) % len(self._endpoints)]
            if url not in tried:
                tried.append(url)
            try:
                async with gate:
                    started = time.perf_counter()
                    reply = await client.post(url, json=body)
                    seconds = time.perf_counter() - started
            except httpx.TransportError as error:
                last_problem = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
                unreachable = True
            else:
                unreachable = False
                if reply.status_code < 400:
                    return self._response(url, reply, seconds)
                if reply.status_code not in _RETRY_STATUS:
                    raise RequestRefused(
                        f"{url} refused the request with HTTP {reply.status_code}: "
                        f"{' '.join(reply.text[:300].split())}"
                    )
                last_problem = f"HTTP {reply.status_code}: {' '.join(reply.text[:200].split())}"
            if attempt < self.max_retries:
                wait = self.backoff_s * (2**attempt)
                if not unreachable:
                    wait = max(wait, _retry_after(reply.headers.get("retry-after")))
                await asyncio.sleep(wait)
        where = ", ".join(tried)
        if unreachable:
            raise BackendError(
                f"cannot reach the model server at {where} after {self.max_retries + 1} tries "
                f"({last_problem}): is the server running? start it with "
                f"`vllm serve {self.model} --port 8000` or "
                f"`python -m llama_cpp.server --model <file.gguf> --port 8000`"
            )
        raise BackendError(
            f"the model server at {where} kept failing after {self.max_retries + 1} tries "
            f"({last_problem})"
        )

    def _response(self, url: str, reply: Any, seconds: float) -> Response:
        try:
            data = reply.json()
            choice = data["choices"][0]
            text = content_text(choice["message"].get("content"))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
            raise BackendError(
                f"{url} answered with something that is not a chat completion "
                f"({type(error).__name__}): {' '.join(reply.text[:300].split())}"
            ) from None
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        return Response(
            text=text,
            tokens_in=_token_count(usage, "prompt_tokens", url),
            tokens_out=_token_count(usage, "completion_tokens", url),
            seconds=seconds,
            model=str(data.get("model") or self.model),
        )


MAX_RETRY_AFTER_S = 60.0  # a server's Retry-After is honoured up to this many seconds per wait


def _retry_after(value: str | None) -> float:
    """Seconds from a ``Retry-After`` header (seconds or an HTTP date), bounded; 0 when absent or odd."""
    if not value:
        return 0.0
    try:
        seconds = float(value)
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            seconds = parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError, OverflowError):
            return 0.0
    if seconds != seconds:  # NaN
        return 0.0
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def _is_loopback(url: str) -> bool:
    from urllib.parse import urlsplit

    host = (urlsplit(url if "//" in url else f"http://{url}").hostname or "").lower()
    return host in ("localhost", "::1") or host.startswith("127.")


def content_text(content: Any) -> str:
    """A message's text: a string, ``None`` (nothing), or a list of parts whose text parts are joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") if isinstance(part, Mapping) else str(part)
                       for part in content
                       if not isinstance(part, Mapping) or part.get("type", "text") in ("text", "output_text"))
    raise TypeError(f"content is a {type(content).__name__}")


_WARNED_USAGE: set[str] = set()


def _token_count(usage: Mapping[str, Any], name: str, url: str) -> int:
    """A token count from ``usage``; anything but a non-negative integer is unknown (0), with one warning."""
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value < 0 or value != int(value):
        if url not in _WARNED_USAGE:
            _WARNED_USAGE.add(url)
            warn(f"{url} reported usage.{name} = {value!r}, not a token count; token counts from it are unknown (0)")
        return 0
    return int(value)


# --- llama.cpp in process -----------------------------------------------------------------
