"""One interface to language models: requests in, responses out, every call cached.

This top part is the contract the method modules (hypotheses, verifier,
selector, relocation) program against. Backends (OpenAI-compatible HTTP,
in-process llama.cpp, in-process vLLM) and the persistent cache implement it
below.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hashlib
import importlib
import itertools
import json
import os
import sqlite3
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from fhs.errors import InputError


@dataclass(frozen=True)
class Message:
    role: str  # "system" | "user" | "assistant"
    content: str


@dataclass(frozen=True)
class Request:
    """One model call.

    Each of the J samples of one prompt is its own request, told apart by
    ``sample_index``; that index is part of the cache key and of the seed, so
    samples differ from each other but replay identically.
    ``schema`` asks for structured JSON output where the backend supports it.
    ``purpose`` labels the call for the cost tables; it is not part of the key.
    ``attempt`` counts retries of a failed parse: it is part of the key and the
    seed, so a retry is a new sample instead of a replay of the cached failure,
    and it cannot collide with another sample's key as a shifted
    ``sample_index`` or ``seed`` could.
    """

    messages: tuple[Message, ...]
    temperature: float = 0.0
    top_p: float = 1.0
    max_tokens: int = 512
    seed: int = 0
    sample_index: int = 0
    schema: Mapping[str, Any] | None = None
    purpose: str = ""
    attempt: int = 0


@dataclass(frozen=True)
class Response:
    text: str
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    cached: bool = False
    model: str = ""


class LLM(Protocol):
    """Anything that answers a batch of requests, in order."""

    name: str

    def complete(self, requests: Sequence[Request]) -> list[Response]: ...


@dataclass
class CallStats:
    """Running totals for one run: what the cost chapter and metrics.json report."""

    calls: int = 0  # model calls actually made (not served by the cache)
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0
    by_purpose: dict[str, int] = field(default_factory=dict)

    def add(self, request: Request, response: Response) -> None:
        if response.cached:
            self.cache_hits += 1
        else:
            self.calls += 1
            self.seconds += response.seconds
        self.tokens_in += response.tokens_in
        self.tokens_out += response.tokens_out
        key = request.purpose or "other"
        self.by_purpose[key] = self.by_purpose.get(key, 0) + 1


# =========================================================================================
# Implementations: shared helpers, the three backends, the persistent cache, the factory.
# =========================================================================================


class BackendError(RuntimeError):
    """A backend could not answer: server unreachable or failing, engine not installed."""


def derive_seed(seed: int, sample_index: int = 0, attempt: int = 0) -> int:
    """The seed a backend actually uses, one per (run seed, sample, attempt).

    Separate requests with separate seeds are how the J samples differ (``n>1``
    is not reliable across servers); hashing keeps nearby run seeds from
    sharing samples, and 31 bits fit every engine's seed type.
    """
    digest = hashlib.sha256(f"{seed}:{sample_index}:{attempt}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def _plain(value: Any) -> Any:
    """Mappings and tuples as dicts and lists, so a schema serializes the same every time."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def chat_messages(request: Request) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in request.messages]


CACHE_KEY_VERSION = 1


def cache_key(kind: str, model: str, request: Request) -> str:
    """SHA-256 over everything that changes the answer; ``purpose`` is only a label."""
    payload = {
        "v": CACHE_KEY_VERSION,
        "kind": kind,
        "model": model,
        "messages": [[m.role, m.content] for m in request.messages],
        "temperature": float(request.temperature),
        "top_p": float(request.top_p),
        "max_tokens": int(request.max_tokens),
        "seed": int(request.seed),
        "sample_index": int(request.sample_index),
        "attempt": int(request.attempt),
        "schema": _plain(request.schema) if request.schema is not None else None,
    }
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


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
        self._round_robin = itertools.count()
        self._grammar_texts: dict[str, str] = {}

    def _grammar_text(self, schema: Mapping[str, Any]) -> str:
        key = json.dumps(_plain(schema), sort_keys=True)
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
                "json_schema": {"name": "response", "schema": _plain(request.schema)},
            }
        elif request.schema is not None and self.structured == "json_object":
            body["response_format"] = {"type": "json_object", "schema": _plain(request.schema)}
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
        async with httpx.AsyncClient(timeout=self.timeout, headers=headers, limits=limits) as client:
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
                    raise BackendError(
                        f"{url} refused the request with HTTP {reply.status_code}: "
                        f"{reply.text[:300]}"
                    )
                last_problem = f"HTTP {reply.status_code}: {reply.text[:200]}"
            if attempt < self.max_retries:
                await asyncio.sleep(self.backoff_s * (2**attempt))
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
            text = choice["message"].get("content") or ""
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
            raise BackendError(
                f"{url} answered with something that is not a chat completion "
                f"({type(error).__name__}): {reply.text[:300]}"
            ) from None
        usage = data.get("usage") or {}
        return Response(
            text=text,
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
            seconds=seconds,
            model=str(data.get("model") or self.model),
        )


# --- llama.cpp in process -----------------------------------------------------------------

_CPU_EXTRA_HINT = "install the cpu extra: pip install 'llama-cpp-python[server]==0.3.36'"
_LOOSE_STRING_CHAR = r'[^"\\]'
_TIGHT_STRING_CHAR = r'[^"\\\x00-\x1F\x7F]'


def _import_llama_cpp() -> Any:
    try:
        return importlib.import_module("llama_cpp")
    except ImportError as error:
        raise BackendError(f"llama-cpp-python is not importable ({error}); {_CPU_EXTRA_HINT}") from None


def json_schema_grammar(schema: Mapping[str, Any]) -> str:
    """GBNF for ``schema`` from llama.cpp's own converter, with control characters banned in strings.

    The converter's string character class ``[^"\\]`` admits raw newlines, tabs
    and other control characters, which JSON forbids inside strings and which
    small models happily emit in long runs; JSON requires them escaped. The
    class is narrowed to exclude U+0000–U+001F and U+007F. If a future
    converter writes its string rule differently we refuse rather than
    silently keep the loose grammar.
    """
    _import_llama_cpp()
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    gbnf = json_schema_to_gbnf(json.dumps(_plain(schema)))
    char_rules = [line for line in gbnf.splitlines() if line.startswith("char ::=")]
    if not char_rules:
        return gbnf  # no free-text strings in this schema (enums, numbers, booleans only)
    if _LOOSE_STRING_CHAR not in char_rules[0]:
        raise BackendError(
            "llama.cpp's JSON-schema converter changed its string rule; cannot ban control "
            f"characters: {char_rules[0]!r}"
        )
    return "\n".join(
        line.replace(_LOOSE_STRING_CHAR, _TIGHT_STRING_CHAR) if line.startswith("char ::=") else line
        for line in gbnf.splitlines()
    )


class LlamaCppBackend:
    """A GGUF model in this process through llama-cpp-python; the chat template comes from the GGUF.

    Requests run one after another (llama.cpp on 2 CPU threads gains nothing
    from interleaving). A schema becomes the tightened grammar of
    :func:`json_schema_grammar`, compiled once per distinct schema.
    """

    def __init__(
        self,
        model_path: str | os.PathLike,
        n_ctx: int = 8192,
        n_threads: int = 2,
        seed: int = 0,
        *,
        model_name: str | None = None,
        verbose: bool = False,
        **llama_kwargs: Any,
    ) -> None:
        self._lock = threading.Lock()
        path = Path(model_path)
        if not path.is_file():
            raise InputError("model file not found", path=path,
                             fix="use a name from fhs.models.MODELS or an existing .gguf path")
        llama_cpp = _import_llama_cpp()
        self._llama_cpp = llama_cpp
        started = time.perf_counter()
        self._llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads,
                                    seed=seed, verbose=verbose, **llama_kwargs)
        self.load_seconds = time.perf_counter() - started
        self.model_path = path
        self.n_ctx = n_ctx
        self.model = model_name or path.name
        self.kind = "llama_cpp"
        self.name = f"llama_cpp:{self.model}"
        self._grammars: dict[str, Any] = {}

    def grammar(self, schema: Mapping[str, Any]) -> Any:
        key = json.dumps(_plain(schema), sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = self._llama_cpp.LlamaGrammar.from_string(
                json_schema_grammar(schema), verbose=False)
        return self._grammars[key]

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        # One llama.cpp context is not re-entrant: facts run in threads take turns here.
        with self._lock:
            return [self.complete_with(request) for request in requests]

    def complete_with(self, request: Request, **overrides: Any) -> Response:
        """One request, with extra ``create_chat_completion`` arguments (e.g. ``logit_bias``).

        For experiments and tests that need to push the sampler; ``complete`` uses none.
        """
        kwargs: dict[str, Any] = {
            "messages": chat_messages(request),
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
            "seed": derive_seed(request.seed, request.sample_index, request.attempt),
        }
        if request.schema is not None:
            kwargs["grammar"] = self.grammar(request.schema)
        kwargs.update(overrides)
        started = time.perf_counter()
        try:
            out = self._llm.create_chat_completion(**kwargs)
        except ValueError as error:  # llama-cpp-python's way of saying the prompt is too long
            raise BackendError(f"{self.name} (n_ctx={self.n_ctx}): {error}") from None
        seconds = time.perf_counter() - started
        usage = out.get("usage") or {}
        return Response(
            text=out["choices"][0]["message"].get("content") or "",
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
            seconds=seconds,
            model=self.model,
        )


# --- vLLM in process ------------------------------------------------------------------------

# The engine arguments of the paper's runs (reference §10), for the `paper` profile.
PAPER_VLLM_ENGINE_ARGS: dict[str, Any] = {
    "dtype": "bfloat16",
    "tensor_parallel_size": 1,
    "gpu_memory_utilization": 0.9,
    "max_num_seqs": 8,
    "max_model_len": 32_816,
}


def _import_vllm() -> Any:
    try:
        return importlib.import_module("vllm")
    except ImportError as error:
        raise BackendError(
            f"vLLM is not importable ({error}); install the gpu extra on a CUDA machine: "
            "pip install 'fhs[gpu]' (or serve the model with `vllm serve` and use backend 'openai')"
        ) from None


def vllm_structured_kwargs(sampling_module: Any, schema: Mapping[str, Any]) -> dict[str, Any]:
    """The SamplingParams keyword that constrains output to ``schema`` on this vLLM version.

    vLLM 0.11+ has ``StructuredOutputsParams`` (``structured_outputs=``); 0.12
    removed the older ``GuidedDecodingParams`` (``guided_decoding=``) that
    0.10 still needs.
    """
    plain = _plain(schema)
    if hasattr(sampling_module, "StructuredOutputsParams"):
        return {"structured_outputs": sampling_module.StructuredOutputsParams(json=plain)}
    if hasattr(sampling_module, "GuidedDecodingParams"):
        return {"guided_decoding": sampling_module.GuidedDecodingParams(json=plain)}
    raise BackendError("this vLLM has neither StructuredOutputsParams nor GuidedDecodingParams")


class VLLMBackend:
    """vLLM in this process: one ``LLM.chat`` call per batch, one SamplingParams per request.

    Prefix caching is on (the J samples and the two verifier calls of a fact
    share their long prompt). Qwen3's chat template is rendered with
    ``enable_thinking=False`` as in the paper; other templates ignore the flag.
    ``seconds`` on each response is the batch's wall time divided evenly.
    """

    def __init__(self, model: str, *, enable_thinking: bool = False, **engine_args: Any) -> None:
        vllm = _import_vllm()
        self._vllm = vllm
        self._sampling = importlib.import_module("vllm.sampling_params")
        args = {"enable_prefix_caching": True, **engine_args}
        self._llm = vllm.LLM(model=model, **args)
        self.model = model
        self.enable_thinking = enable_thinking
        self._lock = threading.Lock()  # the offline engine serves one caller at a time
        self.kind = "vllm"
        self.name = f"vllm:{model}"

    def sampling_params(self, request: Request) -> Any:
        kwargs: dict[str, Any] = {
            "n": 1,
            "temperature": request.temperature,
            "top_p": request.top_p,
            "max_tokens": request.max_tokens,
            "seed": derive_seed(request.seed, request.sample_index, request.attempt),
        }
        if request.schema is not None:
            kwargs.update(vllm_structured_kwargs(self._sampling, request.schema))
        return self._vllm.SamplingParams(**kwargs)

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        if not requests:
            return []
        with self._lock:
            return self._complete(requests)

    def _complete(self, requests: Sequence[Request]) -> list[Response]:
        started = time.perf_counter()
        outputs = self._llm.chat(
            [chat_messages(r) for r in requests],
            sampling_params=[self.sampling_params(r) for r in requests],
            use_tqdm=False,
            chat_template_kwargs={"enable_thinking": self.enable_thinking},
        )
        share = (time.perf_counter() - started) / len(requests)
        return [
            Response(
                text=out.outputs[0].text,
                tokens_in=len(out.prompt_token_ids or ()),
                tokens_out=len(out.outputs[0].token_ids or ()),
                seconds=share,
                model=self.model,
            )
            for out in outputs
        ]


# --- the persistent cache -------------------------------------------------------------------

_SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    model TEXT NOT NULL,
    purpose TEXT NOT NULL,
    text TEXT NOT NULL,
    tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL,
    seconds REAL NOT NULL,
    created REAL NOT NULL
)
"""


@dataclass(frozen=True)
class CacheStats:
    """What the cache holds: the cost of every distinct call ever made, for the cost chapter."""

    entries: int
    tokens_in: int
    tokens_out: int
    seconds: float
    by_purpose: dict[str, dict[str, float]]
    by_model: dict[str, int]


class ResponseCache:
    """Model answers in one SQLite file, keyed by :func:`cache_key`.

    WAL journaling and one commit per stored batch: a killed run loses at most
    the batch in flight and the next run resumes from the rest. Meant for one
    writer at a time.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()  # one connection, shared by the threads of a run
        try:
            self._db = sqlite3.connect(str(self.path), check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.execute(_SCHEMA_SQL)
            self._db.commit()
        except sqlite3.DatabaseError as error:
            raise InputError(f"not a usable response cache ({error})", path=self.path,
                             fix="delete the file or pass another cache_path") from None

    def get_many(self, keys: Sequence[str]) -> dict[str, Response]:
        with self._lock:
            return self._get_many(keys)

    def _get_many(self, keys: Sequence[str]) -> dict[str, Response]:
        found: dict[str, Response] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                f"SELECT key, text, tokens_in, tokens_out, seconds, model "
                f"FROM responses WHERE key IN ({marks})", chunk)
            for key, text, tokens_in, tokens_out, seconds, model in rows:
                found[key] = Response(text=text, tokens_in=tokens_in, tokens_out=tokens_out,
                                      seconds=seconds, cached=True, model=model)
        return found

    def put_many(self, entries: Sequence[tuple[str, str, str, str, Response]]) -> None:
        """Store (key, kind, model, purpose, response) rows in one transaction."""
        now = time.time()
        with self._lock, self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [(key, kind, model, purpose, r.text, r.tokens_in, r.tokens_out, r.seconds, now)
                 for key, kind, model, purpose, r in entries])

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def stats(self) -> CacheStats:
        total = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(tokens_in),0), COALESCE(SUM(tokens_out),0), "
            "COALESCE(SUM(seconds),0) FROM responses").fetchone()
        by_purpose = {
            purpose or "other": {"entries": n, "tokens_in": tin, "tokens_out": tout, "seconds": sec}
            for purpose, n, tin, tout, sec in self._db.execute(
                "SELECT purpose, COUNT(*), SUM(tokens_in), SUM(tokens_out), SUM(seconds) "
                "FROM responses GROUP BY purpose ORDER BY purpose")
        }
        by_model = dict(self._db.execute(
            "SELECT model, COUNT(*) FROM responses GROUP BY model ORDER BY model").fetchall())
        return CacheStats(entries=int(total[0]), tokens_in=int(total[1]), tokens_out=int(total[2]),
                          seconds=float(total[3]), by_purpose=by_purpose, by_model=by_model)

    def close(self) -> None:
        self._db.close()


def _chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class CachedLLM:
    """Any backend behind the persistent cache: a repeated request never reaches the model.

    Misses go to the backend in batches of ``batch_size`` (each batch committed
    as it returns); identical requests within one call are sent once. Hits come
    back with ``cached=True``. ``stats`` tallies every response served.
    """

    def __init__(self, backend: Any, cache: ResponseCache, *, batch_size: int = 64,
                 stats: CallStats | None = None) -> None:
        self.backend = backend
        self.cache = cache
        self.batch_size = max(1, batch_size)
        self.stats = stats if stats is not None else CallStats()
        self._stats_lock = threading.Lock()
        self.kind = getattr(backend, "kind", type(backend).__name__)
        self.model = getattr(backend, "model", getattr(backend, "name", ""))
        self.name = getattr(backend, "name", f"{self.kind}:{self.model}")

    def key(self, request: Request) -> str:
        return cache_key(self.kind, self.model, request)

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        keys = [self.key(r) for r in requests]
        found = self.cache.get_many(keys)
        results: list[Response | None] = [found.get(k) for k in keys]
        first_index: dict[str, int] = {}
        for index, key in enumerate(keys):
            if results[index] is None and key not in first_index:
                first_index[key] = index
        for chunk in _chunks(list(first_index), self.batch_size):
            batch = [requests[first_index[k]] for k in chunk]
            answers = self.backend.complete(batch)
            if len(answers) != len(batch):
                raise BackendError(f"{self.name} returned {len(answers)} answers for {len(batch)} requests")
            self.cache.put_many([(k, self.kind, self.model, r.purpose, a)
                                 for k, r, a in zip(chunk, batch, answers)])
            fresh = dict(zip(chunk, answers))
            for index, key in enumerate(keys):
                if key in fresh and results[index] is None:
                    made_here = index == first_index[key]
                    results[index] = replace(fresh[key], cached=not made_here)
        served = [r for r in results if r is not None]
        assert len(served) == len(requests)
        with self._stats_lock:
            for request, response in zip(requests, served):
                self.stats.add(request, response)
        return served


# --- the factory --------------------------------------------------------------------------

BACKENDS = ("openai", "llama_cpp", "vllm")
BASE_URLS_ENV_VAR = "FHS_LLM_BASE_URLS"
DEFAULT_BASE_URL = "http://127.0.0.1:8000"


def make_llm(
    backend: str,
    model: str,
    *,
    base_urls: Sequence[str] | None = None,
    cache_path: str | os.PathLike | None = None,
    cache_dir: str | os.PathLike | None = None,
    **kw: Any,
) -> LLM:
    """The one way the command line and the notebooks get a model.

    - ``openai``: ``model`` is the served model name; ``base_urls`` default to
      ``$FHS_LLM_BASE_URLS`` (comma-separated) or ``http://127.0.0.1:8000``.
      A Qwen3 model gets ``chat_template_kwargs={"enable_thinking": False}``.
    - ``llama_cpp``: ``model`` is a name from ``fhs.models.MODELS`` (resolved to
      the local GGUF, assembled under ``cache_dir`` if needed) or a .gguf path.
    - ``vllm``: ``model`` is a Hugging Face id or local folder; ``kw`` are
      engine arguments (see ``PAPER_VLLM_ENGINE_ARGS``).

    With ``cache_path`` every call goes through the persistent cache.
    """
    if backend == "openai":
        urls = list(base_urls or [])
        if not urls:
            raw = os.environ.get(BASE_URLS_ENV_VAR, "")
            urls = [u.strip() for u in raw.split(",") if u.strip()] or [DEFAULT_BASE_URL]
        if "qwen3" in model.lower():
            kw.setdefault("chat_template_kwargs", {"enable_thinking": False})
        engine: Any = OpenAIBackend(urls, model, **kw)
    elif backend == "llama_cpp":
        from fhs.models import MODELS, model_path

        path = model_path(model, cache_dir)
        kw.setdefault("model_name", model if model in MODELS else path.name)
        engine = LlamaCppBackend(path, **kw)
    elif backend == "vllm":
        engine = VLLMBackend(model, **kw)
    else:
        raise InputError(f"unknown backend '{backend}'", field="backend",
                         fix=f"use one of {', '.join(BACKENDS)}")
    if cache_path is None:
        return engine
    return CachedLLM(engine, ResponseCache(cache_path))
