"""The model backends, one registered object each: its options, its identity in the response cache, its checks
and how its client is built.

The run layer holds a backend's name and plain settings (``ClientSettings``) and asks the
``Backend`` found by :func:`backend_for` everything else, so adding a backend is one entry in
``BACKENDS``. A replay (``fhs.llm.replay``) is the backend of a run given an archive: it answers
under the identity of the backend it names, so its answers are found under the keys they were stored by.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.core.urls import public_url, server_url
from fhs.llm.contract import LLM

BASE_URLS_ENV_VAR = "FHS_LLM_BASE_URLS"
DEFAULT_BASE_URL = "http://127.0.0.1:8000"
ORACLE = "oracle"

Identity = tuple[str, str, str, str]  # (kind, model, name, provenance): what the response cache keys answers by


@dataclass(frozen=True)
class ClientSettings:
    """What one model client is built from: plain data, equal settings share a client."""

    backend: str
    model: str
    base_urls: tuple[str, ...] = ()
    structured: str | None = None  # how an OpenAI-compatible server gets the JSON schema (None: json_schema)
    any_server: bool = False
    max_in_flight: int | None = None
    thinking: bool | None = None
    request_timeout: float | None = None
    give_up_after: float | None = None
    retry_backoff: float | None = None
    oracle_noise: str | None = None
    replay: Path | None = None
    cache_path: Path | None = None
    replay_unparsed: bool = False


@dataclass(frozen=True)
class Backend:
    """One way of answering model requests.

    ``open`` builds the bare engine from a model name and engine keywords (``make_llm``);
    ``options`` are the keywords a run's settings give it; ``identity`` is what the response
    cache keys its answers by, computed without building it (a replay needs no engine).
    """

    name: str
    help: str
    open: Callable[..., LLM]
    identity: Callable[[ClientSettings], Identity]
    options: Callable[[ClientSettings], dict[str, Any]] = lambda settings: {}
    check: Callable[[ClientSettings], ClientSettings] = lambda settings: settings  # before any data loads
    fingerprint: Callable[[ClientSettings], dict[str, Any]] = lambda settings: {"model": settings.model}
    model_file: Callable[[str], Path | None] = lambda model: None  # the weights on this machine, if local
    servers: bool = False  # asks servers at base URLs (a profile's URLs apply)
    paper_by_default: bool = False  # a run naming no profile takes the paper's (a GPU's work, or no model's)
    sends_thinking: bool = False  # the chat template's thinking mode reaches the model (and the run's record)
    cpu_engine: bool = False  # runs in this process on the CPU
    # answers from a dataset's gold (the oracle): built with the dataset, no response cache or verdict ledger,
    # never a profile's model, one process's work
    gold: Callable[..., LLM] | None = None
    cached: bool = True  # answers go through the response cache

    def client(self, settings: ClientSettings) -> LLM:
        """The client a run asks: the engine, behind the response cache where there is one."""
        if self.gold is not None:
            raise InputError(
                f"the {self.name} model answers from a dataset's gold: it is built with the "
                "dataset (Experiment.llm_context), not on its own",
                field="backend",
            )
        engine = self.open(
            settings.model,
            base_urls=list(settings.base_urls) or None,
            thinking=settings.thinking,
            **self.options(settings),
        )
        return cached(engine, settings.cache_path, settings.replay_unparsed) if self.cached else engine


def cached(engine: LLM, cache_path: str | os.PathLike | None, replay_unparsed: bool = False) -> LLM:
    """``engine`` behind the response cache at ``cache_path`` (``None``: the engine itself)."""
    if cache_path is None:
        return engine
    from fhs.llm.cache import CachedLLM, ResponseCache

    return CachedLLM(engine, ResponseCache(cache_path), replay_unparsed=replay_unparsed)


def server_urls(base_urls: Sequence[str] | None) -> list[str]:
    """The URLs given, else ``$FHS_LLM_BASE_URLS`` (comma-separated), else ``http://127.0.0.1:8000``;
    each checked to be an http(s) URL with a host (a one-line error names the first that is not)."""
    urls = list(base_urls or [])
    where = "base-url"
    if not urls:
        raw = os.environ.get(BASE_URLS_ENV_VAR, "")
        urls = [u.strip() for u in raw.split(",") if u.strip()] or [DEFAULT_BASE_URL]
        where = BASE_URLS_ENV_VAR if raw.strip() else where
    return [server_url(url, where) for url in urls]


# --- openai: an OpenAI-compatible server (vLLM, llama.cpp's server, ...)


def _open_openai(
    model: str,
    *,
    base_urls: Sequence[str] | None = None,
    thinking: bool | None = None,
    cache_dir: object = None,
    **kw: Any,
) -> LLM:
    from fhs.llm.openai import OpenAIBackend

    return OpenAIBackend(server_urls(base_urls), model, thinking=thinking, **kw)


def _openai_options(settings: ClientSettings) -> dict[str, Any]:
    named = {
        "structured": settings.structured,
        "any_server": settings.any_server or None,
        "max_in_flight": settings.max_in_flight,
        "timeout": settings.request_timeout,
        "give_up_s": settings.give_up_after,
        "backoff_s": settings.retry_backoff,
    }
    return {key: value for key, value in named.items() if value is not None}


def _openai_identity(settings: ClientSettings) -> Identity:
    from fhs.llm.openai import openai_identity

    kind, name, provenance = openai_identity(
        settings.model,
        server_urls(settings.base_urls),
        structured=settings.structured or "json_schema",
        thinking=settings.thinking,
        any_server=settings.any_server,
    )
    return kind, settings.model, name, provenance


def _openai_check(settings: ClientSettings) -> ClientSettings:
    """A bad URL or in-flight limit fails before any data loads."""
    from fhs.llm.inflight import check_in_flight

    urls = tuple(server_urls(settings.base_urls)) if settings.base_urls else ()
    if settings.max_in_flight is not None:
        check_in_flight(settings.max_in_flight, max(1, len(urls)))
    return replace(settings, base_urls=urls)


# --- llama_cpp: a GGUF file in this process


def _open_llama(
    model: str,
    *,
    base_urls: object = None,
    thinking: object = None,
    cache_dir: str | os.PathLike | None = None,
    **kw: Any,
) -> LLM:
    from fhs.llm.llama_cpp import LlamaCppBackend
    from fhs.llm.models import MODELS, model_path

    path = model_path(model, cache_dir)
    kw.setdefault("model_name", model if model in MODELS else path.name)
    return LlamaCppBackend(path, **kw)


def _llama_identity(settings: ClientSettings) -> Identity:
    from fhs.llm.models import MODELS

    served = settings.model if settings.model in MODELS else Path(settings.model).name
    return "llama_cpp", served, f"llama_cpp:{served}", ""


def _llama_file(model: str) -> Path | None:
    from fhs.llm.models import model_path

    return model_path(model)


def _llama_fingerprint(settings: ClientSettings) -> dict[str, Any]:
    """The GGUF's SHA-256: the registry's, else the file's."""
    from fhs.llm.models import MODELS

    info = MODELS.get(settings.model)
    return {"sha256": info.sha256 if info and info.sha256 else _gguf_digest(_llama_file(settings.model))}


_GGUF_DIGESTS: dict[tuple[str, int, int], str] = {}


def _gguf_digest(path: Path | None) -> str:
    """A model file's SHA-256, computed once per process and file version."""
    assert path is not None
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _GGUF_DIGESTS:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        _GGUF_DIGESTS[key] = digest.hexdigest()
    return _GGUF_DIGESTS[key]


# --- vllm: the vLLM engine in this process


def _open_vllm(
    model: str, *, base_urls: object = None, thinking: bool | None = None, cache_dir: object = None, **kw: Any
) -> LLM:
    from fhs.llm.vllm import VLLMBackend

    return VLLMBackend(model, enable_thinking=bool(thinking), **kw)


def _vllm_identity(settings: ClientSettings) -> Identity:
    return ("vllm-thinking" if settings.thinking else "vllm"), settings.model, f"vllm:{settings.model}", ""


# --- oracle: every stage answered from the facts' gold (the oracle model)


def _oracle_model() -> Any:
    """The oracle model's module, imported in this one place."""
    from fhs.llm import oracle as oracle_model

    return oracle_model


def _oracle_check(settings: ClientSettings) -> ClientSettings:
    """Noise checked and written one way, so equal noise is one run folder; an archive is another source."""
    noise = str(_oracle_model().OracleNoise.parse(settings.oracle_noise))
    if settings.replay is not None:
        raise InputError(
            f"--backend {ORACLE} answers from the facts' gold and --replay from an archive: "
            "a run takes its answers from one of them",
            field="replay",
            fix=f"leave out --replay to run the oracle, or --backend {ORACLE} to replay the archive",
        )
    return replace(settings, oracle_noise=noise)


def _oracle_gold(settings: ClientSettings, facts: Any, taxonomy: Any, domain: Any) -> LLM:
    model: LLM = _oracle_model().oracle_for(facts, taxonomy, domain, settings.oracle_noise)
    return model


def _no_engine(why: str) -> Callable[..., LLM]:
    """An ``open`` for a backend with no engine of its own (``make_llm`` offers only ``ENGINES``)."""

    def refuse(*args: Any, **kw: Any) -> LLM:
        raise InputError(why, field="backend")

    return refuse


def _oracle_identity(settings: ClientSettings) -> Identity:
    return ORACLE, ORACLE, ORACLE, ""


BACKENDS: Mapping[str, Backend] = {
    backend.name: backend
    for backend in (
        Backend(
            "openai",
            "an OpenAI-compatible server at --base-url",
            _open_openai,
            _openai_identity,
            options=_openai_options,
            check=_openai_check,
            servers=True,
            paper_by_default=True,
            sends_thinking=True,
            fingerprint=lambda s: {"model": s.model, "base_urls": [public_url(u) for u in s.base_urls]},
        ),
        Backend(
            "llama_cpp",
            "a GGUF file through llama.cpp, in this process",
            _open_llama,
            _llama_identity,
            fingerprint=_llama_fingerprint,
            model_file=_llama_file,
            cpu_engine=True,
        ),
        Backend(
            "vllm",
            "the vLLM engine, in this process",
            _open_vllm,
            _vllm_identity,
            paper_by_default=True,
            sends_thinking=True,
        ),
        Backend(
            ORACLE,
            "no model: every stage answered from the facts' gold",
            _no_engine(f"the {ORACLE} model is built with the dataset whose gold it answers from"),
            _oracle_identity,
            check=_oracle_check,
            fingerprint=lambda s: {"model": ORACLE},
            paper_by_default=True,
            gold=_oracle_gold,
            cached=False,
        ),
    )
}
ENGINES = tuple(name for name, backend in BACKENDS.items() if backend.gold is None)  # what make_llm builds


def _replay_open(settings: ClientSettings) -> LLM:
    from fhs.llm.replay import ReplayLLM

    assert settings.replay is not None  # backend_for picks the replay only with an archive
    kind, model, name, provenance = backend_named(settings.backend).identity(settings)
    return ReplayLLM(settings.replay, kind=kind, model=model, name=name, provenance=provenance)


@dataclass(frozen=True)
class ReplayBackend(Backend):
    """Answers from an ``fhs archive`` file under the identity of the backend the run names."""

    def client(self, settings: ClientSettings) -> LLM:
        return _replay_open(settings)


REPLAY = ReplayBackend(
    "replay",
    "every answer from an `fhs archive` file (--replay): no server is asked",
    _no_engine("a replay answers from an archive: pass --replay ARCHIVE with the run's backend"),
    lambda s: backend_named(s.backend).identity(s),
    cached=False,
)


def backend_named(name: str) -> Backend:
    """The registered backend ``name``; an unknown name fails when its client is built or identified."""
    if name in BACKENDS:
        return BACKENDS[name]

    def unknown(*args: Any, **kw: Any) -> Any:
        raise InputError(f"unknown backend '{name}'", field="backend", fix=f"use one of {', '.join(ENGINES)}")

    return Backend(name, "", unknown, unknown)


def backend_for(settings: ClientSettings) -> Backend:
    """The backend that answers a run: the archive's replay where one is given, else the one named."""
    return (
        REPLAY
        if settings.replay is not None and backend_named(settings.backend).gold is None
        else (backend_named(settings.backend))
    )


__all__ = [
    "BACKENDS",
    "ENGINES",
    "ORACLE",
    "REPLAY",
    "Backend",
    "ClientSettings",
    "Identity",
    "backend_for",
    "backend_named",
    "cached",
    "server_urls",
]
