"""Run profiles: which model, which backend and how much data, by name.

``smoke`` is for tests and CI (SmolLM2-135M on the CPU, a handful of facts),
``cpu`` is the default book build on a laptop (Qwen2.5-Coder-0.5B-Instruct on the CPU; the
LLM-free chapters on full test splits, the LLM chapters on a small
context-level sample), ``paper`` is a GPU box serving Qwen3-32B through vLLM's
OpenAI-compatible server (full test splits, three seeded runs).

Numbers from ``smoke`` and ``cpu`` are real but come from tiny models; the
book says so wherever they appear.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fhs.core.errors import choose
from fhs.method.config import FHSConfig
from fhs.retrieval.encoders import DEFAULT_MODEL


@dataclass(frozen=True)
class Profile:
    name: str
    backend: str  # "llama_cpp" | "openai" | "vllm"
    model: str
    llm_facts: int | None  # context-level sample size for LLM methods; None = every fact
    retrieval_facts: int | None  # the same for LLM-free runs
    seeds: tuple[int, ...] = (0,)
    base_urls: tuple[str, ...] = ()
    workers: int = 1  # facts processed at once (keeps a server's batch full; 1 for in-process models)
    fhs_overrides: Mapping[str, Any] = field(default_factory=dict)
    dense_model: str = DEFAULT_MODEL  # the dense retriever's encoder (fhs.retrieval.encoders.MODELS)
    description: str = ""

    def fhs_config(self, **more: Any) -> FHSConfig:
        return FHSConfig.fhs(**{**self.fhs_overrides, **more})


# Prompt budgets for 2 CPU cores: a shorter context and a shorter candidate list
# keep one fact's FHS calls under a minute or two. Every other knob is the paper's.
# The selector runs once per method and fact (ten times a fact in chapter 2), so its
# list is the budget's biggest lever: 10 candidates, measured 19 s a call with 20.
_CPU_BUDGET = {
    "context_chars": 2_000,
    "definition_chars": 160,
    "selector_candidates": 10,
    "max_tokens_hypothesis": 320,
    "max_tokens_verifier": 1_200,
    "max_tokens_selector": 160,
}

PROFILES: dict[str, Profile] = {
    profile.name: profile
    for profile in (
        Profile(
            name="smoke",
            backend="llama_cpp",
            model="smollm2-135m",
            llm_facts=3,
            retrieval_facts=200,
            fhs_overrides={**_CPU_BUDGET, "context_chars": 600, "selector_candidates": 5,
                           "max_tokens_hypothesis": 200, "max_tokens_verifier": 400, "max_tokens_selector": 60},
            description="plumbing checks: SmolLM2-135M on the CPU, a few facts",
        ),
        Profile(
            name="cpu",
            backend="llama_cpp",
            model="qwen2.5-0.5b",
            # ten methods cost about nine model-minutes a fact on two cores (measured with
            # `fhs bench llm`), so the hour-long book affords a sample of two facts per dataset
            llm_facts=2,
            retrieval_facts=None,
            fhs_overrides=_CPU_BUDGET,
            # concept texts cut at 64 word pieces: embedding ICD-10-CM's 72,621 codes whole
            # takes about 26 of the book's 60 minutes (book/deviations.md; --dense-model minilm-int8)
            dense_model="minilm-int8-d64",
            description="the default book: Qwen2.5-Coder-0.5B-Instruct on the CPU, small context-level samples for LLM methods",
        ),
        Profile(
            name="paper",
            backend="openai",
            model="Qwen/Qwen3-32B",
            llm_facts=None,
            retrieval_facts=None,
            seeds=(0, 1, 2),
            base_urls=("http://127.0.0.1:8000/v1",),
            workers=8,
            # the served --max-model-len (book/reproducing.md) when the server does not report it
            fhs_overrides={"context_tokens": 32_768},
            description="a GPU box: vLLM serving Qwen3-32B, full test splits, three seeded runs",
        ),
    )
}


def get_profile(name: str) -> Profile:
    return choose(PROFILES, name, "profile")
