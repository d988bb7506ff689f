"""Chapter 1's and 5's LLM-free retrieval timed on the scorers it has had, in one process.

Every fact of a dataset sends one direct query and one oracle query (the gold's own text) to
the BM25 + Eq. 6 search; this is what the chapters' LLM-free runs pay for retrieval (chapter 5
swaps in the dense and hybrid retrievers beside the same BM25 runs). The queries are timed on
the numpy scorer the compiled kernels replaced (``search_numpy``, with ``tokenize``), on
``search`` one query at a time (what a run calls) and on ``search_many`` (one compiled call per
datatype index); the three take turns ``--repeats`` times and the medians of CPU seconds are
reported. Every ranking must be the same on all three.

    python -m dev.llm_free_search --dataset ixbrl,codiesp,fincl [--limit N] [--out FILE]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from dev.cli import names, write_json
from fhs.data.evidence import direct_query
from fhs.method.gold_query import oracle
from fhs.retrieval.bm25 import Ranking


class _Recorder:
    """Stands in for the retriever to learn which query a method sends."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str | None]] = []

    def search(self, query: str, datatype: str | None = None, top_k: int | None = None) -> Ranking:
        self.asked.append((query, datatype))
        return Ranking((), ())


def queries(experiment: Any) -> list[tuple[str, str | None]]:
    """Every fact's direct query, then every fact's oracle query, as the two methods send them."""
    recorder = _Recorder()
    ctx = SimpleNamespace(taxonomy=experiment.taxonomy, retriever=recorder,
                          options={"oracle_with_id": experiment.spec.oracle_with_id})
    for fact in experiment.facts:
        oracle(fact, ctx)  # type: ignore[arg-type]
    return [(direct_query(fact), fact.datatype) for fact in experiment.facts] + recorder.asked


def time_dataset(dataset: str, limit: int | None, repeats: int) -> dict[str, Any]:
    from fhs.run.inputs import load_experiment

    experiment = load_experiment(dataset, limit=limit, progress=False)
    retriever = experiment.retriever.warm_up()
    asked = queries(experiment)
    texts, kinds = [q for q, _ in asked], [d for _, d in asked]
    scorers = {
        "numpy": lambda: [retriever.search_numpy(q, d) for q, d in asked],
        "compiled": lambda: [retriever.search(q, d) for q, d in asked],
        "batched": lambda: retriever.search_many(texts, kinds),
    }
    retriever.search_many(texts[:2], kinds[:2])  # compile (or read the cached kernels) outside the timing
    seconds: dict[str, list[float]] = {name: [] for name in scorers}
    results: dict[str, list[Ranking]] = {}
    for round_ in range(repeats):  # alternating order, so a noisy neighbour slows each alike
        for name in (list(scorers) if round_ % 2 == 0 else list(reversed(scorers))):
            started = time.process_time()
            results[name] = scorers[name]()
            seconds[name].append(time.process_time() - started)
    same = all(a == b == c for a, b, c in zip(results["numpy"], results["compiled"], results["batched"]))
    median = {name: max(statistics.median(values), 1e-9) for name, values in seconds.items()}
    return {"dataset": dataset, "facts": len(experiment.facts), "queries": len(asked), "repeats": repeats,
            "identical_rankings": same,
            **{f"cpu_seconds_{name}": round(value, 2) for name, value in median.items()},
            **{f"qps_{name}": round(len(asked) / value, 1) for name, value in median.items()},
            "speedup_compiled": round(median["numpy"] / median["compiled"], 2),
            "speedup_batched": round(median["numpy"] / median["batched"], 2)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.llm_free_search", description=__doc__.split("\n")[0])
    parser.add_argument("--dataset", default="ixbrl,codiesp,fincl")
    parser.add_argument("--limit", type=int, default=None, help="the first N facts of each dataset (default all)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    rows = []
    for dataset in names(args.dataset):
        rows.append(time_dataset(dataset, args.limit, args.repeats))
        row = rows[-1]
        print(f"{dataset}: {row['queries']:,} queries ({row['facts']:,} facts); CPU s numpy "
              f"{row['cpu_seconds_numpy']}, compiled {row['cpu_seconds_compiled']}, batched "
              f"{row['cpu_seconds_batched']}; identical: {row['identical_rankings']}", flush=True)
    write_json(args.out, rows)
    return 0 if all(row["identical_rankings"] for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
