"""One-pass structured grounding: the FHS path with one greedy hypothesis and no verifier.

It runs through :func:`fhs.method.fhs.fhs_as_method` with the run's configuration
made structured (``FHSConfig.as_structured``, the settings ``STRUCTURED``), so
the structured baseline and FHS cannot drift apart.
"""

from __future__ import annotations

from fhs.data.facts import Fact
from fhs.method.context import MethodContext
from fhs.method.fhs import fhs_as_method


def structured(fact: Fact, ctx: MethodContext) -> dict:
    """One structured hypothesis, dual-rendered, retrieved and fused (1 LLM call + selector)."""
    return fhs_as_method(fact, ctx, ctx.config.as_structured(), "structured")
