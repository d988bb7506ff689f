"""Small records and in-memory runs for the tests of the book's chapter modules (``fhs/book/``)."""

from pathlib import Path

from fhs.book.study import Run
from fhs.run.evaluate import metrics

DIMS = ("FAMILY", "ROLE", "EVENT", "QUALIFIER", "SCOPE", "TEMPORAL")


def call(purpose, cached=False, tokens_in=10, tokens_out=2, seconds=0.5):
    return {"purpose": purpose, "cached": cached, "tokens_in": tokens_in, "tokens_out": tokens_out,
            "seconds": seconds}


def fact(fid, rank, *, context="c1", modality="table", correct=None, calls=(), gold=("g",), **extra):
    """A record with the fields metrics read; ``correct`` present only when a selector ran."""
    record = {"id": fid, "context_id": context, "modality": modality, "gold": list(gold), "rank": rank,
              "llm_calls": list(calls), **extra}
    if correct is not None:
        record["correct"] = correct
    return record


def verified(fid, window, verdicts, *, gold="g", pool=None, ranking=None, rank=None, modality="table",
             scores=None, context="c1"):
    """An FHS record whose verifier judged ``window``; ``verdicts`` is one {candidate: {dim: value}} per hypothesis.

    ``scores`` are the pool's normalised fused scores (default: falling by 0.01 a rank)."""
    pool = list(pool or window)
    ranking = list(ranking or pool)
    scores = list(scores or [1.0 - 0.01 * i for i in range(len(pool))])
    hypotheses = [{"dimensions": {d: "x" for d in DIMS}, "retrieval_query": f"q{j}", "source": "sample"}
                  for j in range(len(verdicts))]
    return fact(fid, rank if rank is not None else (ranking.index(gold) + 1 if gold in ranking else None),
                modality=modality, gold=(gold,), hypotheses=hypotheses, context=context,
                queries=[{"hypothesis_index": j, "form": "label", "text": f"q{j}"} for j in range(len(verdicts))],
                rankings=[ranking for _ in verdicts], ranking=ranking,
                pool={"ids": pool, "scores": scores, "normalized": scores, "union_size": len(pool),
                      "contributions": [[[0, i + 1]] for i in range(len(pool))]},
                verifier={"window": {"ids": list(window)}, "vbar": {c: 0.5 for c in window}, "vbar_outside": 0.0,
                          "verdicts": [{"asked": True, "entries": v} for v in verdicts]})


def memory_run(dataset, method, records):
    """A run whose records live in memory: full records serve as their own summaries."""
    run = Run(dataset, method, Path("."), records, metrics(records))
    run.__dict__["records"] = records  # fills the cached property instead of reading a file
    return run
