"""Methods by name: the one list the command line, the runner and error messages read.

Each method is a function ``(fact, context) -> stage record`` (see
:mod:`fhs.method.context`), one module each. ``structured`` and ``fhs`` are two
configurations of one pipeline (``fhs.method.fhs.run_fhs_fact``), so they
cannot drift apart. A new method is one module and one line in ``METHODS`` (it asks a model
unless it is listed in ``MODEL_FREE``).
"""

from __future__ import annotations

from fhs.core.errors import choose
from fhs.method.context import Method
from fhs.method.decomposed import decomposed
from fhs.method.direct import direct, direct_located
from fhs.method.feedback_refine import feedback_refine
from fhs.method.fhs import fhs
from fhs.method.fhs_seq import fhs_seq
from fhs.method.free_text import free_text
from fhs.method.gold_query import oracle
from fhs.method.parallel import parallel, parallel_instructed
from fhs.method.parallel_diverse import parallel_diverse
from fhs.method.parallel_verified import parallel_verified
from fhs.method.self_refine import self_refine
from fhs.method.structured import structured

METHODS: dict[str, Method] = {
    "direct": direct,
    "direct-located": direct_located,  # an addition: headers or sentence, not the whole context (deviations.md)
    "oracle": oracle,
    "free-text": free_text,
    "structured": structured,
    "parallel": parallel,
    "parallel-instructed": parallel_instructed,  # the authors' CodiEsp wording of parallel sampling
    "parallel-diverse": parallel_diverse,
    "parallel-verified": parallel_verified,  # Table 6: the free-text ensemble + FHS's verifier
    "decomposed": decomposed,
    "self-refine": self_refine,
    "feedback-refine": feedback_refine,
    "fhs": fhs,
    "fhs-seq": fhs_seq,
}

# The methods that ask no model of their own (direct asks one only for the shared selector);
# every other registered method cannot run without one.
MODEL_FREE = frozenset({"direct", "direct-located", "oracle"})
LLM_METHODS = frozenset(METHODS) - MODEL_FREE


def get_method(name: str) -> Method:
    return choose(METHODS, name, "method")
