"""One-pass structured grounding: the FHS path with one greedy hypothesis and no verifier.

It runs through :func:`fhs.method.fhs.run_method` with a derived
configuration, so the structured baseline and FHS cannot drift apart.
"""

from __future__ import annotations

import dataclasses

from fhs.data.facts import Fact
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.method.fhs import run_method


def structured_config(config: FHSConfig) -> FHSConfig:
    """One-pass structured grounding: the FHS path with J 1, greedy decoding and no verifier."""
    return dataclasses.replace(config, num_hypotheses=1, temperature=0.0, top_p=1.0, beta=0.0)


def structured(fact: Fact, ctx: MethodContext) -> dict:
    """One structured hypothesis, dual-rendered, retrieved and fused (1 LLM call + selector)."""
    return run_method(fact, ctx, structured_config(ctx.config), "structured")
