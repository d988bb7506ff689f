"""What every method receives, and what every method that uses a model shares.

A method is a function ``(fact, context) -> stage record``: a plain dict
describing what it did for one fact. It must hold ``ranking`` (the final
ordered concept ids, at most K, before the selector) and, when the shared
listwise selector ran, ``selected`` (its top-1). The runner adds the fact's id,
context, modality, gold ids and gold rank. Methods never read ``fact.gold``
except ``oracle``, whose whole point is the gold query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fhs.core.errors import InputError
from fhs.data.domain import Domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.llm.contract import LLM, Request, Response
from fhs.method.config import FHSConfig
from fhs.method.selector import select
from fhs.method.verifier import KnownVerdicts
from fhs.retrieval.kinds import Searcher


@dataclass
class MethodContext:
    """What a method may use: the taxonomy, a retriever, and for LLM methods a model and domain.

    ``config`` holds every FHS knob; ``structured`` derives its own settings
    from it (J 1, greedy, beta 0) so budgets and the selector stay shared.
    """

    taxonomy: Taxonomy
    retriever: Searcher  # bm25, dense or hybrid (fhs.retrieval.kinds)
    llm: LLM | None = None
    domain: Domain | None = None
    config: FHSConfig = field(default_factory=FHSConfig)
    options: dict[str, Any] = field(default_factory=dict)
    # Verdicts already known (the run layer's ledger, fhs.run.ledger): re-scoring variants ask the verifier only
    # about new candidates
    ledger: KnownVerdicts | None = None

    def require_llm(self, method: str) -> tuple[LLM, Domain]:
        if self.llm is None or self.domain is None:
            raise InputError(
                f"method {method!r} needs a language model",
                field="backend",
                fix="pass --backend and --model, or a --profile that names them",
            )
        return self.llm, self.domain

    def require_domain(self, method: str) -> Domain:
        """The domain a prompt is written from: building a request needs it, not a model."""
        if self.domain is None:
            raise InputError(
                f"method {method!r} needs a domain",
                field="domain",
                fix="give the dataset a domain file (a spec's `domain:`)",
            )
        return self.domain


Method = Callable[[Fact, MethodContext], dict]


def call_record(
    request: Request, response: Response, parsed: bool, llm: LLM | None = None, *, cache: LLM | None = None
) -> dict[str, Any]:
    """A call's line in the record; an unparseable answer is also marked in ``llm``'s response cache.

    The stage that parsed the answer is the only one that knows it was unusable,
    so it tells the cache (``mark_unparsed``): the next run asks the model again
    instead of replaying the failure as if it were a good answer. An answer cut
    at ``max_tokens`` counts as unparsed whatever the stage made of it, and is
    recorded as ``truncated`` (``metrics.json`` counts them per stage). With a cached
    model (``llm``, or ``cache`` where a stage does not mark its failures) the line
    carries the answer's cache ``key``.
    """
    parsed = parsed and not response.cut_short
    if not parsed and llm is not None and hasattr(llm, "mark_unparsed"):
        llm.mark_unparsed(request)
    record = {
        "purpose": request.purpose,
        "sample_index": request.sample_index,
        "seed": request.seed,
        "tokens_in": response.tokens_in,
        "tokens_out": response.tokens_out,
        "seconds": response.seconds,
        "cached": response.cached,
        "parsed": parsed,
        "truncated": response.cut_short,
    }
    keyed = cache if cache is not None else llm
    if keyed is not None and hasattr(keyed, "key"):
        # the response cache's key: `fhs archive` packs exactly the answers a run used
        record["key"] = keyed.key(request)
    if request.shortened is not None:  # cut to fit its token budget (fhs/method/prompting.py)
        record["shortened"] = dict(request.shortened)
    return record


def with_selector(fact: Fact, ctx: MethodContext, record: dict) -> dict:
    """Run the shared listwise selector on a method's final list when a model is available."""
    if ctx.llm is None or ctx.domain is None or not ctx.config.selector or not record["ranking"]:
        return record
    selected_ids, selection, calls = select(fact, record["ranking"], ctx.llm, ctx.taxonomy, ctx.domain, ctx.config)
    record["selection"] = selection.to_dict() if selection is not None else None
    record["selected"] = selected_ids[0]
    record["llm_calls"] = record.get("llm_calls", []) + [
        call_record(req, resp, selection is not None, ctx.llm) for req, resp in calls
    ]
    return record
