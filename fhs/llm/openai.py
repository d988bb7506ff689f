"""The OpenAI-compatible HTTP backend: ``vllm serve``, the llama.cpp server, any compatible endpoint."""

from __future__ import annotations

import asyncio
import itertools
import json
import math
import os
import random
import re
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from fhs.core.errors import InputError, warn
from fhs.core.urls import public_url, scrub, server_url
from fhs.llm.contract import BackendError, Request, RequestRefused, Response, as_json_types, chat_messages, derive_seed
from fhs.llm.inflight import DEFAULT_MAX_IN_FLIGHT, BackgroundLoop, check_in_flight, server_gate
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
MAX_WAIT_S = 7 * 24 * 3600.0  # the longest --request-timeout or --give-up-after: a week
DEFAULT_BACKOFF_S = 1.0  # the first wait after a failed attempt with no Retry-After, doubled each try (--retry-backoff)
MAX_BACKOFF_S = 30.0  # the longest wait between two attempts, unless the server's Retry-After asks for more
LAST_TRY_S = 1.0  # an attempt started at the give-up time still has this long (or its own deadline) to answer
UNREACHABLE_TRIES = 5  # a server that never answered anything (nothing listens?) is named after this many tries
API_KEY_ENV_VAR = "OPENAI_API_KEY"  # the key sent as a bearer token, as the ecosystem's clients read it; never recorded


def check_seconds(value: object, field: str) -> float:
    """``value`` as seconds if it is a finite number above 0 and at most ``MAX_WAIT_S``, else a one-line InputError."""
    number = value if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
    if not (math.isfinite(number) and 0 < number <= MAX_WAIT_S):
        raise InputError(
            f"must be a number of seconds above 0 and at most {MAX_WAIT_S:,.0f} (a week), got {value!r}", field=field
        )
    return float(number)


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
            raise InputError("no server URL given", field="base_urls", fix="pass e.g. ['http://127.0.0.1:8000']")
        if structured not in STRUCTURED_MODES:
            raise InputError(
                f"unknown structured mode '{structured}'",
                field="structured",
                fix=f"use one of {', '.join(STRUCTURED_MODES)}",
            )
        check_in_flight(max_in_flight, len(base_urls))
        for name, value in (
            ("timeout", timeout),
            ("give_up_s", give_up_s),
            ("backoff_s", backoff_s),
            ("max_backoff_s", max_backoff_s),
        ):
            check_seconds(value, name)
        # the URLs connected to keep any user info (httpx sends it as basic auth); what is shown or
        # recorded is the public form (fhs.core.urls)
        self.base_urls = [server_url(u).rstrip("/") for u in base_urls]
        self._endpoints = [_chat_url(u) for u in self.base_urls]
        self._shown = {url: public_url(url) for url in self._endpoints}
        self.model = model
        self.max_in_flight = max_in_flight
        self.timeout = float(timeout)
        self.api_key = api_key if api_key is not None else (os.environ.get(API_KEY_ENV_VAR) or None)
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
        self.kind, self.name, self.provenance = openai_identity(
            model, self.base_urls, structured=structured, thinking=thinking, any_server=any_server
        )
        self._round_robin = itertools.count()
        self._round_robin_lock = threading.Lock()
        self._grammar_texts: dict[str, str] = {}
        self._gates = [server_gate(self._shown[url], max_in_flight) for url in self._endpoints]
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
        """A client for the next request, made on the backend's loop when first needed (connections kept alive).

        httpcore's pool scans every connection for every queued request, so one pool of
        128 connections costs several times the CPU a request of pools of
        :data:`CONNECTIONS_PER_CLIENT` taken in turn (``python -m dev.bench_serve --pool`` measures it).
        Clients are made as requests need them, not all up front.
        """
        slots = self.max_in_flight * len(self._endpoints)
        turn = next(self._client_turn) % -(-slots // CONNECTIONS_PER_CLIENT)
        if turn >= len(self._client):
            import httpx

            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            limits = httpx.Limits(max_connections=None, max_keepalive_connections=CONNECTIONS_PER_CLIENT)
            # A proxy from the environment must not intercept a server on this machine.
            local = all(_is_loopback(u) for u in self.base_urls)
            self._client.append(
                httpx.AsyncClient(
                    timeout=httpx.Timeout(self.timeout), headers=headers, limits=limits, trust_env=not local
                )
            )
            return self._client[-1]
        return self._client[turn]

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
        last_problem = ""
        while True:
            index = (slot + tries) % len(self._endpoints)
            url, gate = self._endpoints[index], self._gates[index]
            if self._shown[url] not in tried:
                tried.append(self._shown[url])
            tries += 1
            retry_after = 0.0
            try:
                await gate.acquire()
                try:  # the slot is held for one attempt at most, and freed at its deadline
                    started = time.perf_counter()
                    reply = await self._attempt(self._post(self._http(), url, body, headers), began)
                    seconds = time.perf_counter() - started
                finally:
                    gate.release()
            except _GiveUpReached:  # the give-up time came with this attempt still unanswered
                last_problem = "; then ".join(
                    filter(None, [last_problem, "a request still unanswered at the give-up time"])
                )
                unreachable = False
            except asyncio.TimeoutError:  # retried like a reset: a hung or trickling connection
                last_problem = f"no complete answer within the {self.timeout:g} s deadline of one request"
                unreachable = False
            except httpx.TransportError as error:
                last_problem = self._scrub(f"{type(error).__name__}: {error}" if str(error) else type(error).__name__)
                unreachable = isinstance(error, httpx.ConnectError)
            else:
                self._answered = True
                shown = self._shown[url]
                if reply.status_code < 400:
                    self._last_success = time.monotonic()
                    return self._response(shown, reply, seconds)
                if reply.status_code not in _RETRY_STATUS:
                    raise RequestRefused(
                        f"{shown} refused the request with HTTP {reply.status_code}: {self._scrub(reply.excerpt(300))}"
                    )
                last_problem = f"HTTP {reply.status_code}: {self._scrub(reply.excerpt(200))}"
                unreachable = False
                retry_after = _retry_after(reply.headers.get("retry-after"))
            where = ", ".join(tried)
            if (
                self.max_retries is not None
                and tries > self.max_retries
                or unreachable
                and not self._answered
                and tries >= UNREACHABLE_TRIES
            ):
                raise self._failed(where, tries, last_problem, unreachable)
            quiet = time.monotonic() - max(began, self._last_success or began)
            if quiet >= self.give_up_s:
                raise BackendError(
                    f"no successful answer from the model server at {where} for {quiet:,.0f} s, the give-up time "
                    f"(the last problem: {last_problem}): it is down, stuck or overloaded; check its log, or "
                    f"allow longer with --give-up-after SECONDS (or a longer --request-timeout)"
                )
            # the server's own Retry-After where it gives one; else exponential backoff, jittered so that
            # requests refused together do not all come back together
            wait = retry_after or min(self.backoff_s * 2 ** min(tries - 1, 30), self.max_backoff_s) * (
                0.5 + self._jitter.random() / 2
            )
            await asyncio.sleep(min(wait, self.give_up_s - quiet))

    async def _attempt(self, post: Any, began: float) -> _Reply:
        """One attempt, cut at its own deadline (``timeout``) or at the give-up time, whichever comes first.

        The give-up time moves with the backend's last success, so it is read again while the attempt
        waits: a request in flight outlives ``give_up_s`` without an answer from the server by
        ``LAST_TRY_S`` at most (the last try, made at the give-up time, has that long).
        """
        task = asyncio.ensure_future(post)
        now = time.monotonic()
        deadline, floor = now + self.timeout, now + min(self.timeout, LAST_TRY_S)
        try:
            while True:
                give_up = max(began, self._last_success or began, floor - self.give_up_s) + self.give_up_s
                left = min(deadline, give_up) - time.monotonic()
                if left > 0:
                    done, _ = await asyncio.wait({task}, timeout=left)
                    if done:
                        return task.result()
                    continue
                if time.monotonic() >= deadline:
                    raise asyncio.TimeoutError
                raise _GiveUpReached
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    def _scrub(self, text: str) -> str:
        """A server's or transport's words with the servers' user info taken out."""
        return scrub(text, self._endpoints)

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

    async def _post(self, client: Any, url: str, body: Mapping[str, Any], headers: Mapping[str, str]) -> _Reply:
        """POST and read the body, at most ``MAX_REPLY_BYTES`` of it (``_attempt`` bounds the time)."""
        async with client.stream("POST", url, json=body, headers=headers) as reply:
            declared = reply.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_REPLY_BYTES:
                raise self._too_large(url, f"it announced {int(declared):,} bytes")
            chunks, size = [], 0
            async for chunk in reply.aiter_bytes():
                size += len(chunk)
                if size > MAX_REPLY_BYTES:
                    raise self._too_large(url, "its body ran past it")
                chunks.append(chunk)
            return _Reply(reply.status_code, reply.headers, b"".join(chunks))

    def _too_large(self, url: str, how: str) -> RequestRefused:
        return RequestRefused(
            f"{self._shown[url]} sent a reply over the limit of {MAX_REPLY_BYTES:,} bytes on one "
            f"answer ({how}): no stage reads a reply that long; check the server's max_tokens"
        )

    def _response(self, url: str, reply: _Reply, seconds: float) -> Response:
        """The answer in ``reply`` (``url`` as shown); a reply that holds no answer text is refused, never cached."""
        try:
            data = json.loads(reply.content)
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content")
            text = content_text(content)
        except RecursionError:
            raise BackendError(
                f"{url} answered with JSON nested deeper than this client parses: "
                f"not a chat completion; check the server"
            ) from None
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
            raise BackendError(
                f"{url} answered with something that is not a chat completion "
                f"({type(error).__name__}): {self._scrub(reply.excerpt(300))}"
            ) from None
        usage = data.get("usage") if isinstance(data.get("usage"), Mapping) else {}
        finish = choice.get("finish_reason") if isinstance(choice, Mapping) else None
        answered = data.get("model")
        if isinstance(answered, str) and answered and not same_model(self.model, answered):
            raise BackendError(
                f"{url} answered with model {shown_name(answered)}, not the model asked, "
                f"{shown_name(self.model)}: its answers would be kept under the wrong name; "
                f"pass --model {shown_name(answered)} if that is the model meant, or serve "
                f"{shown_name(self.model)} there"
            )
        if content is None or (isinstance(content, list) and not text):
            said = "tool calls" if message.get("tool_calls") else "a refusal" if message.get("refusal") else "no text"
            raise UnusableReply(
                f"{url} answered with {said} instead of the message's text "
                f"(content {shown_name(content) if content is not None else 'null'}, "
                f"finish_reason {shown_name(finish)}): not an answer, so it is not kept; "
                f"check the server's chat template and tool settings"
            )
        return Response(
            text=text,
            tokens_in=_token_count(usage, "prompt_tokens", url),
            tokens_out=_token_count(usage, "completion_tokens", url),
            seconds=seconds,
            model=str(data.get("model") or self.model),
            finish_reason=finish if isinstance(finish, str) and finish else None,
        )


# A reply body over this many bytes is refused: no stage parses more than MAX_REPLY_CHARS
# (fhs/llm/jsonout.py) of text, and even escaped as JSON, with usage and the rest, an answer
# of that length fits many times over.
MAX_REPLY_BYTES = 4 << 20


class UnusableReply(RequestRefused):
    """The server answered, but with no text a stage can read (content null, tool calls only).

    Not an answer: nothing is cached, the fact is recorded as failed, and the same command run
    again asks the server again.
    """


class _GiveUpReached(Exception):
    """The give-up time came while an attempt was still waiting for its answer."""


class _Reply:
    """A reply read within ``MAX_REPLY_BYTES``: status, headers and body."""

    def __init__(self, status_code: int, headers: Any, content: bytes) -> None:
        self.status_code, self.headers, self.content = status_code, headers, content

    def excerpt(self, limit: int) -> str:
        """The body's start as one line of text."""
        return " ".join(self.content[: limit * 4].decode("utf-8", "replace")[:limit].split())


_SNAPSHOT = re.compile(r"-(\d{4}(-\d{2}-\d{2})?|\d{8})")


def same_model(asked: str, answered: str) -> bool:
    """Whether a reply's ``model`` names the model asked: the same name, or a dated snapshot of it
    (``gpt-4o`` answered as ``gpt-4o-2024-08-06``), as OpenAI's API names them."""
    if answered == asked:
        return True
    return answered.startswith(asked) and _SNAPSHOT.fullmatch(answered[len(asked) :]) is not None


def shown_name(value: Any) -> str:
    """A name from a server, quoted and cut short for an error line."""
    text = value if isinstance(value, str) else json.dumps(value)[:80] if _jsonable(value) else type(value).__name__
    return repr(text if len(text) <= 80 else text[:80] + "...")


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError, RecursionError):
        return False
    return True


def openai_identity(
    model: str,
    base_urls: Sequence[str],
    *,
    structured: str = "json_schema",
    thinking: bool | None = None,
    any_server: bool = False,
) -> tuple[str, str, str]:
    """``(kind, name, provenance)``: what the response cache keys this backend's answers by.

    How the schema is enforced, and thinking on, change the answer, so they are part of
    ``kind`` (thinking off or unset keep the key every earlier run used). ``provenance``
    names the servers: another server may serve other weights under the same model name;
    ``any_server`` shares answers across servers on purpose.
    """
    kind = "openai" if structured == "json_schema" else f"openai-{structured}"
    if thinking:
        kind += "-thinking"
    urls = sorted(public_url(u).rstrip("/") for u in base_urls)
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
        return "".join(
            str(part.get("text") or "") if isinstance(part, Mapping) else str(part)
            for part in content
            if not isinstance(part, Mapping) or part.get("type", "text") in ("text", "output_text")
        )
    raise TypeError(f"content is a {type(content).__name__}")


_WARNED_USAGE: set[str] = set()


def _token_count(usage: Mapping[str, Any], name: str, url: str) -> int:
    """A token count from ``usage``; anything but a non-negative integer is unknown (0), with one warning."""
    value = usage.get(name)
    if value is None:
        return 0
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value < 0
        or value != int(value)
    ):
        if url not in _WARNED_USAGE:
            _WARNED_USAGE.add(url)
            warn(f"{url} reported usage.{name} = {value!r}, not a token count; token counts from it are unknown (0)")
        return 0
    return int(value)
