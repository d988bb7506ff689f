"""Methods by name: the one list the command line, the runner and error messages read.

Each method is a function ``(fact, context) -> stage record`` (see
:mod:`fhs.method.context`), one module each. ``structured`` and ``fhs`` are two
configurations of one pipeline (``fhs.method.fhs.run_fhs_fact``), so they
cannot drift apart. A new method is one module and one line in ``METHODS``.
"""

from __future__ import annotations

from fhs.core.errors import choose
from fhs.method.context import Method
from fhs.method.direct import direct
from fhs.method.fhs import fhs
from fhs.method.oracle import oracle
from fhs.method.structured import structured


METHODS: dict[str, Method] = {
    "direct": direct,
    "oracle": oracle,
    "structured": structured,
    "fhs": fhs,
}

# Methods that cannot run without a model (direct only uses one for the selector).
LLM_METHODS = frozenset({"structured", "fhs"})


def get_method(name: str) -> Method:
    return choose(METHODS, name, "method")
