"""Values over seeded runs as a page shows them: the mean, ± the std across runs, or one run's interval.

The paper reports the mean of three runs ± std. With one run a page shows that
run's 95% context-clustered interval instead; these two helpers are the one
place that rule is written.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fhs.book.report import Estimate


def across(values: Sequence[float]) -> Estimate:
    """One value per seeded run: the mean, ± the std when there are several."""
    return Estimate(float(np.mean(values)), std=float(np.std(values, ddof=1)) if len(values) > 1 else None)


def across_reported(values: Sequence[float | None]) -> Estimate | None:
    """:func:`across`, or None where a run reports no value (a metric some runs lack)."""
    present = [v for v in values if v is not None]
    return across(present) if len(present) == len(values) else None


def across_differences(differences: Sequence) -> Estimate:
    """Paired differences, one per seeded run: one run's interval, or the mean ± std of several."""
    if len(differences) == 1:
        return Estimate(differences[0].estimate, differences[0].low, differences[0].high)
    return across([d.estimate for d in differences])
