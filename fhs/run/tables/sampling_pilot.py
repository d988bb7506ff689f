"""Table 11, the development pilot: FHS's own factorized sampler against forced diversity (Appendix D.1).

The paper's claim (Section 3.5): prompting the hypotheses to be diverse makes
them overlap less but lowers each one's Recall@200 by 3 to 8 points and
shrinks the pool the ensemble accumulates; for plain sampling, fusing loses
7.4 points between search coverage Pr(c* in U) and the consolidated list.

The two arms are FHS (J hypotheses from the generator at T = 0.8) and
``parallel-diverse``, both run with the selector off (everything here is read
before it). To give both arms the same number of lists, each hypothesis is
read over the same renderings, FHS's modality rule (``shared_renderings``):
label and definition form on tables, the definition form alone on text. So a
diverse hypothesis on a text fact contributes its definition query only, as an
FHS hypothesis does. Per fact and arm, over those lists (depth K):

- per-hypothesis recall: the gold in the top K of that hypothesis's own lists
  fused by summed RRF (one list of depth K per hypothesis in either arm);
- coverage: the gold anywhere in the union U of the lists;
- pool recall: the gold in the top K of all lists fused by summed RRF (Eq. 4);
- consolidation loss = coverage - pool recall;
- overlap: the Jaccard index |A ∩ B| / |A ∪ B| of two hypotheses' top-K sets,
  averaged over pairs and then over facts with at least two hypotheses;
- accumulated pool: |U|.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from statistics import fmean
from typing import Any

from fhs.method.config import FHSConfig
from fhs.retrieval.bm25 import Ranking
from fhs.retrieval.fusion import fuse
from fhs.run.evaluate import gold_rank
from fhs.run.health import failed

DIRECT = "direct"  # a fallback hypothesis's only list: the raw serialized fact


def shared_renderings(modality: str, config: FHSConfig) -> tuple[str, ...]:
    """The renderings FHS issues for a fact of ``modality`` (Section 4.2), which both arms are read over."""
    if modality == "text" and not config.label_on_text and "definition" in config.renderings:
        return ("definition",)
    return tuple(config.renderings)


def hypothesis_lists(record: Mapping[str, Any]) -> dict[int, list[tuple[str, list[str]]]]:
    """Per hypothesis index, its ``(rendering, ranking)`` lists, from an FHS or a ``parallel-diverse`` record."""
    lists: dict[int, list[tuple[str, list[str]]]] = {}
    if "queries" in record:  # FHS: parallel queries and rankings
        for query, ranking in zip(record["queries"], record["rankings"]):
            lists.setdefault(query["hypothesis_index"], []).append((query["rendering"], list(ranking)))
        return lists
    for round_ in record.get("rounds") or []:  # parallel-diverse: the non-empty fields, label first
        if "queries" not in round_:
            raise ValueError(f"record {record.get('id')!r} is neither FHS nor parallel-diverse")
        names = (
            [DIRECT]
            if round_.get("source") == "fallback"
            else [name.split("_")[0] for name in ("label_query", "definition_query") if round_.get(name)]
        )
        lists[round_["sample"]] = [(name, list(q["ranking"])) for name, q in zip(names, round_["queries"])]
    return lists


def kept_lists(lists: Sequence[tuple[str, list[str]]], renderings: Sequence[str]) -> list[list[str]]:
    """A hypothesis's lists in the shared renderings (a fallback's direct list too); its first list if none is."""
    kept = [ranking for name, ranking in lists if name in renderings or name == DIRECT]
    if kept or not lists:
        return kept
    return [lists[0][1]]


def fused_top(rankings: Sequence[Sequence[str]], depth: int) -> list[str]:
    """Summed RRF (kappa 60) over id lists, top ``depth``."""
    pool = fuse([Ranking(tuple(ids[:depth]), tuple(0.0 for _ in ids[:depth])) for ids in rankings], k=depth)
    return list(pool.ids)


def jaccard(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def fact_stats(record: Mapping[str, Any], depth: int, config: FHSConfig) -> dict[str, Any]:
    """One fact of one arm: per-hypothesis hits, coverage, pool hit, overlap, |U| and the lists used."""
    if failed(record):
        return {"hits": [], "coverage": False, "pool": False, "overlap": None, "union": 0, "lists": 0}
    gold, match = record["gold"], record.get("gold_match", "exact")

    def hit(ids: Sequence[str]) -> bool:
        return gold_rank(ids, gold, match) is not None

    renderings = shared_renderings(record.get("modality", "table"), config)
    per_hypothesis = {j: kept_lists(lists, renderings) for j, lists in sorted(hypothesis_lists(record).items())}
    every = [ranking[:depth] for rankings in per_hypothesis.values() for ranking in rankings]
    tops = [fused_top(rankings, depth) for rankings in per_hypothesis.values()]
    union = {cid for ranking in every for cid in ranking}
    pairs = [jaccard(set(a), set(b)) for a, b in combinations(tops, 2)]
    return {
        "hits": [hit(top) for top in tops],
        "coverage": hit(sorted(union)),
        "pool": hit(fused_top(every, depth)),
        "overlap": fmean(pairs) if pairs else None,
        "union": len(union),
        "lists": len(every),
    }


def arm_summary(
    records: Sequence[Mapping[str, Any]], depth: int = 200, config: FHSConfig = FHSConfig()
) -> dict[str, Any]:
    """Table 11's columns for one arm's records (refused facts count as misses and are counted)."""
    stats = [fact_stats(r, depth, config) for r in records]
    n = max(len(stats), 1)
    hits = [h for s in stats for h in s["hits"]]
    overlaps = [s["overlap"] for s in stats if s["overlap"] is not None]
    coverage = sum(s["coverage"] for s in stats) / n
    pool = sum(s["pool"] for s in stats) / n
    by_index: dict[int, list[bool]] = {}
    for s in stats:
        for j, h in enumerate(s["hits"]):
            by_index.setdefault(j, []).append(h)
    return {
        "facts": len(records),
        "refused": sum(failed(r) for r in records),
        "hypotheses_per_fact": len(hits) / n,
        "lists_per_fact": sum(s["lists"] for s in stats) / n,
        f"per_hypothesis_recall@{depth}": fmean(hits) if hits else 0.0,
        **{f"hypothesis{j}_recall@{depth}": fmean(v) for j, v in sorted(by_index.items())},
        f"coverage@{depth}": coverage,
        f"pool_recall@{depth}": pool,
        "consolidation_loss": coverage - pool,
        "overlap": fmean(overlaps) if overlaps else None,
        "overlap_facts": len(overlaps),
        "accumulated_pool": sum(s["union"] for s in stats) / n,
    }


def sampling_pilot(
    factorized: Sequence[Mapping[str, Any]],
    diverse: Sequence[Mapping[str, Any]],
    depth: int = 200,
    config: FHSConfig = FHSConfig(),
) -> dict[str, Any]:
    """Table 11: both arms on the facts they share, and the differences the paper reads.

    ``factorized``: FHS records (selector off; β does not matter, the lists and
    pool are fixed before the verifier); ``diverse``: ``parallel-diverse``
    records of the same development facts.
    """
    shared = {r["id"] for r in factorized} & {r["id"] for r in diverse}
    arms = {
        name: arm_summary([r for r in records if r["id"] in shared], depth, config)
        for name, records in (("factorized", factorized), ("diverse", diverse))
    }
    recall = f"per_hypothesis_recall@{depth}"
    delta = {
        "per_hypothesis_recall_drop": arms["factorized"][recall] - arms["diverse"][recall],
        "overlap_drop": (
            arms["factorized"]["overlap"] - arms["diverse"]["overlap"]
            if None not in (arms["factorized"]["overlap"], arms["diverse"]["overlap"])
            else None
        ),
        "accumulated_pool_change": arms["diverse"]["accumulated_pool"] - arms["factorized"]["accumulated_pool"],
    }
    return {"depth": depth, "facts": len(shared), "arms": arms, "difference": delta}
