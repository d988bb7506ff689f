"""Parallel sampling with forced diversity (the paper's "parallel diversity" row, Appendix C.1).

J sequential calls; call j is shown the readings of calls 1..j-1 and asked for
a substantively different but plausible one. Each reply holds a grounding
sentence (the reading, shown to later calls, not retrieved), a label-style and
a definition-style query. Both queries are retrieved and fused per hypothesis
with summed RRF, then the J per-hypothesis lists are fused the same way.
An unreadable reply contributes the direct query once, and its reading is
left out of what later calls are shown.
"""

from __future__ import annotations

from collections.abc import Sequence

from fhs.data.domain import Domain
from fhs.data.facts import Fact
from fhs.llm.contract import Request
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext, with_selector
from fhs.method.rewrite import Calls, final_record, fuse_rankings, rewrite_request, search_query

PURPOSE = "parallel-diverse"
FIELDS = ("grounding", "label_query", "definition_query")
NO_READINGS = "(none yet)"


def diverse_request(fact: Fact, domain: Domain, config: FHSConfig, earlier: Sequence[str], j: int) -> Request:
    """Call j: the evidence and the earlier readings, numbered; sampled like FHS's hypotheses."""
    shown = "\n".join(f"{i}. {text}" for i, text in enumerate(earlier, start=1)) or NO_READINGS
    return rewrite_request(
        "diverse",
        fact,
        domain,
        config,
        purpose=PURPOSE,
        fields=FIELDS,
        temperature=config.temperature,
        sample_index=j,
        earlier=shown,
    )


def parallel_diverse(fact: Fact, ctx: MethodContext) -> dict:
    """J sequential readings, each different from the earlier ones; two queries each (J calls + selector)."""
    llm, domain = ctx.require_llm("parallel-diverse")
    calls = Calls()
    hypotheses: list[dict] = []
    earlier: list[str] = []
    fused = []
    for j in range(ctx.config.num_hypotheses):
        shown = list(earlier)
        (values,) = calls.ask(llm, [diverse_request(fact, domain, ctx.config, shown, j)], FIELDS)
        if values is not None and not (values["label_query"] or values["definition_query"]):
            values = None  # a reply with nothing to search with counts as unreadable
            calls.parse_failures += 1
            calls.records[-1]["parsed"] = False
        if values is None:
            queries = [search_query(fact, "", ctx.retriever)]
        else:
            queries = [
                search_query(fact, values[name], ctx.retriever)
                for name in ("label_query", "definition_query")
                if values[name]
            ]
            earlier.append(values["grounding"] or values["definition_query"] or values["label_query"])
        pool = fuse_rankings([q.ranking for q in queries], ctx.config)
        fused.append(pool.as_ranking())
        hypotheses.append(
            {
                "sample": j,
                "shown_readings": shown,
                **(values or {}),
                "source": "model" if values else "fallback",
                "queries": [q.to_dict() for q in queries],
                "fused": list(pool.ids),
            }
        )
    pool = fuse_rankings(fused, ctx.config)
    return with_selector(fact, ctx, final_record(pool, calls, rounds=hypotheses))
