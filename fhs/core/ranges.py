"""The rules a numeric setting obeys, wherever it comes from: a command-line flag or a spec file.

Each rule returns why a value breaks it, or None; the command line words the answer as
``--flag ...``, a spec file as its path and field, so one rule never drifts from the other.
"""

from __future__ import annotations

import math
import numbers


def weight_problem(value: object) -> str | None:
    """A weight or scale: a finite number >= 0 (``nan`` and ``inf`` would poison every score)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return "expected a number"
    if not math.isfinite(value) or value < 0:
        return "must be a finite number >= 0"
    return None


def share_problem(value: object) -> str | None:
    """A share of a whole: a finite number from 0 to 1."""
    return weight_problem(value) or (None if value <= 1 else "must be a number from 0 to 1")  # type: ignore[operator]


def count_problem(value: object, minimum: int = 1) -> str | None:
    """A count: a whole number of at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return "expected a whole number"
    return None if int(value) >= minimum else f"must be at least {minimum}"


def switch_problem(value: object) -> str | None:
    """An on/off setting: true or false, not a number or a word that looks like one."""
    return None if isinstance(value, bool) else "expected true or false"
