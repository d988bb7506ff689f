"""The FHS knobs the command line exposes, each a named setting of ``FHSConfig``.

``fhs run --beta --j --fusion --normalize --render --window --selector-layout`` read their
choices from these tables, so the help text, the validation and the config
can never disagree. Every knob is a configuration of the one FHS code path
(``fhs.method.fhs.run_fhs_fact``): changing one re-scores cached hypotheses
and verdicts rather than calling the model again (see ``fhs.run.ledger``).
"""

from __future__ import annotations

from typing import Any

from fhs.core.errors import choose
from fhs.method.config import RENDERINGS, SELECTOR_LAYOUTS, WINDOWS, FHSConfig
from fhs.retrieval.fusion import FUSIONS

# --render: which query forms each hypothesis issues (Section 4.2; Table 6's "- label form" rows)
RENDER: dict[str, tuple[str, ...]] = {"both": RENDERINGS, "label": ("label",), "definition": ("definition",)}
# --normalize: range normalization of the fused scores (Appendix B.4), or the raw RRF sums
NORMALISE: dict[str, bool] = {"range": True, "raw": False}
# --fusion: summed RRF (Eq. 4) or its mean over the rankings that hold a candidate
FUSION: dict[str, str] = {name: name for name in FUSIONS}
# --window: profile-diverse window (Section 4.4) or the plain top K_v
WINDOW: dict[str, str] = {name: name for name in WINDOWS}
# --selector-layout: candidates in the method's order (paper) or by concept id with the order as numbers
SELECTOR_LAYOUT: dict[str, str] = {name: name for name in SELECTOR_LAYOUTS}

KNOBS: dict[str, dict[str, Any]] = {
    "fusion": FUSION,
    "normalise": NORMALISE,
    "render": RENDER,
    "window": WINDOW,
    "selector-layout": SELECTOR_LAYOUT,
}


def knob_overrides(
    *,
    beta: float | None = None,
    j: int | None = None,
    fusion: str | None = None,
    normalise: str | None = None,
    render: str | None = None,
    window: str | None = None,
    selector_layout: str | None = None,
) -> dict[str, Any]:
    """The ``FHSConfig`` fields a set of knob values sets (None leaves a field at its default)."""
    changes: dict[str, Any] = {}
    if beta is not None:
        changes["beta"] = float(beta)
    if j is not None:
        changes["num_hypotheses"] = int(j)
    if fusion is not None:
        changes["fusion"] = choose(FUSION, fusion, "fusion")
    if normalise is not None:
        changes["normalize"] = choose(NORMALISE, normalise, "normalise")
    if render is not None:
        changes["renderings"] = choose(RENDER, render, "render")
    if window is not None:
        changes["window"] = choose(WINDOW, window, "window")
    if selector_layout is not None:
        changes["selector_layout"] = choose(SELECTOR_LAYOUT, selector_layout, "selector layout")
    return changes


def describe(config: FHSConfig) -> dict[str, Any]:
    """A config's knob values under their command-line names (for tables and run folders)."""
    render = next((name for name, forms in RENDER.items() if set(forms) == set(config.renderings)), "custom")
    return {
        "beta": config.beta,
        "j": config.num_hypotheses,
        "fusion": config.fusion,
        "normalise": "range" if config.normalize else "raw",
        "render": render,
        "window": config.window,
    }
