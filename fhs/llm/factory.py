"""``make_llm``: the one way the command line and the notebooks get a model."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from fhs.core.errors import InputError
from fhs.core.urls import server_url
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import LLM
from fhs.llm.llama_cpp import LlamaCppBackend
from fhs.llm.openai import OpenAIBackend, openai_identity
from fhs.llm.vllm import VLLMBackend

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
    replay_unparsed: bool = False,
    thinking: bool | None = None,
    **kw: Any,
) -> LLM:
    """The one way the command line and the notebooks get a model.

    - ``openai``: ``model`` is the served model name; ``base_urls`` default to
      ``$FHS_LLM_BASE_URLS`` (comma-separated) or ``http://127.0.0.1:8000``.
    - ``llama_cpp``: ``model`` is a name from ``fhs.llm.models.MODELS`` (resolved to
      the local GGUF, assembled under ``cache_dir`` if needed) or a .gguf path.
    - ``vllm``: ``model`` is a Hugging Face id or local folder; ``kw`` are
      engine arguments (see ``PAPER_VLLM_ENGINE_ARGS``).

    ``thinking`` (the run profile's, off in the paper) is sent to the chat template as
    ``enable_thinking`` by ``openai`` and ``vllm`` whatever the model is called: a served
    alias must not turn Qwen3's thinking back on. ``None`` leaves the template's default.
    With ``cache_path`` every call goes through the persistent cache; an answer a stage
    marked unparseable is asked again unless ``replay_unparsed``.
    """
    if backend == "openai":
        urls = server_urls(base_urls)
        engine: Any = OpenAIBackend(urls, model, thinking=thinking, **kw)
    elif backend == "llama_cpp":
        from fhs.llm.models import MODELS, model_path

        path = model_path(model, cache_dir)
        kw.setdefault("model_name", model if model in MODELS else path.name)
        engine = LlamaCppBackend(path, **kw)
    elif backend == "vllm":
        engine = VLLMBackend(model, enable_thinking=bool(thinking), **kw)
    else:
        raise InputError(f"unknown backend '{backend}'", field="backend",
                         fix=f"use one of {', '.join(BACKENDS)}")
    if cache_path is None:
        return engine
    return CachedLLM(engine, ResponseCache(cache_path), replay_unparsed=replay_unparsed)


def server_urls(base_urls: Sequence[str] | None) -> list[str]:
    """The URLs given, else ``$FHS_LLM_BASE_URLS`` (comma-separated), else ``http://127.0.0.1:8000``;
    each checked to be an http(s) URL with a host (a one-line error names the first that is not)."""
    urls = list(base_urls or [])
    field = "base-url"
    if not urls:
        raw = os.environ.get(BASE_URLS_ENV_VAR, "")
        urls = [u.strip() for u in raw.split(",") if u.strip()] or [DEFAULT_BASE_URL]
        field = BASE_URLS_ENV_VAR if raw.strip() else field
    return [server_url(url, field) for url in urls]


def backend_identity(backend: str, model: str, *, base_urls: Sequence[str] | None = None,
                     structured: str | None = None, thinking: bool | None = None,
                     any_server: bool = False) -> tuple[str, str, str, str]:
    """``(kind, model, name, provenance)`` of the cached client ``make_llm`` would build, without building it.

    A replay (``fhs.llm.replay``) computes the keys a run's answers were stored
    under, on a machine that has neither the server nor the engine nor the weights.
    """
    if backend == "openai":
        kind, name, provenance = openai_identity(model, server_urls(base_urls), structured=structured or "json_schema",
                                                 thinking=thinking, any_server=any_server)
        return kind, model, name, provenance
    if backend == "llama_cpp":
        from pathlib import Path

        from fhs.llm.models import MODELS

        served = model if model in MODELS else Path(model).name
        return "llama_cpp", served, f"llama_cpp:{served}", ""
    if backend == "vllm":
        return ("vllm-thinking" if thinking else "vllm"), model, f"vllm:{model}", ""
    raise InputError(f"unknown backend '{backend}'", field="backend", fix=f"use one of {', '.join(BACKENDS)}")
