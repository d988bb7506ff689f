"""The refinement loop shared by intrinsic self-refinement and retrieval-feedback refinement.

Four rounds (Appendix C.1, the authors' RETRIEVAL_ROUNDS = 4). Round 1 is the
one-pass free-text call, sent as exactly the request ``free-text`` sends, so a
shared response cache answers it without the model. Each later round shows the
model its previous reading (and, for feedback refinement, what that reading
retrieved) and asks for a better query; every round's query is retrieved and
the rounds' lists are fused with summed RRF. All calls are greedy.

An unreadable reply, or one with an empty query, issues the direct query for
that round (the documented fallback); the next round is then shown the last
reading the model did write. Under greedy decoding a self-refinement round
after a failed one is then the same request as the failed one, so the cache
repeats its answer rather than asking again: the same prompt would get the same reply.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fhs.data.facts import Fact
from fhs.llm.contract import Request
from fhs.method.context import MethodContext, with_selector
from fhs.method.free_text import free_text_request
from fhs.method.rewrite import Calls, Query, final_record, fuse_rankings, reading, search_query

ROUNDS = 4
NO_READING = "(no usable reading yet: the search used the raw evidence)"

# (fact, ctx, previous reading, previous round's query) -> the round's request, and what
# else the round was shown (kept in its record)
NextRequest = Callable[[Fact, MethodContext, str, Query], tuple[Request, dict[str, Any]]]


def refine(
    fact: Fact, ctx: MethodContext, *, method: str, next_request: NextRequest, note: str, rounds: int = ROUNDS
) -> dict:
    """Run the rounds; ``note`` names the field beside ``query`` (``critique`` or ``assessment``)."""
    llm, domain = ctx.require_llm(method)
    calls = Calls()
    fields = (note, "query")
    records: list[dict[str, Any]] = []
    rankings = []
    previous, last = NO_READING, None
    shown: dict[str, Any]
    for k in range(1, rounds + 1):
        if last is None:  # the first round
            request, shown = free_text_request(fact, domain, ctx.config, purpose=method), {}
            (values,) = calls.ask(llm, [request], ("query",), required="query")
        else:
            request, shown = next_request(fact, ctx, previous, last)
            shown = {"shown_reading": previous, **shown, note: ""}
            (values,) = calls.ask(llm, [request], fields, required="query")
            shown[note] = reading(values, note)
        query = search_query(fact, reading(values), ctx.retriever)
        entry = {"round": k, **shown, "reading": reading(values), **query.to_dict()}
        records.append(entry)
        rankings.append(query.ranking)
        if reading(values):
            previous = reading(values)
        last = query
    pool = fuse_rankings(rankings, ctx.config)
    return with_selector(fact, ctx, final_record(pool, calls, rounds=records))
