"""The paper's two worked examples (Appendix G, Tables 21-24) as data, scored by the real code.

The case-study chapter draws them and ``tests/test_verifier.py`` checks them,
from the same inputs: two hypotheses, the verifier's replies as the model
would write them, and a fused pool. Every number shown (v_j, v̄, the Eq. 3
scores, the gap that moves the gold) comes from ``score_example``, which runs
``parse_verdicts`` -> ``support`` -> ``fill_support`` -> ``consensus`` ->
``final_scores``; nothing here is a result typed in by hand.

The fused scores are illustrative where the paper gives only an order: the
RSU gold sits seventh, 0.063 below the options concept (the lead the paper
states); the securitization pool interleaves the two concept families.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fhs.method.hypotheses import UNRESOLVED, Hypothesis
from fhs.method.verifier import consensus, fill_support, final_scores, parse_verdicts, support
from fhs.paper import lookup
from fhs.retrieval.bm25 import Ranking
from fhs.retrieval.fusion import FusedPool

DIMS = ("FAMILY", "ROLE", "EVENT", "QUALIFIER", "SCOPE", "TEMPORAL")
BETA = 0.6  # Section 4.4's default, the beta of both examples


def hypothesis(**values: str) -> Hypothesis:
    """A hypothesis over the six US-GAAP dimensions; unnamed ones are UNRESOLVED."""
    return Hypothesis(dimensions=tuple((d, values.get(d, UNRESOLVED)) for d in DIMS), retrieval_query="q")


def reply(entries: Mapping[str, Mapping[str, str]]) -> str:
    """A verifier reply ``{"verdicts": [{"id": ..., DIM: label}]}``; unnamed dimensions 'unresolved'."""
    return json.dumps(
        {"verdicts": [{"id": cid, **{d: labels.get(d, "unresolved") for d in DIMS}} for cid, labels in entries.items()]}
    )


def pool_of(ids_and_scores: Sequence[tuple[str, float]]) -> FusedPool:
    """A fused pool whose S~ are the given scores, each candidate from one ranking."""
    ids = tuple(cid for cid, _ in ids_and_scores)
    scores = tuple(s for _, s in ids_and_scores)
    return FusedPool(
        ids=ids, scores=scores, normalized=scores, contributions=tuple(((0, i + 1),) for i in range(len(ids)))
    )


@dataclass(frozen=True)
class WorkedExample:
    """One Appendix G example: what the verifier saw and said, and which concept should win."""

    name: str
    fact: str  # the fact as the paper describes it
    hypotheses: tuple[Hypothesis, ...]
    replies: tuple[str, ...]
    pool: FusedPool
    gold: str
    rival: str  # the concept the gold has to overtake (or be told apart from)


@dataclass(frozen=True)
class Scored:
    """The verifier arithmetic of one example under one scoring variant."""

    example: WorkedExample
    scoring: str
    verdicts: tuple[dict[str, dict[str, str]], ...]  # per hypothesis: candidate -> dimension -> label
    support: tuple[dict[str, float], ...]  # v_j(c) after the fill, per hypothesis
    vbar: dict[str, float]
    final: Ranking
    beta: float

    def s_tilde(self, cid: str) -> float:
        return self.example.pool.normalized_by_id()[cid]

    def score(self, cid: str) -> float:
        """Eq. 3: S~(c) + beta * v̄(c)."""
        return self.s_tilde(cid) + self.beta * self.vbar[cid]

    def rank(self, cid: str, *, fused: bool = False) -> int:
        ids = self.example.pool.ids if fused else self.final.ids
        return list(ids).index(cid) + 1


def score_example(example: WorkedExample, scoring: str = "paper", beta: float = BETA) -> Scored:
    """Run the verifier's scoring code on an example's replies (Section 4.4, Eqs. 2-3)."""
    ids = example.pool.ids
    parsed = [parse_verdicts(text, ids, DIMS) for text in example.replies]
    filled = [fill_support(support(v, h, scoring), ids) for v, h in zip(parsed, example.hypotheses)]
    vbar = consensus(filled, ids)
    return Scored(
        example,
        scoring,
        tuple({cid: v.to_dict() for cid, v in p.items()} for p in parsed),
        tuple(filled),
        vbar,
        final_scores(example.pool, vbar, beta),
        beta,
    )


# ---- worked example 1: the RSU rollforward (Appendix G, Tables 21-22) ---------------------------

RSU_GOLD = "ShareBasedCompensationArrangementByShareBasedPaymentAwardEquityInstrumentsOtherThanOptionsNonvestedNumber"
RSU_OPTIONS = "SharebasedCompensationArrangementBySharebasedPaymentAwardOptionsNonvestedNumberOfShares"
RSU_BETWEEN = tuple(f"Distractor{i}" for i in range(1, 6))  # fused ranks 2-6; the gold is seventh
RSU_LEAD = lookup("appendix-g/rsu/lead")  # the options concept's S~ lead over the gold (0.063)


def rsu_example() -> WorkedExample:
    h1 = hypothesis(
        FAMILY="Share-Based Compensation",
        ROLE="Nonvested Shares",
        EVENT="Outstanding nonvested awards",
        QUALIFIER="Number of shares",
        TEMPORAL="End of period",
    )
    h2 = hypothesis(
        FAMILY="Equity", ROLE="Share-based compensation", EVENT="Nonvested awards", TEMPORAL="As of December 31, 2023"
    )
    support_4 = {d: "support" for d in ("FAMILY", "ROLE", "EVENT", "TEMPORAL")}
    failing = {d: {**support_4, "ROLE": "contradict", "TEMPORAL": "contradict"} for d in RSU_BETWEEN}
    # Under h1 the verifier supports the gold on Family, Role, Event, Temporal and abstains on the other
    # two; the options concept gets the same verdicts except Role. Under h2 both get full support.
    r1 = {RSU_GOLD: support_4, RSU_OPTIONS: {**support_4, "ROLE": "contradict"}, **failing}
    r2 = {RSU_GOLD: support_4, RSU_OPTIONS: support_4, **failing}
    fused = (
        [(RSU_OPTIONS, 1.0)]
        + [(d, 1.0 - 0.01 * (i + 1)) for i, d in enumerate(RSU_BETWEEN)]
        + [(RSU_GOLD, 1.0 - RSU_LEAD)]
    )
    return WorkedExample(
        "RSU rollforward (table)",
        "1,229,202 nonvested restricted stock units at December 31, 2023 (a rollforward table cell)",
        (h1, h2),
        (reply(r1), reply(r2)),
        pool_of(fused),
        RSU_GOLD,
        RSU_OPTIONS,
    )


# ---- worked example 2: the securitization facility (Appendix G, Tables 23-24) --------------------

SEC_MAX_CAP = "LineOfCreditFacilityMaximumBorrowingCapacity"
SEC_REMAINING = "LineOfCreditFacilityRemainingBorrowingCapacity"
SEC_CURRENT = "LineOfCreditFacilityCurrentBorrowingCapacity"
SEC_FACILITY = ("ProceedsFromSecuritizationFacility", "SecuritizationFacilityAmendmentFees", "FacilityClosingCosts")


def securitization_example() -> WorkedExample:
    # h1 follows the amendment framing (it resolves Event); h2 resolves only Family and Role.
    h1 = hypothesis(FAMILY="Liabilities", EVENT="Amended securitization facility and increased commitments")
    h2 = hypothesis(FAMILY="Liabilities", ROLE="Debt")
    capacity = (SEC_MAX_CAP, SEC_REMAINING, SEC_CURRENT)
    r1 = {c: {"EVENT": "contradict"} for c in capacity + SEC_FACILITY}
    r2 = {
        **{c: {"FAMILY": "support", "ROLE": "support"} for c in capacity},
        **{c: {"FAMILY": "contradict", "ROLE": "contradict"} for c in SEC_FACILITY},
    }
    # The two groups interleave; within the capacity group maximum > remaining > current.
    fused = [
        (SEC_FACILITY[0], 1.0),
        (SEC_MAX_CAP, 0.95),
        (SEC_FACILITY[1], 0.9),
        (SEC_REMAINING, 0.85),
        (SEC_FACILITY[2], 0.8),
        (SEC_CURRENT, 0.75),
    ]
    return WorkedExample(
        "Securitization facility (text)",
        "a sentence on an amended securitization facility whose commitments rose to a new maximum",
        (h1, h2),
        (reply(r1), reply(r2)),
        pool_of(fused),
        SEC_MAX_CAP,
        SEC_FACILITY[0],
    )


def examples() -> list[WorkedExample]:
    return [rsu_example(), securitization_example()]
