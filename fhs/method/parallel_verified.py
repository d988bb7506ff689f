"""The free-text ensemble with FHS's verifier: Table 6's "same + verifier" row (Section 5.3).

The paper restores "the same verifier" to the free-text ensemble of
``parallel`` (J = 2 plain samples at T = 0.8, RRF-fused) to separate
factorization from verification: R@1 0.116 without the verifier, 0.148 with
it, against 0.124 and 0.185 for factorized hypotheses. So this method is
``parallel``'s sampling and fusion followed by FHS's own ``verify_pool``
(window, one call per sample, v_j, fill, v̄, Eq. 3) and the shared selector.

What the verifier reads. A free-text sample resolves no named dimension, so
it cannot be shown as a partial assignment: marked all UNRESOLVED, the
verifier is told to abstain on every dimension and the paper's scoring would
count nothing, which would make this row equal to the one without the
verifier by construction, against the paper's +0.032 R@1. Section 4.4 defines
v_j(c) as "the fraction of non-abstaining verdicts that support c", so the
description itself is the interpretation: the verifier sees it in place of the
dimension lines (``verifier.interpretation_lines``) and judges each candidate
on every dimension against it, and every verdict it does not abstain on counts
(the reading claims every dimension; ``description_reading``). The verifier's
abstention is the only exclusion, as for a hypothesis that resolved all six.

Calls per fact: the J free-text requests, byte for byte ``parallel``'s (so a
shared response cache replays that run), one verifier call per readable sample
(fewer when the verdict ledger already holds its window's verdicts under the
same description), and the selector when on. An unreadable sample searches the
direct query, as in ``parallel``, and has no reading to verify.
"""

from __future__ import annotations

from collections.abc import Sequence

from fhs.data.facts import Fact
from fhs.method.context import MethodContext, with_selector
from fhs.method.fhs import pool_of, verify_pool
from fhs.method.hypotheses import Hypothesis
from fhs.method.parallel import FIELDS, parallel_requests
from fhs.method.rewrite import Calls, reading, search_query
from fhs.method.verifier import DESCRIPTION_SOURCE

METHOD = "parallel-verified"


def description_reading(description: str, dimensions: Sequence[str], sample_index: int = 0) -> Hypothesis:
    """A free-text sample as the verifier reads it: the description, claimed on every dimension.

    Every dimension carries the description, so the paper's scoring counts every
    verdict the verifier did not abstain on, and the verdict ledger keys each
    description apart (its key is a hash of the dimension values).
    """
    text = " ".join(description.split())
    return Hypothesis(
        dimensions=tuple((name, text) for name in dimensions),
        retrieval_query=text,
        operators=(),
        source=DESCRIPTION_SOURCE,
        sample_index=sample_index,
    )


def parallel_verified(fact: Fact, ctx: MethodContext) -> dict:
    """J free-text samples fused by RRF, then FHS's verifier and Eq. 3 (J + up to J calls + selector)."""
    llm, domain = ctx.require_llm(METHOD)
    config = ctx.config
    calls = Calls()
    replies = calls.ask(llm, parallel_requests(fact, domain, config), FIELDS, required="query")
    rounds, rankings, readings = [], [], []
    for j, values in enumerate(replies):
        query = search_query(fact, reading(values), ctx.retriever)
        rounds.append({"sample": j, "reading": reading(values), **query.to_dict()})
        rankings.append(query.ranking)
        if values is not None:
            readings.append(description_reading(reading(values), domain.dimension_names, j))
    pool = pool_of(rankings, config)
    verifier_record, verifier_calls = None, []
    final = pool.as_ranking()
    if config.verify and readings and len(pool):
        verified = verify_pool(fact, readings, pool, llm, ctx.taxonomy, domain, config, ctx.ledger)
        verifier_record, verifier_calls, final = verified["record"], verified["calls"], verified["ranking"]
    record = {
        "rounds": rounds,
        "wording": "plain",
        "hypotheses": [r.to_dict() for r in readings],  # what the verifier read (rescore reads them)
        "pool": pool.to_dict(),
        "verifier": verifier_record,
        "ranking": list(final.ids),
        "final_scores": list(final.scores),
        "llm_calls": calls.records + verifier_calls,
        "parse_failures": calls.parse_failures,
    }
    return with_selector(fact, ctx, record)
