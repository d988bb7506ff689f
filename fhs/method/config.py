"""Every knob of the FHS method in one frozen object.

Methods and ablations are configurations of the same code path (the paper's
Appendix C lesson), so anything a table varies lives here and nowhere else.
Defaults are the paper's deployed FHS; where the paper and the authors' code
differ, the default follows the paper and the code's choice is a named option:

- ``scoring``: ``"paper"`` = v_j(c) over the dimensions the hypothesis resolved
  and the verifier did not abstain on; ``"code"`` = drop only the dimensions the
  verifier abstained on; ``"strict"`` = abstentions count as non-support
  (denominator = all dimensions), the paper's abstention ablation.
- ``normalize_over``: ``"union"`` = range-normalise over the whole pool U
  (paper, Appendix B.4); ``"kept"`` = over the K kept after truncation (code).
- ``fill``: ``"mean"`` (paper, Eq. 2) or ``"zero"`` (the code's AblationConfig
  default and FHS-Seq's choice).

Named configurations (``NAMED_CONFIGS``, ``FHSConfig.named``, ``fhs run --config``)
bundle the settings of a documented run: ``paper`` is the default;
``codiesp-authors`` is what the authors' CodiEsp runs used (their vendored CodiEsp
pipeline: a plain top-10 window by fused rank, support counted over all six
dimensions with abstentions as non-support, zero fill; see book/deviations.md).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fhs.core.errors import choose
from fhs.data.evidence import ORDERS as PROMPT_ORDERS
from fhs.retrieval.bm25 import RetrievalConfig
from fhs.retrieval.fusion import FUSIONS, NORMALIZE_OVER

RENDERINGS = ("label", "definition")
SCORINGS = ("paper", "code", "strict")
FILLS = ("mean", "zero")
WINDOWS = ("profile", "rank")
# How the selector lists its candidates: "ranked" = numbered in the method's order (Appendix B.5);
# "by-id" = numbered in concept-id order, then the method's order as a list of those numbers, so
# requests about one fact share the candidate block as a cacheable prefix (book/deviations.md).
SELECTOR_LAYOUTS = ("ranked", "by-id")


# One-pass structured grounding (the "structured" baseline): FHS's prompt and renderer with one greedy
# hypothesis and no verifier (J = 1, temperature 0, beta = 0).
STRUCTURED: Mapping[str, Any] = {"num_hypotheses": 1, "temperature": 0.0, "top_p": 1.0, "beta": 0.0}


@dataclass(frozen=True)
class NamedConfig:
    """A documented bundle of FHS settings, applied over a profile's budgets."""

    name: str
    description: str
    settings: Mapping[str, Any]


DEFAULT_CONFIG = "paper"
NAMED_CONFIGS: dict[str, NamedConfig] = {
    named.name: named
    for named in (
        NamedConfig(
            "paper",
            "the paper's deployed FHS (Section 4, Appendix B): profile-diverse window, "
            "support over resolved dimensions, mean fill",
            {},
        ),
        NamedConfig(
            "codiesp-authors",
            "the authors' CodiEsp runs: plain top-10 window by fused rank, "
            "support = supports / all six dimensions, zero fill",
            {"window": "rank", "k_v": 10, "scoring": "strict", "fill": "zero"},
        ),
    )
}


@dataclass(frozen=True)
class FHSConfig:
    """One FHS run's settings (paper defaults; see the module docstring for variants)."""

    # Hypothesis generation (Section 4.1)
    num_hypotheses: int = 2  # J
    # Search with only the hypothesis of this sample index (Table 6's "- ensemble": J = 1 rows)
    only_hypothesis: int | None = None
    temperature: float = 0.8
    top_p: float = 1.0
    json_schema: bool = True  # attach a JSON schema to requests ("decoding is structured")
    # Rendering (Section 4.2)
    renderings: tuple[str, ...] = ("label", "definition")
    label_on_text: bool = False  # text facts get the definition form only
    # Retrieval and fusion (Section 4.3)
    k: int = 200  # list depth of every ranking and of the fused pool
    w_cov: float = 1.0  # label-coverage weight (Eq. 6), passed to the retriever
    kappa: int = 60
    fusion: str = "sum"
    normalize: bool = True
    normalize_over: str = "union"
    # Verifier (Section 4.4)
    beta: float = 0.6  # 0 switches the verifier off (no calls are made)
    k_v: int = 10
    scan: int = 60
    window: str = "profile"
    scoring: str = "paper"
    fill: str = "mean"
    definition_chars: int = 320
    # Shared listwise selector (Appendix B.5)
    selector: bool = True
    # The authors' selector is shown every candidate (up to K); a CPU profile shows fewer.
    selector_candidates: int = 200
    selector_max_ranked: int = 20
    selector_layout: str = "ranked"
    # Token and prompt budgets per stage
    max_tokens_hypothesis: int = 2048
    max_tokens_verifier: int = 2816
    max_tokens_selector: int = 512
    context_chars: int = 12_000
    # Prompt budgets in tokens of the served vocabulary (fhs.llm.tokens), the chat wrapping
    # included: the authors cut the generator's context above 16,000 prompt tokens and the
    # verifier's and selector's above 30,000. A prompt over its budget, or over
    # ``context_tokens`` less the reply's max_tokens, is shortened along its stage's ladder
    # (fhs/method/prompting.py) and its call record says so.
    generator_prompt_tokens: int = 16_000
    verifier_prompt_tokens: int = 30_000
    selector_prompt_tokens: int = 30_000
    # The model's context length: the server's max_model_len, llama.cpp's n_ctx, else the
    # profile's value (set where the model is resolved, fhs/run/inputs.py); None: budgets only.
    context_tokens: int | None = None
    # "shared-first": instructions, source context, the value's fields, then what differs
    # (prefix caching); "evidence-first": the authors' order (book/deviations.md).
    prompt_order: str = "shared-first"
    hypothesis_retries: int = 1
    # Compact answers (book/deviations.md, "Verifier"): the verifier answers one code
    # letter per dimension per candidate and the selector leaves out the echoed id;
    # False restores the verbose JSON (an object with id and six words per candidate).
    compact_outputs: bool = True
    seed: int = 0

    def __post_init__(self) -> None:
        def check(name: str, allowed: tuple[str, ...]) -> None:
            value = getattr(self, name)
            if value not in allowed:
                raise ValueError(f"FHSConfig.{name} must be one of {allowed}, got {value!r}")

        check("fusion", FUSIONS)
        check("scoring", SCORINGS)
        check("fill", FILLS)
        check("window", WINDOWS)
        check("normalize_over", NORMALIZE_OVER)
        check("prompt_order", PROMPT_ORDERS)
        check("selector_layout", SELECTOR_LAYOUTS)
        object.__setattr__(self, "renderings", tuple(self.renderings))
        if not self.renderings or any(r not in RENDERINGS for r in self.renderings):
            raise ValueError(
                f"FHSConfig.renderings must be a non-empty subset of {RENDERINGS}, got {self.renderings!r}"
            )
        for name in (
            "num_hypotheses",
            "k",
            "kappa",
            "k_v",
            "scan",
            "selector_candidates",
            "generator_prompt_tokens",
            "verifier_prompt_tokens",
            "selector_prompt_tokens",
        ):
            if isinstance(getattr(self, name), bool) or not isinstance(getattr(self, name), numbers.Integral):
                raise ValueError(f"FHSConfig.{name} must be a whole number, got {getattr(self, name)!r}")
            if getattr(self, name) < 1:
                raise ValueError(f"FHSConfig.{name} must be at least 1, got {getattr(self, name)!r}")
        if self.only_hypothesis is not None and not 0 <= self.only_hypothesis < self.num_hypotheses:
            raise ValueError(
                f"FHSConfig.only_hypothesis must be a sample index below num_hypotheses "
                f"({self.num_hypotheses}), got {self.only_hypothesis!r}"
            )
        if self.context_tokens is not None and self.context_tokens < 1:
            raise ValueError(f"FHSConfig.context_tokens must be at least 1 or None, got {self.context_tokens!r}")
        if isinstance(self.beta, bool) or not isinstance(self.beta, numbers.Real) or not math.isfinite(self.beta):
            raise ValueError(f"FHSConfig.beta must be a finite number, got {self.beta!r}")
        if self.beta < 0:
            raise ValueError(f"FHSConfig.beta must be >= 0, got {self.beta!r}")

    # ---- named configurations -------------------------------------------------
    @classmethod
    def fhs(cls, **overrides: Any) -> FHSConfig:
        """The deployed method: J=2 sampled hypotheses, dual rendering, verifier, selector."""
        return cls(**overrides)

    @classmethod
    def structured(cls, **overrides: Any) -> FHSConfig:
        """One-pass structured grounding over the defaults (:data:`STRUCTURED`), then ``overrides``."""
        return cls(**{**STRUCTURED, **overrides})

    def as_structured(self) -> FHSConfig:
        """This configuration as one-pass structured grounding (its budgets kept; :data:`STRUCTURED`)."""
        return self.replace(**STRUCTURED)

    @classmethod
    def named(cls, name: str, **overrides: Any) -> FHSConfig:
        """A named configuration from ``NAMED_CONFIGS`` over the defaults, then ``overrides``."""
        return cls().with_named(name).replace(**overrides)

    def with_named(self, name: str) -> FHSConfig:
        """This configuration with a named configuration's settings on top (budgets are kept)."""
        return self.replace(**choose(NAMED_CONFIGS, name, "FHS configuration").settings)

    # ---- conversions ----------------------------------------------------------
    @property
    def verify(self) -> bool:
        """The verifier runs only when its weight can change the order."""
        return self.beta > 0

    def replace(self, **changes: Any) -> FHSConfig:
        return dataclasses.replace(self, **changes)

    def retrieval_config(self, base: RetrievalConfig | None = None) -> RetrievalConfig:
        """The retriever settings this run implies (list depth K and w_cov)."""
        return dataclasses.replace(base or RetrievalConfig(), top_k=self.k, w_cov=self.w_cov)

    def to_dict(self) -> dict[str, Any]:
        record = dataclasses.asdict(self)
        record["renderings"] = list(self.renderings)
        return record

    @classmethod
    def from_dict(cls, record: Mapping[str, Any]) -> FHSConfig:
        """Build from a plain mapping (e.g. a papermill parameter); unknown keys are an error."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(record) - names)
        if unknown:
            raise ValueError(f"unknown FHSConfig field(s) {unknown}; known: {sorted(names)}")
        values = dict(record)
        if "renderings" in values:
            values["renderings"] = tuple(values["renderings"])
        return cls(**values)
