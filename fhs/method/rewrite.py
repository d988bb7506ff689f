"""The shared parts of the query-rewriting baselines (the paper's Section 5 and Appendix C.1).

Every baseline in ``free_text``, ``parallel``, ``parallel_diverse``,
``decomposed``, ``self_refine`` and ``feedback_refine`` is the same loop: ask
the model for a JSON object of short text fields, prefix each query with the
fact's ``<value> <datatype>`` (the direct query when a field is empty or the
reply unreadable), retrieve it to depth K, fuse the lists with summed RRF
(Eq. 4, kappa 60) and hand the fused order to the shared selector. This module
holds those steps once; the method modules only say which prompts to send.

Prompts state the fixed instructions first, then the evidence (the source
context before the value's own fields), then what differs between rounds, so
that calls share the longest prefix a server's KV cache can reuse
(``fhs/method/prompting.py``); they take the taxonomy's name, the kind of
evidence and the query wording from the domain file, so they work for any taxonomy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from fhs.data.domain import Domain
from fhs.data.evidence import direct_query, evidence_block, prefixed
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.llm.contract import LLM, Message, Request, Response
from fhs.llm.jsonout import parse_object
from fhs.method.config import FHSConfig
from fhs.method.context import call_record
from fhs.method.prompting import Budget, context_ladder, fit_to_budget, last_resort, render
from fhs.method.verifier import candidate_line, concept_or_stub
from fhs.retrieval.bm25 import Ranking
from fhs.retrieval.fusion import FusedPool, fuse

CONTEXT_LADDER = (12_000, 8_000, 5_000, 2_500)
FEEDBACK_CANDIDATES = 10  # candidates a feedback round is shown (Appendix C.1)


def domain_fields(domain: Domain) -> dict[str, str]:
    """The domain wording every rewriting prompt uses."""
    return {"evidence_kind": domain.evidence, "taxonomy": domain.taxonomy, "query_guidance": domain.query_guidance}


def text_schema(required: Sequence[str], optional: Sequence[str] = ()) -> dict[str, Any]:
    """A JSON object of string fields, for backends that constrain decoding to a schema."""
    names = [*required, *optional]
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "required": list(names),
        "additionalProperties": False,
    }


def rewrite_request(
    template: str,
    fact: Fact,
    domain: Domain,
    config: FHSConfig,
    *,
    purpose: str,
    fields: Sequence[str],
    temperature: float = 0.0,
    sample_index: int = 0,
    **values: str,
) -> Request:
    """One rewriting call: ``template`` filled with the domain wording, the evidence and ``values``.

    The context shrinks along the ladder (then the fields, last resort) until the
    prompt fits the generator's token budget. Greedy unless ``temperature`` says
    otherwise; ``sample_index`` tells sampled requests with the same prompt apart
    (and seeds them differently).
    """
    order = config.prompt_order
    ladder = context_ladder(config.context_chars, CONTEXT_LADDER) + last_resort(config.context_chars, labels=False)
    system = Message("system", render("rewrite_system", order=order))
    fitted = fit_to_budget(
        lambda context_chars, field_chars=None: (
            system,
            Message(
                "user",
                render(
                    template,
                    order=order,
                    evidence=evidence_block(fact, context_chars, field_chars, order),
                    **domain_fields(domain),
                    **values,
                ),
            ),
        ),
        ladder,
        Budget(config.generator_prompt_tokens, config.max_tokens_hypothesis, config.context_tokens),
        what=f"fact {fact.id}: the {purpose} prompt",
    )
    return Request(
        messages=fitted.messages,
        temperature=temperature,
        top_p=1.0 if temperature == 0 else config.top_p,
        max_tokens=config.max_tokens_hypothesis,
        seed=config.seed,
        sample_index=sample_index,
        schema=text_schema(fields) if config.json_schema else None,
        purpose=purpose,
        shortened=fitted.shortened,
    )


def parse_fields(text: str, fields: Sequence[str]) -> dict[str, str] | None:
    """The reply's string fields (whitespace collapsed, missing ones empty); None unless it is a JSON object.

    A list value is joined with spaces and a number written out, so a small
    model's near-misses still count as an answer.
    """
    payload = parse_object(text)
    if not isinstance(payload, dict):
        return None
    lowered = {str(k).strip().lower(): v for k, v in payload.items()}
    result = {}
    for name in fields:
        value = lowered.get(name.lower())
        if isinstance(value, list):
            value = " ".join(str(v) for v in value if v is not None)
        result[name] = " ".join(str(value).split()) if isinstance(value, (str, int, float)) else ""
    return result


@dataclass
class Query:
    """One issued query: where it came from, its full text, and what it retrieved."""

    text: str
    source: str  # "model" or "fallback" (the direct query)
    ranking: Ranking

    def to_dict(self) -> dict[str, Any]:
        return {"query": self.text, "source": self.source, "ranking": list(self.ranking.ids)}


def search_query(fact: Fact, body: str, retriever: Any) -> Query:
    """Prefix ``body`` and retrieve it; an empty body issues the direct query instead."""
    body = " ".join((body or "").split())
    text = prefixed(fact, body) if body else direct_query(fact)
    return Query(text, "model" if body else "fallback", retriever.search(text, fact.datatype))


def fuse_rankings(rankings: Sequence[Ranking], config: FHSConfig) -> FusedPool:
    """Summed RRF over the rankings, truncated to K (the baselines' fusion, Appendix C.1)."""
    return fuse(
        rankings, kappa=config.kappa, k=config.k, method="sum", normalize=True, normalize_over=config.normalize_over
    )


@dataclass
class Calls:
    """The calls a method made for one fact, recorded like every method's, and its parse failures."""

    records: list[dict[str, Any]] = field(default_factory=list)
    parse_failures: int = 0

    def ask(
        self, llm: LLM, requests: Sequence[Request], fields: Sequence[str], required: str | None = None
    ) -> list[dict[str, str] | None]:
        """Send one batch; each reply parsed into ``fields`` (None when unreadable or ``required`` is empty)."""
        responses: list[Response] = llm.complete(list(requests)) if requests else []
        parsed = []
        for request, response in zip(requests, responses):
            values = None if response.cut_short else parse_fields(response.text, fields)
            if values is not None and required is not None and not values.get(required):
                values = None
            self.records.append(call_record(request, response, values is not None, cache=llm))
            self.parse_failures += values is None
            parsed.append(values)
        return parsed


def final_record(pool: FusedPool, calls: Calls, **parts: Any) -> dict[str, Any]:
    """The stage record every rewriting baseline returns (before the selector)."""
    return {
        **parts,
        "pool": pool.to_dict(),
        "ranking": list(pool.ids),
        "llm_calls": calls.records,
        "parse_failures": calls.parse_failures,
    }


def feedback_candidates(
    fact: Fact, ids: Iterable[str], taxonomy: Taxonomy | None, n: int = FEEDBACK_CANDIDATES
) -> list[str]:
    """The first ``n`` of a ranking, candidates of the fact's datatype first (each group in rank order)."""
    ids = list(ids)

    def compatible(cid: str) -> bool:
        return not fact.datatype or concept_or_stub(taxonomy, cid).datatype in ("", fact.datatype)

    return ([cid for cid in ids if compatible(cid)] + [cid for cid in ids if not compatible(cid)])[:n]


def candidate_lines(ids: Sequence[str], taxonomy: Taxonomy | None, definition_chars: int) -> str:
    return "\n".join(
        candidate_line(i, concept_or_stub(taxonomy, cid), definition_chars) for i, cid in enumerate(ids, start=1)
    )


def reading(values: Mapping[str, str] | None, name: str = "query") -> str:
    return (values or {}).get(name, "")
