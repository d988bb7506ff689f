"""Re-score FHS records offline: Eq. 3 under another beta, normalisation or abstain convention.

A record keeps the fused pool (raw and normalised scores), the verifier's
window, every verdict and the hypotheses, so Table 12's beta sweep and
Appendix E.2's abstain convention are recomputed here with the verifier's own
functions (``fhs.method.verifier``) and no model at all. Variants that change
the pool itself (fusion, rendering, w_cov, J) go back through the pipeline,
where the response cache and the verdict ledger replay what is known.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fhs.method.hypotheses import hypotheses_from_records
from fhs.method.verifier import Verdicts, consensus, fill_support, final_scores, support
from fhs.retrieval.fusion import FusedPool
from fhs.run.evaluate import RecordT, gold_rank


def pool_of(record: Mapping[str, Any], normalize: bool = True) -> FusedPool:
    """The record's fused pool; ``normalize=False`` puts the raw RRF scores where Eq. 3 reads S~."""
    pool = record["pool"]
    scores = tuple(pool["scores"])
    return FusedPool(
        ids=tuple(pool["ids"]),
        scores=scores,
        normalized=tuple(pool["normalized"]) if normalize else scores,
        contributions=tuple(tuple(tuple(p) for p in c) for c in pool["contributions"]),
        union_size=pool.get("union_size", 0),
    )


def recorded_vbar(record: Mapping[str, Any]) -> dict[str, float]:
    """v̄ over the pool as the run computed it (window values, the shared fill elsewhere; 0 without a verifier)."""
    verifier = record.get("verifier")
    if not verifier:
        return {cid: 0.0 for cid in record["pool"]["ids"]}
    outside = verifier.get("vbar_outside") or 0.0
    return {cid: verifier["vbar"].get(cid, outside) for cid in record["pool"]["ids"]}


def rescored_vbar(
    record: Mapping[str, Any], dimensions: Sequence[str], scoring: str = "paper", fill: str = "mean"
) -> dict[str, float]:
    """v̄ recomputed from the recorded verdicts under another scoring convention (no model call)."""
    verifier = record.get("verifier")
    ids = record["pool"]["ids"]
    if not verifier:
        return {cid: 0.0 for cid in ids}
    hypotheses = hypotheses_from_records(record["hypotheses"], dimensions)
    per_hypothesis = []
    for hypothesis, verdicts in zip(hypotheses, verifier["verdicts"]):
        entries = {cid: Verdicts.from_dict(cid, entry, dimensions) for cid, entry in verdicts["entries"].items()}
        per_hypothesis.append(fill_support(support(entries, hypothesis, scoring), ids, fill))
    return consensus(per_hypothesis, ids)


def rescore(
    record: Mapping[str, Any], *, beta: float, normalize: bool = True, vbar: Mapping[str, float] | None = None
) -> dict[str, Any]:
    """A copy of a record re-ranked by Eq. 3 with ``beta`` (and raw or normalised S); ``rank`` recomputed.

    ``selected``/``correct`` are dropped: the selector saw the original order.
    """
    ranking = final_scores(pool_of(record, normalize), recorded_vbar(record) if vbar is None else vbar, beta)
    out = {k: v for k, v in record.items() if k not in ("selected", "correct", "selection")}
    out["ranking"] = list(ranking.ids)
    out["rank"] = gold_rank(ranking.ids, record["gold"])
    return out


def best_of(*runs: Sequence[RecordT]) -> list[RecordT]:
    """Per fact, the record of whichever run ranks the gold highest (the oracle-best-single bound)."""
    by_id = [{r["id"]: r for r in records} for records in runs]
    best = []
    for record in runs[0]:
        candidates = [b[record["id"]] for b in by_id if record["id"] in b]
        best.append(min(candidates, key=lambda r: r["rank"] if r["rank"] is not None else float("inf")))
    return best


def hypothesis_rankings(record: Mapping[str, Any]) -> list[tuple[int, list[str]]]:
    """(hypothesis index, ranking) for every query a record issued, whatever its method's layout.

    FHS keeps parallel ``queries`` and ``rankings``; ``parallel`` keeps one ranking per
    sampled round; ``parallel-diverse`` keeps each round's label and definition queries.
    """
    if "queries" in record:
        return [(q["hypothesis_index"], r) for q, r in zip(record["queries"], record["rankings"])]
    pairs = []
    for round_ in record.get("rounds") or []:
        if "ranking" in round_:
            pairs.append((round_["sample"], round_["ranking"]))
        pairs.extend((round_["sample"], q["ranking"]) for q in round_.get("queries", []))
    if not pairs:
        raise ValueError(f"record {record.get('id')!r} ({record.get('method')}) keeps no per-hypothesis rankings")
    return pairs


def pilot(records: Sequence[Mapping[str, Any]], depth: int = 200) -> dict[str, float]:
    """Table 11 from a sampling method's records: per-hypothesis Recall@depth, union, pool, consolidation loss.

    Per-hypothesis recall: the gold in the fused lists of that hypothesis's
    own queries; union: in any query's list; pool: in the fused top ``depth``.
    Consolidation loss = union recall - pool recall (what fusion drops).
    """
    per_hypothesis: dict[int, list[bool]] = {}
    union, pool = [], []
    for record in records:
        gold = set(record["gold"])
        found: dict[int, bool] = {}
        for j, ranking in hypothesis_rankings(record):
            found[j] = found.get(j, False) or bool(gold & set(ranking[:depth]))
        for j, hit in found.items():
            per_hypothesis.setdefault(j, []).append(hit)
        union.append(any(found.values()))
        pool.append(bool(gold & set(record["pool"]["ids"][:depth])))
    n = max(len(records), 1)
    result = {f"hypothesis{j}_recall": sum(v) / max(len(v), 1) for j, v in sorted(per_hypothesis.items())}
    result.update(
        union_recall=sum(union) / n, pool_recall=sum(pool) / n, consolidation_loss=(sum(union) - sum(pool)) / n
    )
    return result
