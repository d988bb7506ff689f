"""FHS-Seq's revision step (Section 4.5, Appendix F): tally, target dimension, one-dimension revision.

After each round the verifier's verdicts on the current hypothesis are
tallied per dimension over the window (support / against / abstain). The
target is the dimension with the largest ``against - support`` above zero,
ties broken in the domain's fixed dimension order; none means the loop
stops. The revision is one greedy call that may change only the target
dimension (and the definition-style query that describes it); any other
dimension the model changed is restored and reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fhs.data.domain import Domain
from fhs.data.evidence import evidence_block
from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy
from fhs.llm.contract import Request
from fhs.method.config import FHSConfig
from fhs.method.hypotheses import CONTEXT_LADDER, Hypothesis, hypothesis_schema, parse_hypothesis
from fhs.method.prompting import (
    DEFAULT_ORDER,
    Budget,
    context_ladder,
    fact_messages,
    fit_to_budget,
    last_resort,
    render,
)
from fhs.method.verifier import concept_or_stub

PURPOSE = "revision"
_LABELS = {"support": "support", "contradict": "against", "abstain": "abstain"}


@dataclass(frozen=True)
class Tally:
    """One dimension's verdicts over the window: support, against (contradict) and abstain counts."""

    support: int = 0
    against: int = 0
    abstain: int = 0

    @property
    def net_against(self) -> int:
        return self.against - self.support

    def to_dict(self) -> dict[str, int]:
        return {"support": self.support, "against": self.against, "abstain": self.abstain}


def tally(
    entries: Mapping[str, Mapping[str, str]], window_ids: Sequence[str], dimensions: Sequence[str]
) -> dict[str, Tally]:
    """Count each dimension's verdicts over the window candidates.

    ``entries`` is one hypothesis's verifier record, ``{candidate_id: {dimension:
    support|contradict|abstain}}``; a window candidate without an entry counts
    as an abstention on every dimension.
    """
    counts = {name: {"support": 0, "against": 0, "abstain": 0} for name in dimensions}
    for cid in window_ids:
        entry = entries.get(cid, {})
        for name in dimensions:
            counts[name][_LABELS.get(entry.get(name, "abstain"), "abstain")] += 1
    return {name: Tally(**c) for name, c in counts.items()}


def choose_dimension(tallies: Mapping[str, Tally], dimensions: Sequence[str]) -> str | None:
    """The most net-unsupported dimension (against - support > 0), ties in ``dimensions`` order; else None."""
    best, best_net = None, 0
    for name in dimensions:  # strict ">" keeps the earlier dimension on a tie
        net = tallies[name].net_against if name in tallies else 0
        if net > best_net:
            best, best_net = name, net
    return best


# ---- the revision call ------------------------------------------------------------


def revision_prompt(
    fact: Fact,
    hypothesis: Hypothesis,
    target: str,
    target_tally: Tally,
    window_ids: Sequence[str],
    entries: Mapping[str, Mapping[str, str]],
    taxonomy: Taxonomy | None,
    domain: Domain,
    context_chars: int,
    field_chars: int | None = None,
    order: str = DEFAULT_ORDER,
) -> str:
    """The task and rules, the evidence, then the interpretation, target, tally and verdicts (what differs)."""
    gloss = next(d.verifier_gloss or d.gloss for d in domain.dimensions if d.name == target)
    lines = []
    for rank, cid in enumerate(window_ids, start=1):
        concept = concept_or_stub(taxonomy, cid)
        verdict = entries.get(cid, {}).get(target, "abstain")
        lines.append(f"[{rank}] {concept.id} / {concept.label or concept.id}: {verdict}")
    return render(
        "revise",
        order=order,
        evidence_kind=domain.evidence,
        evidence=evidence_block(fact, context_chars, field_chars, order),
        hypothesis_lines="\n".join(f"{name}: {hypothesis.value(name)}" for name in domain.dimension_names),
        taxonomy=domain.taxonomy,
        target=target,
        target_gloss=gloss,
        tally_line=(
            f"{target_tally.support} support, {target_tally.against} contradict, "
            f"{target_tally.abstain} unresolved over {len(window_ids)} candidates"
        ),
        candidate_lines="\n".join(lines),
        query_guidance=domain.query_guidance,
        dimension_skeleton=", ".join(f'"{name}": "..."' for name in domain.dimension_names),
    )


def revision_request(
    fact: Fact,
    hypothesis: Hypothesis,
    target: str,
    target_tally: Tally,
    window_ids: Sequence[str],
    entries: Mapping[str, Mapping[str, str]],
    taxonomy: Taxonomy | None,
    domain: Domain,
    config: FHSConfig,
) -> Request:
    """One greedy (T = 0) call asking for the hypothesis revised on ``target`` alone."""
    order = config.prompt_order
    ladder = context_ladder(config.context_chars, CONTEXT_LADDER) + last_resort(config.context_chars, labels=False)
    fitted = fit_to_budget(
        lambda context_chars, field_chars=None: fact_messages(
            revision_prompt(
                fact,
                hypothesis,
                target,
                target_tally,
                window_ids,
                entries,
                taxonomy,
                domain,
                context_chars,
                field_chars,
                order,
            ),
            order,
        ),
        ladder,
        Budget(config.generator_prompt_tokens, config.max_tokens_hypothesis, config.context_tokens),
        what=f"fact {fact.id}: the {PURPOSE} prompt",
    )
    return Request(
        messages=fitted.messages,
        temperature=0.0,
        top_p=1.0,
        max_tokens=config.max_tokens_hypothesis,
        seed=config.seed,
        schema=hypothesis_schema(domain) if config.json_schema else None,
        purpose=PURPOSE,
        shortened=fitted.shortened,
    )


@dataclass(frozen=True)
class Revision:
    """The revised hypothesis after enforcement, and what enforcement had to undo."""

    hypothesis: Hypothesis | None  # None when the reply did not parse
    target: str
    restored: tuple[str, ...] = ()  # non-target dimensions the model changed, put back
    target_changed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "parsed": self.hypothesis is not None,
            "hypothesis": self.hypothesis.to_dict() if self.hypothesis is not None else None,
            "restored": list(self.restored),
            "target_changed": self.target_changed,
        }


def enforce_target_only(current: Hypothesis, revised: Hypothesis, target: str) -> Revision:
    """Keep the revision's target value and query; every other dimension and the operators come from ``current``."""
    restored = tuple(name for name, value in current.dimensions if name != target and revised.value(name) != value)
    dimensions = tuple((name, revised.value(name) if name == target else value) for name, value in current.dimensions)
    hypothesis = dataclasses.replace(
        current, dimensions=dimensions, retrieval_query=revised.retrieval_query, source="revision"
    )
    return Revision(hypothesis, target, restored, revised.value(target) != current.value(target))


def read_revision(text: str, current: Hypothesis, target: str, domain: Domain) -> Revision:
    """Parse a revision reply and enforce that only ``target`` changed; unparsable -> ``hypothesis=None``."""
    parsed = parse_hypothesis(text, domain.dimension_names, domain.operator_names)
    if parsed is None:
        return Revision(None, target)
    return enforce_target_only(current, parsed, target)
