"""Factorized hypotheses: generate them, parse them, and render them into queries.

A hypothesis is a partial assignment over the domain's named dimensions
(Section 4.1): a dimension the evidence does not support stays the literal
``UNRESOLVED`` rather than a guess. Each hypothesis renders into up to two
queries (Section 4.2): the definition form the generator wrote itself
(``retrieval_query``) and a label form built by rule from the resolved values.
Every query starts with the fact's own identifier ``<value> <datatype>``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fhs.core.text import join_tokens
from fhs.data.domain import Domain
from fhs.data.evidence import direct_query, evidence_block, prefixed
from fhs.data.facts import Fact
from fhs.llm.contract import LLM, Request, Response
from fhs.llm.jsonout import parse_object
from fhs.method.config import FHSConfig
from fhs.method.prompting import (
    DEFAULT_ORDER,
    Budget,
    Fitted,
    context_ladder,
    fact_messages,
    fit_to_budget,
    last_resort,
    render,
)

UNRESOLVED = "UNRESOLVED"
DEFAULT_DIMENSIONS = ("FAMILY", "ROLE", "EVENT", "QUALIFIER", "SCOPE", "TEMPORAL")
DEFAULT_OPERATORS = (
    "direct_label",
    "row_column",
    "relative_time",
    "roll_forward",
    "dimensional",
    "aggregation",
    "rate",
    "schedule",
)
PURPOSE = "hypothesis"
CONTEXT_LADDER = (12_000, 8_000, 5_000, 2_500)


def is_unresolved(value: str) -> bool:
    """Only the literal sentinel (any case) or nothing at all counts as unresolved.

    Phrases like "not applicable" stay resolved: ICD laterality uses them as values.
    """
    return not value.strip() or value.strip().upper() == UNRESOLVED


@dataclass(frozen=True)
class Hypothesis:
    """One factorized hypothesis.

    ``dimensions`` holds every dimension in the domain's canonical order as
    ``(name, value)``; unresolved ones have the value ``UNRESOLVED``.
    ``source`` is ``"model"`` or ``"fallback"`` (built when no sample parsed).
    """

    dimensions: tuple[tuple[str, str], ...]
    retrieval_query: str
    operators: tuple[str, ...] = ("direct_label",)
    source: str = "model"
    sample_index: int = 0

    def value(self, name: str) -> str:
        for dim, value in self.dimensions:
            if dim == name:
                return value
        return UNRESOLVED

    def is_resolved(self, name: str) -> bool:
        return not is_unresolved(self.value(name))

    @property
    def resolved(self) -> tuple[str, ...]:
        """Names of the resolved dimensions, in canonical order."""
        return tuple(name for name, value in self.dimensions if not is_unresolved(value))

    def to_dict(self) -> dict[str, Any]:
        return {
            "dimensions": dict(self.dimensions),
            "operators": list(self.operators),
            "retrieval_query": self.retrieval_query,
            "source": self.source,
            "sample_index": self.sample_index,
        }


@dataclass(frozen=True)
class RenderedQuery:
    """One issued query: which hypothesis and rendering it came from, and its full text."""

    hypothesis_index: int
    rendering: str  # "definition" | "label" | "direct"
    text: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ---- parsing ------------------------------------------------------------------


def parse_hypothesis(
    text: str,
    dimensions: Sequence[str] = DEFAULT_DIMENSIONS,
    operators: Sequence[str] = DEFAULT_OPERATORS,
) -> Hypothesis | None:
    """Read a generator reply; None unless it is a JSON object with a non-empty retrieval_query.

    Tolerant where the model's form varies: a missing dimension becomes
    UNRESOLVED, lower-case keys are accepted, a list value is joined with
    ", ", unknown operators are dropped (none left -> ["direct_label"]), and
    the dimensions may sit at the top level instead of under "dimensions".
    """
    payload = parse_object(text)
    if not isinstance(payload, dict):
        return None
    query = payload.get("retrieval_query")
    if isinstance(query, list):
        query = " ".join(str(q) for q in query)
    if not isinstance(query, str) or not query.strip():
        return None
    block = payload.get("dimensions")
    source = block if isinstance(block, dict) else payload
    by_upper = {str(key).strip().upper(): value for key, value in source.items()}
    values = tuple((name, _value_text(by_upper.get(name.upper()))) for name in dimensions)
    raw_ops = payload.get("operators", [])
    if isinstance(raw_ops, str):
        raw_ops = [raw_ops]
    if not isinstance(raw_ops, list):
        raw_ops = []
    named = (str(op).strip().lower() for op in raw_ops if isinstance(op, str))
    chosen = tuple(dict.fromkeys(op for op in named if op in set(operators)))
    return Hypothesis(
        dimensions=values,
        retrieval_query=" ".join(query.split()),
        operators=chosen or ("direct_label",),
    )


def _value_text(value: Any) -> str:
    if value is None:
        return UNRESOLVED
    if isinstance(value, list):
        value = ", ".join(str(v).strip() for v in value if v is not None and str(v).strip())
    text = " ".join(str(value).split())
    return UNRESOLVED if is_unresolved(text) else text


def fallback_hypothesis(fact: Fact, dimensions: Sequence[str] = DEFAULT_DIMENSIONS) -> Hypothesis:
    """What FHS searches with when no sample parsed: nothing resolved, the raw fact as the query."""
    return Hypothesis(
        dimensions=tuple((name, UNRESOLVED) for name in dimensions),
        retrieval_query=direct_query(fact),
        source="fallback",
    )


# ---- rendering ----------------------------------------------------------------


def render_label(hypothesis: Hypothesis) -> str:
    """The label-style query body: resolved values in canonical order, tokenized like index labels.

    Empty when nothing is resolved, in which case no label query is issued.
    """
    return join_tokens(value for _, value in hypothesis.dimensions if not is_unresolved(value))


def render_definition(hypothesis: Hypothesis) -> str:
    """The definition-style query body: the generator's retrieval_query, else the resolved values."""
    query = " ".join(hypothesis.retrieval_query.split())
    if query:
        return query
    return " ".join(value for _, value in hypothesis.dimensions if not is_unresolved(value))


def queries_for(
    fact: Fact, hypothesis: Hypothesis, config: FHSConfig, hypothesis_index: int = 0
) -> list[RenderedQuery]:
    """The queries one hypothesis issues, with the prefix and modality rules applied.

    Tables: definition form, then label form if it is non-empty. Text: the
    definition form only (unless ``config.label_on_text``). Only renderings
    listed in ``config.renderings`` are issued. If that leaves nothing (e.g. a
    label-only ablation on a hypothesis that resolved nothing), the direct
    serialization is issued so that every hypothesis contributes one ranking.
    """
    allowed = set(config.renderings)
    if fact.modality == "text" and not config.label_on_text and "definition" in allowed:
        allowed.discard("label")
    queries: list[RenderedQuery] = []
    if "definition" in allowed:
        queries.append(RenderedQuery(hypothesis_index, "definition", prefixed(fact, render_definition(hypothesis))))
    if "label" in allowed:
        label = render_label(hypothesis)
        if label:
            queries.append(RenderedQuery(hypothesis_index, "label", prefixed(fact, label)))
    if not queries:
        queries.append(RenderedQuery(hypothesis_index, "direct", direct_query(fact)))
    return queries


# ---- the generator prompt -----------------------------------------------------


def hypothesis_schema(domain: Domain) -> dict[str, Any]:
    """JSON schema of a generator reply, for backends that support structured output."""
    names = list(domain.dimension_names)
    return {
        "type": "object",
        "properties": {
            "dimensions": {
                "type": "object",
                "properties": {name: {"type": "string"} for name in names},
                "required": names,
                "additionalProperties": False,
            },
            "operators": {"type": "array", "items": {"type": "string", "enum": list(domain.operator_names)}},
            "retrieval_query": {"type": "string", "minLength": 1},
        },
        "required": ["dimensions", "operators", "retrieval_query"],
        "additionalProperties": False,
    }


def generator_prompt(
    fact: Fact, domain: Domain, context_chars: int, field_chars: int | None = None, order: str = DEFAULT_ORDER
) -> str:
    """The user message: the task, the dimensions with one-line glosses and the rules, then the evidence."""
    dimension_lines = "\n".join(
        f"- {d.name}: {d.gloss}" + (f" (e.g. {'; '.join(d.examples)})" if d.examples else "") for d in domain.dimensions
    )
    operator_lines = "\n".join(f"   - {o.name}: {o.gloss}" for o in domain.operators)
    skeleton = ", ".join(f'"{name}": "..."' for name in domain.dimension_names)
    return render(
        "generator",
        order=order,
        evidence_kind=domain.evidence,
        n_dimensions=str(len(domain.dimensions)),
        taxonomy=domain.taxonomy,
        dimension_lines=dimension_lines,
        operator_lines=operator_lines,
        query_guidance=domain.query_guidance,
        evidence=evidence_block(fact, context_chars, field_chars, order),
        dimension_skeleton=skeleton,
    )


def fit_generator_prompt(fact: Fact, config: FHSConfig, domain: Domain) -> Fitted:
    """The generator's messages within its token budget (the context is cut first, then the fields)."""
    order = config.prompt_order
    ladder = context_ladder(config.context_chars, CONTEXT_LADDER)
    ladder += last_resort(config.context_chars, labels=False)
    return fit_to_budget(
        lambda context_chars, field_chars=None: fact_messages(
            generator_prompt(fact, domain, context_chars, field_chars, order), order
        ),
        ladder,
        Budget(config.generator_prompt_tokens, config.max_tokens_hypothesis, config.context_tokens),
        what=f"fact {fact.id}: the {PURPOSE} prompt",
    )


def hypothesis_requests(fact: Fact, config: FHSConfig, domain: Domain) -> list[Request]:
    """The J identical-prompt requests, told apart by sample_index (so they sample differently)."""
    fitted = fit_generator_prompt(fact, config, domain)
    schema = hypothesis_schema(domain) if config.json_schema else None
    return [
        Request(
            messages=fitted.messages,
            temperature=config.temperature,
            top_p=config.top_p,
            max_tokens=config.max_tokens_hypothesis,
            seed=config.seed,
            sample_index=j,
            schema=schema,
            purpose=PURPOSE,
            shortened=fitted.shortened,
            fact_id=fact.id,
        )
        for j in range(config.num_hypotheses)
    ]


def generate_hypotheses(
    fact: Fact, llm: LLM, config: FHSConfig, domain: Domain
) -> tuple[list[Hypothesis], list[tuple[Request, Response]]]:
    """Sample J hypotheses (one batch), retry each failed sample once, drop what still fails.

    A sample fails when its reply does not parse or was cut at ``max_tokens``.

    If no sample survives, the single fallback hypothesis is returned. The
    second value lists every (request, response) pair, retries included, for
    the cost tables.
    """
    requests = hypothesis_requests(fact, config, domain)
    parse = _parser(domain)
    calls: list[tuple[Request, Response]] = []
    parsed: dict[int, Hypothesis] = {}
    pending = list(requests)
    for attempt in range(config.hypothesis_retries + 1):
        if not pending:
            break
        if attempt:
            pending = [dataclasses.replace(r, attempt=attempt) for r in pending]  # a new sample, a new cache key
        responses = llm.complete(pending)
        failed = []
        for request, response in zip(pending, responses):
            calls.append((request, response))
            hypothesis = None if response.cut_short else parse(response.text)  # a cut answer is a failed sample
            if hypothesis is None:
                failed.append(request)
            else:
                parsed[request.sample_index] = dataclasses.replace(hypothesis, sample_index=request.sample_index)
        pending = failed
    hypotheses = [parsed[j] for j in sorted(parsed)]
    if not hypotheses:
        hypotheses = [fallback_hypothesis(fact, domain.dimension_names)]
    return hypotheses, calls


def _parser(domain: Domain):
    names, operators = domain.dimension_names, domain.operator_names
    return lambda text: parse_hypothesis(text, names, operators)


def hypotheses_from_records(
    records: Sequence[Mapping[str, Any]], dimensions: Sequence[str] = DEFAULT_DIMENSIONS
) -> list[Hypothesis]:
    """Rebuild hypotheses from ``Hypothesis.to_dict`` records (to replay a logged run)."""
    result = []
    for record in records:
        dims = record.get("dimensions", {})
        result.append(
            Hypothesis(
                dimensions=tuple((name, _value_text(dims.get(name))) for name in dimensions),
                retrieval_query=str(record.get("retrieval_query", "")),
                operators=tuple(record.get("operators", ("direct_label",))),
                source=str(record.get("source", "model")),
                sample_index=int(record.get("sample_index", 0)),
            )
        )
    return result
