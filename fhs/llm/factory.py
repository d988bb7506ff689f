"""``make_llm``: the one way the command line and the notebooks get a model (the backends: ``fhs.llm.backends``)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from fhs.core.errors import InputError
from fhs.llm.backends import BACKENDS, ENGINES, Backend, ClientSettings, cached, server_urls
from fhs.llm.contract import LLM

__all__ = ["backend_identity", "make_llm", "server_urls"]


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
    engine = _engine(backend).open(model, base_urls=base_urls, thinking=thinking, cache_dir=cache_dir, **kw)
    return cached(engine, cache_path, replay_unparsed)


def backend_identity(
    backend: str,
    model: str,
    *,
    base_urls: Sequence[str] | None = None,
    structured: str | None = None,
    thinking: bool | None = None,
    any_server: bool = False,
) -> tuple[str, str, str, str]:
    """``(kind, model, name, provenance)`` of the cached client ``make_llm`` would build, without building it.

    A replay (``fhs.llm.replay``) computes the keys a run's answers were stored
    under, on a machine that has neither the server nor the engine nor the weights.
    """
    settings = ClientSettings(
        backend,
        model,
        base_urls=tuple(base_urls or ()),
        structured=structured,
        thinking=thinking,
        any_server=any_server,
    )
    return _engine(backend).identity(settings)


def _engine(name: str) -> Backend:
    """A backend ``make_llm`` builds on its own (the oracle is built with its dataset)."""
    if name not in ENGINES:
        raise InputError(f"unknown backend '{name}'", field="backend", fix=f"use one of {', '.join(ENGINES)}")
    return BACKENDS[name]
