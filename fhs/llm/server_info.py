"""How long a prompt the model behind a backend accepts: its context length in tokens.

Prompt budgets (``fhs/method/prompting.py``) are checked against the model's
context length less the reply's ``max_tokens``, so that no request is refused
for its length. An OpenAI-compatible server says it in ``GET /v1/models``:
vLLM (and SGLang) report ``max_model_len`` for each served model, some servers
``context_length`` or ``max_context_length``. llama.cpp in process knows its
``n_ctx``, and vLLM in process its engine's ``max_model_len``. Where nothing
says, the caller falls back to the profile's value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

_LENGTH_KEYS = ("max_model_len", "context_length", "max_context_length")


def _models_url(base_url: str) -> str:
    base = base_url.rstrip("/")
    if base.endswith("/v1"):
        base = base[: -len("/v1")]
    return f"{base}/v1/models"


def context_length_of(listing: Mapping[str, Any], model: str) -> int | None:
    """The length a ``/v1/models`` reply gives for ``model`` (by id, or by the root it serves), else None."""
    entries = listing.get("data") if isinstance(listing, Mapping) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or model not in (entry.get("id"), entry.get("root")):
            continue
        for key in _LENGTH_KEYS:
            value = entry.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value > 0:
                return value
    return None


MAX_LISTING_BYTES = 1 << 20  # a /v1/models reply longer than this is not read (a listing is a few KB)


def served_context_length(base_url: str, model: str, *, api_key: str | None = None, timeout: float = 5.0) -> int | None:
    """``max_model_len`` of ``model`` on the server at ``base_url``; None if it is unreachable or does not say.

    A listing that is too long or nested too deep to read says nothing (with one warning).
    """
    import httpx

    from fhs.core.errors import warn
    from fhs.core.urls import public_url

    url = _models_url(base_url)
    host = (urlsplit(url).hostname or "").lower()
    loopback = host in ("localhost", "::1") or host.startswith("127.")
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with httpx.stream("GET", url, timeout=timeout, headers=headers, trust_env=not loopback) as reply:
            reply.raise_for_status()
            body = bytearray()
            for chunk in reply.iter_bytes():
                body += chunk
                if len(body) > MAX_LISTING_BYTES:
                    warn(
                        f"{public_url(url)} sent a model listing over {MAX_LISTING_BYTES:,} bytes: not read, "
                        f"so the profile's context length is used"
                    )
                    return None
        return context_length_of(json.loads(bytes(body)), model)
    except RecursionError:
        warn(
            f"{public_url(url)} sent a model listing nested deeper than this client parses: not read, "
            f"so the profile's context length is used"
        )
        return None
    except (httpx.HTTPError, ValueError):
        return None


def context_window(llm: Any) -> int | None:
    """The context length of the model behind ``llm`` (cache and logging wrappers looked through).

    A backend that knows it exposes ``context_tokens`` (llama.cpp's ``n_ctx``);
    a server backend (``base_urls`` and ``model``) is asked, and with several
    servers the smallest length counts. None when nothing says.
    """
    engine = llm
    while hasattr(engine, "backend"):  # CachedLLM, benchmark wrappers
        engine = engine.backend
    known = getattr(engine, "context_tokens", None)
    if isinstance(known, int) and known > 0:
        return known
    if getattr(engine, "kind", "") == "vllm":
        try:
            return int(engine._llm.llm_engine.model_config.max_model_len)
        except (AttributeError, TypeError, ValueError):
            return None
    urls, model = getattr(engine, "base_urls", None), getattr(engine, "model", None)
    if urls and isinstance(model, str):
        key = getattr(engine, "api_key", None)
        lengths = [n for n in (served_context_length(url, model, api_key=key) for url in urls) if n]
        return min(lengths) if lengths else None
    return None
