"""llama.cpp in process (llama-cpp-python): the CPU backend of the smoke and cpu profiles."""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.llm.contract import BackendError, Request, Response, as_json_types, chat_messages, derive_seed
from fhs.llm.kv_states import PromptStates
from fhs.llm.likeliest_first import install as install_likeliest_first
from fhs.llm.models import MODELS

THREADS_ENV = "FHS_LLAMA_THREADS"  # llama.cpp's threads in this process (default: 2)
DEFAULT_THREADS = 2
_CPU_EXTRA_HINT = "install the cpu extra: pip install 'llama-cpp-python[server]==0.3.36'"
_LOOSE_STRING_CHAR = r'[^"\\]'
_TIGHT_STRING_CHAR = r'[^"\\\x00-\x1F\x7F]'


def chosen_threads(threads: int | None = None) -> int | None:
    """The threads asked for: ``threads``, else ``$FHS_LLAMA_THREADS``, else None (the defaults)."""
    if threads:
        return threads
    value = os.environ.get(THREADS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise InputError(
            f"expected a whole number of threads, at least 1, got {value!r}",
            field=THREADS_ENV,
            fix=f"unset {THREADS_ENV} for {DEFAULT_THREADS} threads, or set it to e.g. 1",
        )
    return int(value)


def thread_options(threads: int | None = None) -> dict[str, int]:
    """llama.cpp's thread keywords: ``threads``, else ``$FHS_LLAMA_THREADS``, for generation and prompts
    alike (llama-cpp-python would otherwise evaluate prompts on every core, and two one-thread
    processes would each spin two); else 2 for generation and llama.cpp's default for prompts.

    The count splits a matrix product's rows, never a dot product, so replies do not depend on it
    (``tests/test_llm.py`` checks SmolLM2's logits at 1 and 2 threads). Two processes of one thread
    each share two cores better than taking turns with two threads each (``make test``'s model phase)."""
    chosen = chosen_threads(threads)
    return {"n_threads": chosen, "n_threads_batch": chosen} if chosen else {"n_threads": DEFAULT_THREADS}


def _import_llama_cpp() -> Any:
    try:
        llama_cpp = importlib.import_module("llama_cpp")
    except ImportError as error:
        raise BackendError(f"llama-cpp-python is not importable ({error}); {_CPU_EXTRA_HINT}") from None
    _quiet_warnings(llama_cpp)
    return llama_cpp


_GGML_ERROR, _GGML_CONT = 4, 5  # ggml's log levels: none, debug, info, warn, error, continue
_log_state: dict[str, Any] = {}


def _quiet_warnings(llama_cpp: Any) -> None:
    """Let only llama.cpp's errors reach stderr unless a model was loaded ``verbose``.

    llama-cpp-python 0.3.36 maps ggml's levels as they were before ggml added a
    debug level, so with ``verbose=False`` it still prints warnings, e.g. every
    ``vocab_only`` load says "n_ctx_seq (512) > n_ctx_train (0)", which lands in
    the middle of a command's one-line error.
    """
    if "callback" in _log_state:
        return
    import ctypes
    import logging
    import sys

    verbose_logger = logging.getLogger("llama-cpp-python")

    @llama_cpp.llama_log_callback
    def callback(level: int, text: bytes, _user_data: Any) -> None:
        shown = _log_state.get("shown", False) if level == _GGML_CONT else level >= _GGML_ERROR
        _log_state["shown"] = shown
        if shown or verbose_logger.level <= logging.DEBUG:
            print(text.decode("utf-8", "replace"), end="", flush=True, file=sys.stderr)

    _log_state["callback"] = callback  # ctypes calls it later: it must stay referenced
    llama_cpp.llama_log_set(callback, ctypes.c_void_p(0))


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

    gbnf = json_schema_to_gbnf(json.dumps(as_json_types(schema)))
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


N_UBATCH = 128  # tokens of a prompt per evaluation step (llama.cpp's default: 512)


class LlamaCppBackend:
    """A GGUF model in this process through llama-cpp-python; the chat template comes from the GGUF.

    Requests run one after another (llama.cpp on its CPU threads, :func:`thread_options`, gains nothing
    from interleaving). A schema becomes the tightened grammar of
    :func:`json_schema_grammar`, compiled once per distinct schema.
    ``kv_states`` saved KV caches of recent calls are restored when a prompt
    shares a longer prefix with one of them than with the last call
    (``fhs/llm/kv_states.py``); 0 keeps only llama.cpp's own cache of the last call.
    Sixteen: with prompts ordered for prefix caching, consecutive calls are different
    stages, and the call that shares most with the next prompt is usually a few calls
    back (``python -m dev.bench_kv``; book/engineering.md, "Prompt order and prefix reuse").
    ``likeliest_first`` asks the grammar about the likeliest tokens before the rest
    (``fhs/llm/likeliest_first.py``): the same replies, with far less grammar work per token.
    A prompt is evaluated ``n_ubatch`` tokens at a time: 128 rather than llama.cpp's 512 keeps
    a step's activations in the CPU's cache, for the same replies a few percent sooner
    (``python -m dev.bench_cpu --part llama``, rows ``ubatch``).
    """

    def __init__(
        self,
        model_path: str | os.PathLike,
        n_ctx: int = 8192,
        n_threads: int | None = None,
        seed: int = 0,
        *,
        model_name: str | None = None,
        verbose: bool = False,
        kv_states: int = 16,
        likeliest_first: bool = True,
        **llama_kwargs: Any,
    ) -> None:
        self._lock = threading.Lock()
        path = Path(model_path)
        if not path.is_file():
            raise InputError(
                "model file not found",
                path=path,
                fix=f"use one of {', '.join(sorted(MODELS))} or an existing .gguf path",
            )
        llama_cpp = _import_llama_cpp()
        self._llama_cpp = llama_cpp
        started = time.perf_counter()
        llama_kwargs.setdefault("n_ubatch", N_UBATCH)
        for keyword, count in thread_options(n_threads).items():
            llama_kwargs.setdefault(keyword, count)
        self._llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, seed=seed, verbose=verbose, **llama_kwargs)
        self.load_seconds = time.perf_counter() - started
        self.sampled: dict[str, int] = {}  # tokens sampled from a narrowed array or the whole one
        if likeliest_first:
            install_likeliest_first(
                self._llm, llama_cpp, importlib.import_module("llama_cpp._internals"), counts=self.sampled
            )
        self.model_path = path
        self.n_ctx = n_ctx
        self.model = model_name or path.name
        self.kind = "llama_cpp"
        self.name = f"llama_cpp:{self.model}"
        self._grammars: dict[str, Any] = {}
        self.states = PromptStates(self._llm, llama_cpp, kv_states) if kv_states > 0 else None
        if self.states is not None:
            generate, states = self._llm.generate, self.states

            def restoring(tokens: Sequence[int], *args: Any, **kwargs: Any) -> Any:
                # the exact prompt tokens, just before llama.cpp matches them against its cache
                states.restore_for(tokens)
                return generate(tokens, *args, **kwargs)

            self._llm.generate = restoring

    @property
    def context_tokens(self) -> int:
        """The context length prompts must fit in, with their reply (``fhs.llm.server_info``)."""
        return self.n_ctx

    def grammar(self, schema: Mapping[str, Any]) -> Any:
        key = json.dumps(as_json_types(schema), sort_keys=True)
        if key not in self._grammars:
            self._grammars[key] = self._llama_cpp.LlamaGrammar.from_string(json_schema_grammar(schema), verbose=False)
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
        self._reset_perf()
        started = time.perf_counter()
        try:
            out = self._llm.create_chat_completion(**kwargs)
        except ValueError as error:  # llama-cpp-python's way of saying the prompt is too long
            raise BackendError(f"{self.name} (n_ctx={self.n_ctx}): {error}") from None
        if self.states is not None:
            self.states.save()
        seconds = time.perf_counter() - started
        evaluated, prompt_seconds = self._prompt_perf()
        usage = out.get("usage") or {}
        choice = out["choices"][0]
        return Response(
            text=choice["message"].get("content") or "",
            tokens_in=int(usage.get("prompt_tokens") or 0),
            tokens_out=int(usage.get("completion_tokens") or 0),
            seconds=seconds,
            model=self.model,
            prompt_evaluated=evaluated,
            prompt_seconds=prompt_seconds,
            finish_reason=choice.get("finish_reason"),  # "length" when max_tokens cut the answer
        )

    # llama.cpp keeps the KV cache of the previous call and evaluates only the prompt tokens
    # after the longest common prefix; its perf counters say how many that was.
    def _context(self) -> Any:
        ctx = getattr(self._llm, "_ctx", None)
        return getattr(ctx, "ctx", None)

    def _reset_perf(self) -> None:
        ctx = self._context()
        if ctx is not None and hasattr(self._llama_cpp, "llama_perf_context_reset"):
            self._llama_cpp.llama_perf_context_reset(ctx)

    def _prompt_perf(self) -> tuple[int | None, float | None]:
        ctx = self._context()
        if ctx is None or not hasattr(self._llama_cpp, "llama_perf_context"):
            return None, None
        data = self._llama_cpp.llama_perf_context(ctx)
        return int(data.n_p_eval), float(data.t_p_eval_ms) / 1000.0


# --- vLLM in process ------------------------------------------------------------------------
