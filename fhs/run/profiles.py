"""Run profiles: which model, which backend and how much data, by name.

``smoke`` is for tests and CI (SmolLM2-135M on the CPU, a handful of facts),
``cpu`` is the default book build on a laptop (Qwen2.5-Coder-0.5B-Instruct on the CPU; the
LLM-free chapters on full test splits, the LLM chapters on a small
context-level sample). Three profiles serve Qwen3-32B through vLLM's
OpenAI-compatible server on a GPU box, three seeded runs each:

- ``paper``: the paper's scale. The paper's FinTagging test split holds 2,509
  facts in 191 contexts, 93% of them table cells in tables of about 21 facts.
  Our financial test data stands in for it with every FinCL fact (500, drawn from
  the same benchmark but about one fact per context) plus a context-level sample
  of the 2024/2025-tagged iXBRL filings, whose tables are as dense as the
  paper's (about 2,009 facts, so about 2,509 together); every CodiEsp mention;
  Table 11's pilot on a context-level sample of the 2023-tagged development
  filings near the authors' 661 development facts. ``ixbrl-dev`` is never a
  test set, and the full iXBRL test set only runs when asked for (``paper-full``).
- ``gpu-sample``: about 30 facts per dataset, sized by ``fhs plan`` to one night
  on one H100 (a few hundred per dataset would take days at the paper's budgets).
- ``paper-full``: every fact of every set (53,523 iXBRL test facts, the pilot on
  all 129,605 development facts) with the ``paper`` profile's settings, so its cost
  can be planned and whoever wants every fact can ask for it.

Numbers from ``smoke`` and ``cpu`` are real but come from tiny models; the
book says so wherever they appear.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from fhs.core.errors import choose
from fhs.llm.backends import BACKENDS
from fhs.method.config import FHSConfig
from fhs.retrieval.encoders import DEFAULT_MODEL

# Facts at once on a server profile. Most stages of a fact have one or two requests in flight
# (the selector one, the hypotheses J), so filling the in-flight limit (128) takes about as many
# facts at once; with 8 the client never had more than 16 requests at a server
# (dev/bench_serve.py --fixed-latency 1). A worker holds one record, about 100 KB.
SERVER_WORKERS = 128


@dataclass(frozen=True)
class RunProfile:
    """How a profile runs: its model and backend, sample sizes, seeds and FHS budgets (the papermill
    parameters of the same profile are ``fhs.book.toc.ProfileParameters``)."""

    name: str
    backend: str  # "llama_cpp" | "openai" | "vllm"
    model: str
    llm_facts: int | None  # context-level sample size for LLM methods; None = every fact
    retrieval_facts: int | None  # the same for LLM-free runs
    seeds: tuple[int, ...] = (0,)
    base_urls: tuple[str, ...] = ()
    workers: int = 1  # facts processed at once (keeps a server's batch full; 1 for in-process models)
    # requests in flight per server URL, process-wide (fhs.llm.inflight): enough to fill a vLLM batch
    max_in_flight: int = 128
    # Qwen3's thinking mode, sent to the chat template whatever the model is called (the paper: off)
    thinking: bool = False
    fhs_overrides: Mapping[str, Any] = field(default_factory=dict)
    dense_model: str = DEFAULT_MODEL  # the dense retriever's encoder (fhs.retrieval.encoders.MODELS)
    # per taxonomy name, an encoder that replaces dense_model for that taxonomy's concepts
    dense_models: Mapping[str, str] = field(default_factory=dict)
    description: str = ""
    # LLM sample sizes of the datasets that need their own (None = every fact); the others take llm_facts
    dataset_facts: Mapping[str, int | None] = field(default_factory=dict)
    # a share of every LLM sample (a rehearsal of this profile on a fraction of its facts); None = all of it
    llm_fraction: float | None = None

    def __post_init__(self) -> None:
        if self.backend in BACKENDS and BACKENDS[self.backend].gold is not None:
            raise ValueError(
                f"profile {self.name!r}: the {self.backend} backend answers from the gold and is never "
                "a profile's model (name it with --backend for an analysis run)"
            )

    def dense_model_for(self, taxonomy: str) -> str:
        """The encoder that embeds ``taxonomy``'s concepts (by its name) under this profile."""
        return self.dense_models.get(taxonomy, self.dense_model)

    def fhs_config(self, **more: Any) -> FHSConfig:
        return FHSConfig.fhs(**{**self.fhs_overrides, **more})

    def llm_sample_size(self, dataset: str, n_facts: int | None = None) -> int | None:
        """Facts of ``dataset`` sent to an LLM: its own size if the profile names one, else ``llm_facts``
        (None = every one of its ``n_facts``), times ``llm_fraction`` when that is set."""
        size = self.dataset_facts.get(dataset, self.llm_facts)
        if self.llm_fraction is None:
            return size
        base = size if size is not None else n_facts
        if base is None:
            raise ValueError(f"a fraction of every fact of {dataset} needs its number of facts")
        return max(1, round(self.llm_fraction * base))

    def with_llm_facts(self, n: int | None) -> RunProfile:
        """The same profile with one LLM sample size for every dataset (a chapter's ``llm_limit``)."""
        return replace(self, llm_facts=n, dataset_facts={})


# Prompt budgets for 2 CPU cores: a shorter context and a shorter candidate list
# keep one fact's FHS calls under a minute or two. Every other knob is the paper's.
# The selector runs once per method and fact (ten times a fact in chapter 2), so its
# list is the budget's biggest lever: 10 candidates.
_CPU_BUDGET = {
    "context_chars": 2_000,
    "definition_chars": 160,
    "selector_candidates": 10,
    "max_tokens_hypothesis": 320,
    "max_tokens_verifier": 1_200,
    "max_tokens_selector": 160,
}


def _server_profile(**fields: Any) -> RunProfile:
    """A GPU-box profile: Qwen3-32B behind vLLM's OpenAI-compatible server, three seeded runs, every
    fact for LLM-free runs, the served --max-model-len (book/reproducing.md) as the context when
    the server does not report it."""
    return RunProfile(
        **{
            "backend": "openai",
            "model": "Qwen/Qwen3-32B",
            "retrieval_facts": None,
            "seeds": (0, 1, 2),
            "base_urls": ("http://127.0.0.1:8000/v1",),
            "workers": SERVER_WORKERS,
            "fhs_overrides": {"context_tokens": 32_768},
            **fields,
        }
    )


PROFILES: dict[str, RunProfile] = {
    profile.name: profile
    for profile in (
        RunProfile(
            name="smoke",
            backend="llama_cpp",
            model="smollm2-135m",
            llm_facts=3,
            retrieval_facts=200,
            fhs_overrides={
                **_CPU_BUDGET,
                "context_chars": 600,
                "selector_candidates": 5,
                "max_tokens_hypothesis": 200,
                "max_tokens_verifier": 400,
                "max_tokens_selector": 60,
            },
            description="plumbing checks: SmolLM2-135M on the CPU, a few facts",
        ),
        RunProfile(
            name="cpu",
            backend="llama_cpp",
            model="qwen2.5-0.5b",
            # the ten methods cost minutes of model time a fact on two cores (`fhs bench llm`
            # measures it), so the book affords a sample of two facts per dataset
            llm_facts=2,
            retrieval_facts=None,
            fhs_overrides=_CPU_BUDGET,
            # concept texts cut at 64 word pieces, ICD-10-CM's at 32: embedding its 72,621 codes
            # whole is the book's longest LLM-free step on two cores (book/deviations.md;
            # --dense-model minilm-int8-d64 or minilm-int8)
            dense_model="minilm-int8-d64",
            dense_models={"icd-10-cm": "minilm-int8-d32"},
            description="the default book: Qwen2.5-Coder-0.5B-Instruct on the CPU, "
            "small context-level samples for LLM methods",
        ),
        _server_profile(
            name="paper",
            llm_facts=None,
            # 2,509 (the paper's FinTagging test split) - FinCL's 500 = 2,009 iXBRL facts in whole
            # contexts; the authors' development sample held 661 facts
            dataset_facts={"ixbrl": 2_009, "ixbrl-dev": 661},
            description=(
                "a GPU box, the paper's scale: vLLM serving Qwen3-32B; the financial test data "
                "as every FinCL fact plus a context-level sample of about 2,009 iXBRL test facts "
                "(about 2,509 together, the paper's FinTagging split), every CodiEsp mention, "
                "Table 11's pilot on about 661 iXBRL development facts; three seeded runs"
            ),
        ),
        _server_profile(
            name="gpu-sample",
            # one night on one H100 by `fhs plan --profile gpu-sample` at the published throughput
            # (fhs.plan.totals); the 200-candidate selector prompt, asked for every method, seed and
            # retriever, is most of the tokens, so more facts soon take days
            llm_facts=30,
            description=(
                "a GPU box, one night: vLLM serving Qwen3-32B on context-level samples of about "
                "30 facts per dataset (FinCL, iXBRL test, CodiEsp, the pilot's iXBRL development "
                "facts, ICD-10-PCS); three seeded runs"
            ),
        ),
        _server_profile(
            name="paper-full",
            llm_facts=None,
            description=(
                "a GPU box, every fact: vLLM serving Qwen3-32B on all of FinCL, all 53,523 iXBRL "
                "test facts and every CodiEsp mention, Table 11's pilot on all 129,605 iXBRL "
                "development facts; three seeded runs (weeks on one GPU: plan it first)"
            ),
        ),
    )
}


def get_profile(name: str) -> RunProfile:
    return choose(PROFILES, name, "profile")


def default_profile(backend: str | None) -> str:
    """The profile of a run that names none: a GPU backend gets the paper's settings, else ``cpu``.

    A server run without ``--profile`` means the paper's run (every fact, the
    paper's prompt budgets), not the laptop's two-fact sample; so does an oracle run,
    which costs no model time.
    """
    return "paper" if backend is not None and backend in BACKENDS and BACKENDS[backend].paper_by_default else "cpu"
