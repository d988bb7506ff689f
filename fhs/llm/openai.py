"""The OpenAI-compatible HTTP backend: ``vllm serve``, the llama.cpp server, any compatible endpoint."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import random
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from fhs.core.errors import InputError, warn
from fhs.llm.contract import (BackendError, Request, RequestRefused, Response, as_json_types, chat_messages,
                              derive_seed)
from fhs.llm.inflight import DEFAULT_MAX_IN_FLIGHT, BackgroundLoop, server_gate
from fhs.llm.llama_cpp import json_schema_grammar


# --- OpenAI-compatible HTTP (vllm serve, llama.cpp server, any compatible endpoint) -------

STRUCTURED_MODES = ("json_schema", "json_object", "gbnf", "none")
_RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
# Each request names its stage (hypothesis, verifier, selector, ...) in this header, for a
# server's logs and the simulator's request log (fhs/plan/sim_server.py); answers do not depend on it.
PURPOSE_HEADER = "X-FHS-Purpose"
CONNECTIONS_PER_CLIENT = 16  # connections per httpx pool (see OpenAIBackend._http)
DEFAULT_REQUEST_TIMEOUT_S = 600.0  # one attempt, from sending to the answer's last byte (--request-timeout)
DEFAULT_GIVE_UP_S = 600.0  # a request stops after this long with no successful answer at all (--give-up-after)
DEFAULT_BACKOFF_S = 1.0  # the first wait after a failed attempt with no Retry-After, doubled each try (--retry-backoff)
MAX_BACKOFF_S = 30.0  # the longest wait between two attempts, unless the server's Retry-After asks for more
UNREACHABLE_TRIES = 5  # a server that never answered anything (nothing listens?) is named after this many tries


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
    A busy server does not end a long run. Connection errors, resets, 429 and 5xx
    are retried after the server's ``Retry-After`` where it sends one, else
    with exponential backoff from ``backoff_s`` (at most ``max_backoff_s``), each retry on the next server;
    other 4xx fail at once. So is an attempt that reaches its deadline
    (``timeout``), and the in-flight slot it held is freed then. A request gives
    up only when the backend has had no successful answer at all for
    ``give_up_s`` seconds (counted from the later of its own start and the
    backend's last success), or after ``max_retries`` retries when that is set;
    a server that never answered anything (nothing listening at the URL) is
    named after ``UNREACHABLE_TRIES`` tries.

    One event loop and one ``httpx.AsyncClient`` per backend, started on first
    use, reuse their connections; ``complete`` blocks its caller only, so many
    threads (one per fact in flight) call it at once. Each server URL admits at
    most ``max_in_flight`` requests from the whole process (``fhs.llm.inflight``).
    ``timeout`` is the deadline of one request attempt from sending to the last
    byte (a server that trickles bytes or never answers is cut off there).
    ``thinking`` sends ``chat_template_kwargs.enable_thinking`` whatever the
    model's name (the paper: off); ``None`` sends nothing.
    """

    def __init__(
        self,
        base_urls: Sequence[str],
        model: str,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        timeout: float = DEFAULT_REQUEST_TIMEOUT_S,
        api_key: str | None = None,
        structured: str = "json_schema",
        *,
        thinking: bool | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        extra_body: Mapping[str, Any] | None = None,
        max_retries: int | None = None,
        backoff_s: float = DEFAULT_BACKOFF_S,
        max_backoff_s: float = MAX_BACKOFF_S,
        any_server: bool = False,
        give_up_s: float = DEFAULT_GIVE_UP_S,
    ) -> None:
        if isinstance(base_urls, str):
            base_urls = [base_urls]
        if not base_urls:
            raise InputError("no server URL given", field="base_urls",
                             fix="pass e.g. ['http://127.0.0.1:8000']")
        if structured not in STRUCTURED_MODES:
            raise InputError(f"unknown structured mode '{structured}'", field="structured",
                             fix=f"use one of {', '.join(STRUCTURED_MODES)}")
        if isinstance(max_in_flight, bool) or not isinstance(max_in_flight, int) or max_in_flight < 1:
            raise InputError(f"must be a whole number of at least 1, got {max_in_flight!r}", field="max_in_flight")
        for name, value in (("timeout", timeout), ("give_up_s", give_up_s), ("backoff_s", backoff_s),
                            ("max_backoff_s", max_backoff_s)):
            if isinstance(value, bool) or not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InputError(f"must be a number of seconds above 0, got {value!r}", field=name)
        self.base_urls = [u.rstrip("/") for u in base_urls]
        self._endpoints = [_chat_url(u) for u in self.base_urls]
        self.model = model
        self.max_in_flight = max_in_flight
        self.timeout = float(timeout)
        self.api_key = api_key
        self.structured = structured
        self.thinking = thinking
        template = {} if thinking is None else {"enable_thinking": bool(thinking)}
        self.chat_template_kwargs = {**template, **dict(chat_template_kwargs or {})}
        self.extra_body = dict(extra_body or {})
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.give_up_s = float(give_up_s)
        self._last_success: float | None = None  # time.monotonic() of the latest successful answer
        self._answered = False  # whether any server of this backend ever sent an HTTP answer
        self._jitter = random.Random()
        self.kind, self.name, self.provenance = openai_identity(model, self.base_urls, structured=structured,
                                                                thinking=thinking, any_server=any_server)
        self._round_robin = itertools.count()
        self._round_robin_lock = threading.Lock()
        self._grammar_texts: dict[str, str] = {}
        self._gates = [server_gate(url, max_in_flight) for url in self._endpoints]
        self._loop = BackgroundLoop(f"fhs-openai:{model}")
        self._client: list[Any] = []  # httpx.AsyncClients, made on the loop at first use (see _http)
        self._client_turn = itertools.count()
        weakref.finalize(self, _shut_down, self._loop, self._client)

    def _grammar_text(self, schema: Mapping[str, Any]) -> str:
        key = json.dumps(as_json_types(schema), sort_keys=True)
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
                "json_schema": {"name": "response", "schema": as_json_types(request.schema)},
            }
        elif request.schema is not None and self.structured == "json_object":
            body["response_format"] = {"type": "json_object", "schema": as_json_types(request.schema)}
        elif request.schema is not None and self.structured == "gbnf":
            body["grammar"] = self._grammar_text(request.schema)
        if self.chat_template_kwargs:
            body["chat_template_kwargs"] = dict(self.chat_template_kwargs)
        body.update(self.extra_body)
        return body

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        if not requests:
            return []
        with self._round_robin_lock:
            slots = [next(self._round_robin) for _ in requests]
        requests = list(requests)
        return self._loop.call(lambda: self._complete_all(requests, slots))

    def close(self) -> None:
        """Close the connections and stop the event loop (a later call starts them again)."""
        _shut_down(self._loop, self._client)

    def _http(self) -> Any:
        """A client for the next request, made on the backend's loop the first time (connections kept alive).

        httpcore's pool scans every connection for every queued request, so one pool of
        128 connections costs several times the CPU a request of pools of
        :data:`CONNECTIONS_PER_CLIENT` taken in turn (``python -m dev.bench_serve --pool`` measures it).
        """
        if not self._client:
            import httpx

            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            slots = self.max_in_flight * len(self._endpoints)
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=CONNECTIONS_PER_CLIENT)
            # A proxy from the environment must not intercept a server on this machine.
            local = all(_is_loopback(u) for u in self.base_urls)
            self._client.extend(httpx.AsyncClient(timeout=httpx.Timeout(self.timeout), headers=headers,
                                                  limits=limits, trust_env=not local)
                                for _ in range(-(-slots // CONNECTIONS_PER_CLIENT)))
        return self._client[next(self._client_turn) % len(self._client)]

    async def _complete_all(self, requests: list[Request], slots: list[int]) -> list[Response]:
        tasks = [asyncio.ensure_future(self._one(r, s)) for r, s in zip(requests, slots)]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def _one(self, request: Request, slot: int) -> Response:
        import httpx

        body = self.payload(request)
        headers = {PURPOSE_HEADER: request.purpose} if request.purpose else {}
        tried: list[str] = []
        began = time.monotonic()
        tries = 0
        while True:
            index = (slot + tries) % len(self._endpoints)
            url, gate = self._endpoints[index], self._gates[index]
            if url not in tried:
                tried.append(url)
            tries += 1
            retry_after = 0.0
            try:
                await gate.acquire()
                try:  # the slot is held for one attempt at most, and freed at its deadline
                    started = time.perf_counter()
                    reply = await asyncio.wait_for(self._post(self._http(), url, body, headers), self.timeout)
                    seconds = time.perf_counter() - started
                finally:
                    gate.release()
            except asyncio.TimeoutError:  # retried like a reset: a hung or trickling connection
                last_problem = f"no complete answer within the {self.timeout:g} s deadline of one request"
                unreachable = False
            except httpx.TransportError as error:
                last_problem = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
                unreachable = isinstance(error, httpx.ConnectError)
            else:
                self._answered = True
                if reply.status_code < 400:
                    self._last_success = time.monotonic()
                    return self._response(url, reply, seconds)
                if reply.status_code not in _RETRY_STATUS:
                    raise RequestRefused(
                        f"{url} refused the request with HTTP {reply.status_code}: "
                        f"{' '.join(reply.text[:300].split())}"
                    )
                last_problem = f"HTTP {reply.status_code}: {' '.join(reply.text[:200].split())}"
                unreachable = False
                retry_after = _retry_after(reply.headers.get("retry-after"))
            where = ", ".join(tried)
            if self.max_retries is not None and tries > self.max_retries or \
                    unreachable and not self._answered and tries >= UNREACHABLE_TRIES:
                raise self._failed(where, tries, last_problem, unreachable)
            quiet = time.monotonic() - max(began, self._last_success or began)
            if quiet >= self.give_up_s:
                raise BackendError(
                    f"no successful answer from the model server at {where} for {quiet:,.0f} s, the give-up time "
                    f"(the last problem: {last_problem}): it is down, stuck or overloaded; check its log, or "
                    f"allow longer with --give-up-after SECONDS (or a longer --request-timeout)")
            # the server's own Retry-After where it gives one; else exponential backoff, jittered so that
            # requests refused together do not all come back together
            wait = retry_after or min(self.backoff_s * 2 ** min(tries - 1, 30), self.max_backoff_s) * \
                (0.5 + self._jitter.random() / 2)
            await asyncio.sleep(min(wait, self.give_up_s - quiet))

    def _failed(self, where: str, tries: int, last_problem: str, unreachable: bool) -> BackendError:
        """The error of a request that ran out of tries (``max_retries``, or a server never reached)."""
        if unreachable:
            return BackendError(
                f"cannot reach the model server at {where} after {tries} tries "
                f"({last_problem}): is the server running? start it with "
                f"`vllm serve {self.model} --port 8000` or "
                f"`python -m llama_cpp.server --model <file.gguf> --port 8000`"
            )
        return BackendError(f"the model server at {where} kept failing after {tries} tries ({last_problem})")

    @staticmethod
    async def _post(client: Any, url: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> Any:
        """POST and read the whole body (``wait_for`` around it bounds the attempt, not each read)."""
        return await client.post(url, json=body, headers=headers)

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
        finish = choice.get("finish_reason") if isinstance(choice, Mapping) else None
        return Response(
            text=text,
            tokens_in=_token_count(usage, "prompt_tokens", url),
            tokens_out=_token_count(usage, "completion_tokens", url),
            seconds=seconds,
            model=str(data.get("model") or self.model),
            finish_reason=finish if isinstance(finish, str) and finish else None,
        )


def openai_identity(model: str, base_urls: Sequence[str], *, structured: str = "json_schema",
                    thinking: bool | None = None, any_server: bool = False) -> tuple[str, str, str]:
    """``(kind, name, provenance)``: what the response cache keys this backend's answers by.

    How the schema is enforced, and thinking on, change the answer, so they are part of
    ``kind`` (thinking off or unset keep the key every earlier run used). ``provenance``
    names the servers: another server may serve other weights under the same model name;
    ``any_server`` shares answers across servers on purpose.
    """
    kind = "openai" if structured == "json_schema" else f"openai-{structured}"
    if thinking:
        kind += "-thinking"
    urls = sorted(u.rstrip("/") for u in base_urls)
    return kind, f"openai:{model}", "" if any_server else ",".join(urls)


def _shut_down(loop: BackgroundLoop, client: list[Any]) -> None:
    async def close_client() -> None:
        while client:
            await client.pop().aclose()

    loop.close(close_client)


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
