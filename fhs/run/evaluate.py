"""Metrics over per-fact gold ranks, and the paired bootstrap clustered by context.

Everything here reads plain records (``{"rank": int | None, "modality": str,
"context_id": str, ...}``), so chapters compute metrics from saved runs
instead of re-running methods. Conventions follow the paper:
rank is the 1-based position of the first gold id in a list of depth 200,
MRR is 1/rank (0 when absent), and every aggregate is fact-weighted.

"Gold id" follows the fact's gold-match rule (``fhs.data.facts.GOLD_MATCHES``):
``exact`` by default; ``prefix`` for a hierarchical gold such as a CodiEsp-P
4-character ICD-10-PCS code, where any ranked id that starts with the gold is a
hit. The runner records the rule on the record (``gold_match``) and computes
``rank`` and ``correct`` with it, so every metric below reads them as they are.

Accuracy ("Acc.") has one definition, used by the runner's metrics.json and by
the chapters: the shared listwise selector's pick is a gold id (the paper's
"top-1 after the shared selector", Appendix B.5). A record the selector did not
run on is scored by rank 1 of its final list instead, and :func:`accuracy_basis`
names which of the two a figure is, so a table can label it.

A fact the server refused (the record's ``failed``) is a miss for every metric
by default, as it would be for a reader of the paper: the fact was asked and
not answered. ``refused="exclude"`` leaves such facts out of the denominators
instead (``REFUSED``); ``metrics`` reports how many facts were evaluated and how
many were refused either way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from fhs.data.facts import matches_gold

CUTOFFS = (1, 10, 50, 200)
RecordT = TypeVar("RecordT", bound=Mapping)  # a record or its summary, handed back as given
MISS, EXCLUDE = "miss", "exclude"
REFUSED = {
    MISS: "a fact the server refused counts as a miss (the paper's denominators)",
    EXCLUDE: "a fact the server refused is left out of the denominators",
}
BOOTSTRAP_SEED = 20260724
BOOTSTRAP_RESAMPLES = 2000


def gold_rank(ranked_ids: Sequence[str], gold: Iterable[str], match: str = "exact") -> int | None:
    """1-based position of the first gold id in ``ranked_ids`` (any gold counts), else None.

    ``match`` is the fact's gold-match rule (``fhs.data.facts.GOLD_MATCHES``):
    ``exact`` compares ids; ``prefix`` reads each gold id as a node of a
    hierarchical code, so the first ranked id *under* it (starting with it) is
    the hit. A CodiEsp-P gold ``0DT9`` is thus found by ``0DT90ZZ`` or any other
    of the codes below ``0DT9``; a full-length gold under ``prefix`` still needs
    the id itself, since no other id starts with it.
    """
    gold = tuple(gold)
    for position, concept_id in enumerate(ranked_ids, start=1):
        if matches_gold(concept_id, gold, match):
            return position
    return None


def per_fact(rank: int | None, metric: str) -> float:
    """One fact's contribution to ``metric`` from its gold rank ("recall@k", "mrr"; "accuracy" = recall@1)."""
    if metric == "mrr":
        return 0.0 if rank is None else 1.0 / rank
    if metric == "accuracy":
        return float(rank == 1)
    if metric.startswith("recall@"):
        cutoff = int(metric.split("@", 1)[1])
        return float(rank is not None and rank <= cutoff)
    raise ValueError(f"unknown metric {metric!r}")


SELECTOR, RANK1, MIXED = "selector", "rank-1", "mixed"
ACCURACY_BASES = {
    SELECTOR: "Acc. = the shared selector's pick is gold",
    RANK1: "Acc. = rank 1 of the final list is gold (no selector ran)",
    MIXED: "Acc. = the selector's pick where it ran, rank 1 of the final list elsewhere",
}


def _refused(record: Mapping) -> bool:
    """Whether the server refused this fact (the runner's ``failed``)."""
    return bool(record.get("failed"))


def evaluated(records: Iterable[RecordT], policy: str = MISS) -> list[RecordT]:
    """The records a metric's denominator holds under a refused-facts policy (``REFUSED``)."""
    if policy not in REFUSED:
        raise ValueError(f"refused-facts policy must be one of {sorted(REFUSED)}, got {policy!r}")
    return [r for r in records if policy == MISS or not _refused(r)]


def record_value(record: Mapping, metric: str, rank_key: str = "rank") -> float:
    """One record's contribution to ``metric``; "accuracy" reads the selector's verdict when present.

    A refused fact contributes 0 to every metric (a miss)."""
    if _refused(record):
        return 0.0
    if metric == "accuracy" and "correct" in record:
        return float(bool(record["correct"]))
    return per_fact(record.get(rank_key), metric)


def accuracy_basis(records: Iterable[Mapping]) -> str:
    """Which definition of Acc. a set of records gets: ``selector``, ``rank-1`` or ``mixed``.

    Refused facts have no answer to judge, so they do not decide the basis."""
    judged = {"correct" in record for record in records if not _refused(record)}
    if judged == {True}:
        return SELECTOR
    if judged == {True, False}:
        return MIXED
    return RANK1


def accuracy(records: Sequence[Mapping], rank_key: str = "rank") -> float:
    """Acc. over every record (the module docstring has the definition); 0.0 for no records."""
    values = [record_value(record, "accuracy", rank_key) for record in records]
    return float(np.mean(values)) if values else 0.0


def metric_names(cutoffs: Sequence[int] = CUTOFFS) -> list[str]:
    return [f"recall@{k}" for k in cutoffs] + ["mrr"]


def rank_metrics(ranks: Sequence[int | None], cutoffs: Sequence[int] = CUTOFFS) -> dict[str, float]:
    """Recall@k for each cutoff and MRR over a list of gold ranks."""
    out: dict[str, float] = {"n_facts": len(ranks)}
    for name in metric_names(cutoffs):
        values = [per_fact(rank, name) for rank in ranks]
        out[name] = float(np.mean(values)) if values else 0.0
    return out


def _block(records: Sequence[Mapping], rank_key: str, cutoffs: Sequence[int]) -> dict:
    block: dict[str, Any] = {**rank_metrics([None if _refused(r) else r.get(rank_key) for r in records], cutoffs)}
    block["accuracy"] = accuracy(records, rank_key)
    block["accuracy_basis"] = accuracy_basis(records)
    return block


def metrics(
    records: Sequence[Mapping], rank_key: str = "rank", cutoffs: Sequence[int] = CUTOFFS, refused: str = MISS
) -> dict:
    """Pooled metrics plus one block per modality (``by_modality``), each with its Acc. and basis.

    ``n_facts`` counts the facts evaluated (the denominator) and ``n_refused`` the
    facts the server refused, counted as misses or left out as ``refused`` says.
    """
    everything = list(records)
    records = evaluated(everything, refused)
    result = _block(records, rank_key, cutoffs)
    result["n_refused"] = sum(1 for r in everything if _refused(r))
    result["refused"] = refused
    modalities = sorted({r["modality"] for r in records if r.get("modality")})
    result["by_modality"] = {
        modality: _block([r for r in records if r.get("modality") == modality], rank_key, cutoffs)
        for modality in modalities
    }
    return result


@dataclass(frozen=True)
class Interval:
    """A point estimate with a 95% percentile bootstrap interval."""

    estimate: float
    low: float
    high: float

    def __str__(self) -> str:
        return f"{self.estimate:.3f} [{self.low:.3f}, {self.high:.3f}]"

    def as_dict(self) -> dict[str, float]:
        return {"estimate": self.estimate, "low": self.low, "high": self.high}


def _cluster_sums(values: np.ndarray, clusters: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    _, cluster_index = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    n_clusters = int(cluster_index.max()) + 1 if cluster_index.size else 0
    sums = np.bincount(cluster_index, weights=values, minlength=n_clusters)
    counts = np.bincount(cluster_index, minlength=n_clusters).astype(np.float64)
    return sums, counts


def clustered_bootstrap(
    values: Sequence[float],
    clusters: Sequence[str],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    confidence: float = 0.95,
) -> Interval:
    """Fact-weighted mean of ``values`` with a context-clustered percentile interval.

    Each resample draws contexts with replacement and takes summed values over
    summed facts, so a context's facts stay together (they share a source and
    are not independent). For a paired difference between two methods pass the
    per-fact differences: both arms then see the same draw.
    """
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    sums, counts = _cluster_sums(x, clusters)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, sums.size, size=(resamples, sums.size))
    stats = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(stats, [tail, 100.0 - tail])
    return Interval(float(x.mean()), float(low), float(high))


def metric_interval(records: Sequence[Mapping], metric: str, rank_key: str = "rank", **kw) -> Interval:
    """Bootstrap interval of one metric over a run's records."""
    values = [record_value(r, metric, rank_key) for r in records]
    return clustered_bootstrap(values, [r["context_id"] for r in records], **kw)


@dataclass(frozen=True)
class RunsEstimate:
    """A metric over several seeded runs of one method: mean, interval and std across runs.

    ``estimate`` is the mean over the runs (the paper's "mean of three runs");
    ``low``/``high`` are the context-clustered bootstrap interval of that same
    mean (each fact's value averaged over the runs, then resampled by context),
    so point and interval come from the same runs; ``std`` is the sample
    standard deviation (ddof 1) of the per-run values, None for a single run.
    """

    estimate: float
    low: float
    high: float
    std: float | None
    runs: int
    per_run: tuple[float, ...]

    @property
    def value(self) -> float:  # read by fhs.book.report.as_estimate
        return self.estimate

    def __str__(self) -> str:
        spread = "" if self.std is None else f" ± {self.std:.3f}"
        return f"{self.estimate:.3f}{spread} [{self.low:.3f}, {self.high:.3f}]"


def runs_estimate(runs: Sequence[Sequence[Mapping]], metric: str, rank_key: str = "rank", **kw) -> RunsEstimate:
    """``metric`` over seeded runs of one method on the same facts (see :class:`RunsEstimate`).

    Only facts every run holds count, so a run that stopped early cannot
    shift the mean; with no shared fact the result is NaN.
    """
    if not runs:
        raise ValueError("runs_estimate needs at least one run")
    shared = set.intersection(*({r["id"] for r in records} for records in runs))
    by_id = [{r["id"]: r for r in records if r["id"] in shared} for records in runs]
    order = [r["id"] for r in runs[0] if r["id"] in shared]
    per_run = tuple(
        float(np.mean([record_value(run[i], metric, rank_key) for i in order])) if order else float("nan")
        for run in by_id
    )
    per_fact_mean = [float(np.mean([record_value(run[i], metric, rank_key) for run in by_id])) for i in order]
    interval = clustered_bootstrap(per_fact_mean, [by_id[0][i]["context_id"] for i in order], **kw)
    std = float(np.std(per_run, ddof=1)) if len(runs) > 1 else None
    return RunsEstimate(interval.estimate, interval.low, interval.high, std, len(runs), per_run)


def paired_difference(
    records_a: Sequence[Mapping],
    records_b: Sequence[Mapping],
    metric: str,
    rank_key_a: str = "rank",
    rank_key_b: str = "rank",
    **kw,
) -> Interval:
    """metric(A) - metric(B) on the facts both runs hold, paired per fact, clustered by context."""
    by_id_b = {r["id"]: r for r in records_b}
    shared = [r for r in records_a if r["id"] in by_id_b]
    if not shared:
        raise ValueError("the two runs share no fact ids")
    diffs = [record_value(r, metric, rank_key_a) - record_value(by_id_b[r["id"]], metric, rank_key_b) for r in shared]
    return clustered_bootstrap(diffs, [r["context_id"] for r in shared], **kw)


def recall_curve(ranks: Sequence[int | None], depth: int = 200) -> np.ndarray:
    """Recall@k for k = 1..depth: the share of facts whose gold lands at or above k."""
    found = np.array([rank for rank in ranks if rank is not None and rank <= depth], dtype=np.int64)
    hits = np.bincount(found, minlength=depth + 1)[1:]
    return np.cumsum(hits) / max(len(ranks), 1)


def by_group(records: Sequence[Mapping], key: Callable[[Mapping], object], rank_key: str = "rank") -> dict:
    """Metrics per group (e.g. label length bins) over a run's records."""
    groups: dict[object, list] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record.get(rank_key))
    return {group: rank_metrics(ranks) for group, ranks in sorted(groups.items(), key=lambda kv: str(kv[0]))}
