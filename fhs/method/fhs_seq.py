"""FHS-Seq (Section 4.5, Appendix F): FHS's parts in a revise-and-refetch loop.

Round 1 is FHS: J hypotheses, every rendering retrieved and fused, the
verifier over the window. Each later round (at most ``max_rounds`` counting
round 1) tallies the verifier's verdicts on the current hypothesis per
dimension, picks the most net-unsupported dimension (``fhs.method.revision``),
revises the current hypothesis on that dimension alone with one greedy call,
retrieves the revision's renderings, re-fuses every ranking so far and
re-verifies every hypothesis in the pool. The loop stops when no dimension is
net-unsupported, at the round budget, or when a revision fails to parse or
leaves its target unchanged.

Verifier calls are 2, 3, 4, 5 in rounds 1-4 (+ 2 generator + 1 revision per
extra round: 4 to 19 calls before the selector). A re-verification whose
request is unchanged (same hypothesis, same window) is answered by the
response cache, not the model. The verdict ledger (``fhs.run.ledger``) is
not used: every round re-verifies each hypothesis over the whole new window,
as the paper counts the calls.

Where the paper and the authors' code differ, the default is the paper and
the code is an option (``SeqConfig``): ``fill="zero"`` gives unjudged
candidates support 0 instead of the mean, and ``final="refusion"`` returns
the plain RRF re-fusion of every round instead of the verifier-scored list.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fhs.data.facts import Fact
from fhs.method.config import FILLS
from fhs.method.context import MethodContext, call_record, with_selector
from fhs.method.fhs import pool_of, retrieve, verify_pool
from fhs.method.hypotheses import generate_hypotheses, parse_hypothesis, queries_for
from fhs.method.revision import choose_dimension, read_revision, revision_request, tally

FINALS = ("verifier", "refusion")
STOP_REASONS = ("no_unsupported_dimension", "max_rounds", "revision_failed", "revision_unchanged", "empty_pool")


@dataclass(frozen=True)
class SeqConfig:
    """FHS-Seq's own settings; every other knob is the shared ``FHSConfig``.

    ``fill``: None keeps the FHS config's fill (the paper's mean); ``"zero"``
    is the authors' FHS-Seq code. ``final``: ``"verifier"`` (paper: Eq. 3 over
    the re-fused pool) or ``"refusion"`` (the authors' code: plain RRF of every
    round, no verifier term).
    """

    max_rounds: int = 4
    fill: str | None = None
    final: str = "verifier"

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ValueError(f"SeqConfig.max_rounds must be at least 1, got {self.max_rounds!r}")
        if self.fill is not None and self.fill not in FILLS:
            raise ValueError(f"SeqConfig.fill must be None or one of {FILLS}, got {self.fill!r}")
        if self.final not in FINALS:
            raise ValueError(f"SeqConfig.final must be one of {FINALS}, got {self.final!r}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SeqConfig:
        """From a method context's options: ``seq_max_rounds``, ``seq_fill``, ``seq_final``."""
        return cls(
            max_rounds=int(options.get("seq_max_rounds", 4)),
            fill=options.get("seq_fill"),
            final=str(options.get("seq_final", "verifier")),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def run_fhs_seq(fact: Fact, ctx: MethodContext, seq: SeqConfig | None = None) -> dict[str, Any]:
    """One FHS-Seq episode; the record keeps every round (see ``_round_record``)."""
    llm, domain = ctx.require_llm("fhs-seq")
    seq = seq or SeqConfig.from_options(ctx.options)
    config = ctx.config if seq.fill is None else ctx.config.replace(fill=seq.fill)
    names = domain.dimension_names

    hypotheses, generated = generate_hypotheses(fact, llm, config, domain)
    calls = [
        call_record(req, resp, parse_hypothesis(resp.text, names, domain.operator_names) is not None, cache=llm)
        for req, resp in generated
    ]
    queries = [q for j, h in enumerate(hypotheses) for q in queries_for(fact, h, config, j)]
    rankings = retrieve(fact, queries, ctx.retriever)
    current = 0  # the hypothesis the next revision starts from
    rounds: list[dict[str, Any]] = []
    stop_reason = None
    revision_record = None
    while True:
        pool = pool_of(rankings, config)
        if not len(pool):
            rounds.append(
                _round_record(
                    hypotheses, queries, rankings, pool, None, pool.as_ranking(), None, None, revision_record, current
                )
            )
            stop_reason = "empty_pool"
            break
        verified = verify_pool(fact, hypotheses, pool, llm, ctx.taxonomy, domain, config)
        calls += verified["calls"]
        entries = verified["record"]["verdicts"][current]["entries"]
        window_ids = verified["window"].ids
        tallies = tally(entries, window_ids, names)
        target = choose_dimension(tallies, names)
        rounds.append(
            _round_record(
                hypotheses,
                queries,
                rankings,
                pool,
                verified,
                verified["ranking"],
                tallies,
                target,
                revision_record,
                current,
            )
        )
        if target is None:
            stop_reason = "no_unsupported_dimension"
            break
        if len(rounds) >= seq.max_rounds:
            stop_reason = "max_rounds"
            break
        request = revision_request(
            fact, hypotheses[current], target, tallies[target], window_ids, entries, ctx.taxonomy, domain, config
        )
        response = llm.complete([request])[0]
        revision = read_revision("" if response.cut_short else response.text, hypotheses[current], target, domain)
        calls.append(call_record(request, response, revision.hypothesis is not None, cache=llm))
        revision_record = revision.to_dict()
        if revision.hypothesis is None or not revision.target_changed:
            rounds[-1]["revision_attempt"] = revision_record
            stop_reason = "revision_failed" if revision.hypothesis is None else "revision_unchanged"
            break
        index = len(hypotheses)
        hypotheses.append(dataclasses.replace(revision.hypothesis, sample_index=index))
        new_queries = queries_for(fact, hypotheses[index], config, index)
        queries += new_queries
        rankings += retrieve(fact, new_queries, ctx.retriever)
        current = index

    last = rounds[-1]
    ranking = last["ranking"] if seq.final == "verifier" else last["refusion"]
    record = {
        "hypotheses": [h.to_dict() for h in hypotheses],
        "queries": [q.to_dict() for q in queries],
        "rankings": [list(r.ids) for r in rankings],
        "rounds": rounds,
        "rounds_used": len(rounds),
        "stop_reason": stop_reason,
        "seq": {**seq.to_dict(), "fill_used": config.fill},
        "ranking": list(ranking),
        "llm_calls": calls,
    }
    return with_selector(fact, ctx, record)


def _round_record(
    hypotheses, queries, rankings, pool, verified, final, tallies, target, revision, current
) -> dict[str, Any]:
    """One round: what was in the pool, what the verifier said, what the loop chose next.

    ``hypotheses``/``queries``/``rankings`` count how many of the episode's
    lists existed in this round (the lists themselves are at the top level);
    ``revision`` is the revision that produced this round's newest hypothesis
    (None in round 1); ``refusion`` is the fused pool in plain RRF order (with
    ``pool``'s normalised scores beside it), ``ranking`` Eq. 3 over that pool.
    """
    return {
        "hypotheses": len(hypotheses),
        "queries": len(queries),
        "rankings": len(rankings),
        "current": current,
        "revision": revision,
        "pool": {"normalized": list(pool.normalized), "union_size": pool.union_size},  # ids: ``refusion``
        "verifier": verified["record"] if verified is not None else None,
        "ranking": list(final.ids),
        "refusion": list(pool.ids),
        "tallies": {name: t.to_dict() for name, t in tallies.items()} if tallies is not None else None,
        "target": target,
    }


def fhs_seq(fact: Fact, ctx: MethodContext) -> dict:
    """FHS-Seq: round 1 = FHS, then up to 3 one-dimension revisions, each re-fused and re-verified (+ selector)."""
    return run_fhs_seq(fact, ctx)
