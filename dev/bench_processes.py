"""LLM-free runs in one process against several: facts/s side by side, and the same records?

The runner splits an LLM-free run over 2,000 facts or more between forked processes
(``fhs.run.runner.run_processes``; ``FHS_RUN_PROCESSES`` sets how many). This script
runs the same runs each way in one invocation, each setting in a process of its own
and a fresh temporary folder (indexes and dense embeddings are read from the usual
cache, or built untimed: ICD-10-CM's take minutes, so build them once with chapter 5
or ``fhs plan --build-dense``). It prints each setting's seconds, facts/s and ratio,
and whether every record is the same apart from its timing. The runs execute
together, fact by fact, as chapter 5's readiness runs do.

    python -m dev.bench_processes                                   # iXBRL, BM25, direct + oracle
    python -m dev.bench_processes --dataset codiesp --retriever dense,hybrid
    python -m dev.bench_processes --processes 1,2,4 --limit 5000

Needs ``FHS_DATA``. Exit status 1 if any setting wrote other records than the first.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fhs.book.study import Study
from fhs.run.records import read_records
from fhs.run.runner import PROCESSES_ENV


def timed_runs(root: Path, dataset: str, retrievers: list[str], methods: list[str], limit: int | None) -> dict:
    """In a child process: read or build the indexes (untimed), then time the runs together."""
    study = Study.for_profile("cpu", root, progress=False)
    experiment = study.experiment(dataset)
    facts = experiment.facts if limit is None else experiment.facts[:limit]
    specs = [study.spec(dataset, method, retriever=retriever) for retriever in retrievers for method in methods]
    for spec in specs:
        retriever = spec.searcher(experiment)
        if hasattr(retriever, "warm_up"):
            retriever.warm_up()
    started = time.perf_counter()
    runs = study.run_all(specs, {dataset: facts})
    return {"seconds": time.perf_counter() - started, "facts": len(facts) * len(specs),
            "paths": [str(run.path) for run in runs]}


def records_without_timing(paths: list[str]) -> list[list[dict]]:
    runs = []
    for path in paths:
        rows = read_records(Path(path) / "records.jsonl")
        for row in rows:
            row.pop("wall_seconds", None)
        runs.append(rows)
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="ixbrl")
    parser.add_argument("--retriever", default="bm25", help="comma-separated: bm25, dense, hybrid")
    parser.add_argument("--methods", default="direct,oracle", help="comma-separated LLM-free methods")
    parser.add_argument("--processes", default="1,2", help="comma-separated settings; the first is the baseline")
    parser.add_argument("--limit", type=int, default=None, help="only the dataset's first N facts")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)  # a run folder: time one setting there
    args = parser.parse_args(argv)
    retrievers, methods = args.retriever.split(","), args.methods.split(",")
    if args.child:
        print(json.dumps(timed_runs(Path(args.child), args.dataset, retrievers, methods, args.limit)))
        return 0
    print(f"{args.dataset}: {', '.join(methods)} with {', '.join(retrievers)}; CPU cores "
          f"{os.cpu_count()}", flush=True)
    print(f"{'processes':>10}{'seconds':>10}{'facts/s':>10}{'ratio':>8}  same records", flush=True)
    baseline, same_everywhere = None, True
    with tempfile.TemporaryDirectory(prefix="fhs-bench-processes-") as scratch:
        for processes in (int(p) for p in args.processes.split(",")):
            # a process of its own per setting: nothing one setting memoised (query vectors) helps the next
            child = [sys.executable, __file__, *(argv if argv is not None else sys.argv[1:]),
                     "--child", str(Path(scratch) / str(processes))]
            done = subprocess.run(child, env={**os.environ, PROCESSES_ENV: str(processes)}, check=True,
                                  stdout=subprocess.PIPE, text=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            records = records_without_timing(result["paths"])
            if baseline is None:
                baseline = (result["seconds"], records)
            same = records == baseline[1]
            same_everywhere &= same
            print(f"{processes:>10}{result['seconds']:>10.1f}{result['facts'] / result['seconds']:>10.0f}"
                  f"{baseline[0] / result['seconds']:>8.2f}  {same}", flush=True)
    return 0 if same_everywhere else 1


if __name__ == "__main__":
    sys.exit(main())
