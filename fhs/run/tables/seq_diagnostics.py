"""Table 20 and Appendix F.1 from FHS-Seq's records: what the later rounds changed, and what they could buy.

Every quantity is read from the records ``fhs.method.fhs_seq`` writes (each
round's ranking, plain re-fusion, verifier record and hypotheses), so no model
is called again:

- the gold rank after round 1 and after the full episode (for paired
  Recall@k contrasts);
- the share of the round-1 top-50 that later rounds replace;
- whether the gold ever entered the accumulated pool;
- the rounds used and the stopping reasons;
- the oracle best single hypothesis: each round-1 hypothesis scored alone
  (its own renderings fused, Eq. 3 with its own verdicts), and per fact the
  one that ranks the gold best -- perfect selection among FHS's own
  hypotheses (the paper's Table 6 row, Section 4.5).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from fhs.method.config import FHSConfig
from fhs.method.fhs import pool_of
from fhs.method.fhs_seq import STOP_REASONS
from fhs.retrieval.bm25 import Ranking
from fhs.run.evaluate import gold_rank


def list_kind(record: Mapping[str, Any]) -> str:
    """Which per-round list the record's final ranking is: ``ranking`` (Eq. 3) or ``refusion`` (plain RRF)."""
    return "ranking" if record.get("seq", {}).get("final", "verifier") == "verifier" else "refusion"


def round_rank(record: Mapping[str, Any], round_index: int) -> int | None:
    """The gold's rank in one round's list (0-based round index; -1 = the last round)."""
    return gold_rank(record["rounds"][round_index][list_kind(record)], record["gold"])


def with_round_ranks(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Copies of the records with ``rank_round1`` and ``rank_full`` for paired contrasts."""
    return [{**r, "rank_round1": round_rank(r, 0), "rank_full": round_rank(r, -1)} for r in records]


def replaced_share(record: Mapping[str, Any], depth: int = 50) -> float:
    """Share of the round-1 top-``depth`` that is no longer in the final top-``depth``."""
    kind = list_kind(record)
    first = record["rounds"][0][kind][:depth]
    if not first:
        return 0.0
    last = set(record["rounds"][-1][kind][:depth])
    return sum(cid not in last for cid in first) / len(first)


def gold_ever_in_pool(record: Mapping[str, Any]) -> bool:
    """Whether any gold id entered the fused pool (top K) in any round."""
    gold = set(record["gold"])
    return any(gold & set(r["refusion"]) for r in record["rounds"])


def distribution(values: Sequence[Any], support: Sequence[Any]) -> dict[Any, float]:
    """Share of each value of ``support`` among ``values`` (0 for those never seen)."""
    counts = Counter(values)
    n = max(len(values), 1)
    return {value: counts.get(value, 0) / n for value in support}


def rounds_distribution(records: Sequence[Mapping[str, Any]], max_rounds: int = 4) -> dict[int, float]:
    return distribution([r["rounds_used"] for r in records], range(1, max_rounds + 1))


def stop_distribution(records: Sequence[Mapping[str, Any]]) -> dict[str, float]:
    return distribution([r["stop_reason"] for r in records], STOP_REASONS)


def single_hypothesis_ranking(record: Mapping[str, Any], j: int, config: FHSConfig) -> list[str]:
    """Round-1 hypothesis ``j`` scored alone: its renderings fused, then S~ + beta * v_j (Eq. 3 with J = 1)."""
    own = [
        Ranking(ids=tuple(ids), scores=(0.0,) * len(ids))
        for q, ids in zip(record["queries"], record["rankings"])
        if q["hypothesis_index"] == j
    ]
    pool = pool_of(own, config)
    verifier = record["rounds"][0].get("verifier")
    if verifier is None or config.beta == 0:
        return list(pool.ids)
    judged, fill = verifier["support"][j], verifier["fill"][j]
    scored = sorted(
        ((s + config.beta * judged.get(cid, fill), cid) for cid, s in zip(pool.ids, pool.normalized)),
        key=lambda item: (-item[0], item[1]),
    )
    return [cid for _, cid in scored]


def oracle_best_single(records: Sequence[Mapping[str, Any]], config: FHSConfig) -> list[dict[str, Any]]:
    """Copies of the records with ``rank_oracle``: the best gold rank over the round-1 hypotheses scored alone."""
    result = []
    for record in records:
        n_first = record["rounds"][0]["hypotheses"]
        ranks = [gold_rank(single_hypothesis_ranking(record, j, config), record["gold"]) for j in range(n_first)]
        found = [rank for rank in ranks if rank is not None]
        result.append({**record, "rank_oracle": min(found) if found else None, "rank_single": ranks})
    return result


def summary(records: Sequence[Mapping[str, Any]], depth: int = 50, max_rounds: int = 4) -> dict[str, float]:
    """Table 20's scalar rows over a run (fact-weighted means)."""
    n = max(len(records), 1)
    rounds = rounds_distribution(records, max_rounds)
    return {
        "replaced_top50": sum(replaced_share(r, depth) for r in records) / n,
        "gold_never_in_pool": sum(not gold_ever_in_pool(r) for r in records) / n,
        "all_rounds": rounds[max_rounds],
        "one_round": rounds[1],
        "mean_rounds": sum(r["rounds_used"] for r in records) / n,
    }
