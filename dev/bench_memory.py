"""Peak memory of one FHS run over a small and a large sample: does it grow with the number of facts?

Each size runs in a subprocess of its own (so one run's peak cannot hide the
other's) through the engine behind ``fhs run --method fhs``
(``fhs.run.spec.RunSpec.execute``) at a profile's settings (default ``paper``:
the paper's budgets, a 200-candidate selector), with the in-process simulated
model (``fhs.plan.simulated``: schema-valid answers, no latency, Qwen-vocabulary
token counts) behind the response cache and the verdict ledger. It prints each
run's peak resident memory (``ru_maxrss``), the size of its records, and the
difference per fact between the two peaks. Both runs load the same dataset, so
the difference is what the run itself adds per fact. ``--arenas`` compares C heap
settings side by side (``fhs.run.runner.HEAP_ARENAS``; ``glibc`` is glibc's default),
``--tcache`` runs with and without the threads' own caches of freed blocks
(``fhs.core.glibc_heap.without_thread_caches``; the chapters turn them off for a profile
with more than one fact in flight).

    python -m dev.bench_memory                       # ixbrl-dev, 200 and 3000 facts
    python -m dev.bench_memory --facts 100,500 --dataset fincl
    python -m dev.bench_memory --arenas glibc,1      # the runner's heap limit against none
    python -m dev.bench_memory --facts 200,3000,6000 # does the growth level off?
    python -m dev.bench_memory --tcache on,off       # threads' block caches kept against turned off

Needs ``FHS_DATA``; the runs and caches go to a temporary folder and are removed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path


def child(dataset: str, n: int, profile: str, scratch: Path, arenas: str) -> dict:
    """One run in this process; what it measured."""
    from fhs.data.sampling import sample_by_context
    from fhs.llm.cache import CachedLLM, ResponseCache
    from fhs.method.prompting import prompt_counter
    from fhs.plan.simulated import SimulatedBackend
    from fhs.run import runner
    from fhs.run.inputs import ModelChoice, load_experiment
    from fhs.run.spec import RunSpec

    runner.HEAP_ARENAS = None if arenas == "glibc" else int(arenas)
    experiment = load_experiment(dataset, progress=False)
    facts = sample_by_context(experiment.facts, n)
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model = ModelChoice.resolve(profile, cache=scratch / "responses.sqlite")
    model._llm = CachedLLM(SimulatedBackend(), ResponseCache(scratch / "responses.sqlite"))
    spec = RunSpec(dataset=dataset, method="fhs", model=model)
    started = time.perf_counter()
    outcome = spec.execute(experiment, facts, out_dir=scratch / "run", progress=False, workers=model.profile.workers)
    return {"facts": len(facts), "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "loaded_kb": loaded, "seconds": round(time.perf_counter() - started, 1),
            "records_bytes": (scratch / "run" / "records.jsonl").stat().st_size,
            "llm_calls": outcome.metrics["llm_calls"], "n_facts": outcome.metrics["n_facts"],
            # the token-count memo of fhs.llm.line_tokens fills up to its cap, then starts afresh: bounded, not per fact
            "memo_lines": prompt_counter().lines_held, "memo_cap": prompt_counter().max_lines}


def measure(dataset: str, n: int, profile: str, arenas: str, tcache: str) -> dict:
    from fhs.core.glibc_heap import without_thread_caches

    env = dict(os.environ) if tcache == "on" else without_thread_caches(os.environ)
    with tempfile.TemporaryDirectory(prefix="fhs-memory-") as scratch:
        done = subprocess.run([sys.executable, __file__, "--child", str(n), "--dataset", dataset,
                               "--profile", profile, "--scratch", scratch, "--arenas", arenas],
                              capture_output=True, text=True, check=False, env=env)
        if done.returncode != 0:
            sys.exit(f"the {n}-fact run failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="ixbrl-dev")
    parser.add_argument("--facts", default="200,3000",
                        help="sample sizes (context-level samples), two or more: the growth between each pair")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--arenas", default=None,
                        help="comma-separated C heap limits to compare: glibc (its default) or a number "
                             "(default: the runner's own, HEAP_ARENAS)")
    parser.add_argument("--tcache", default=None,
                        help="comma-separated: on (glibc's per-thread caches of freed blocks) and/or off "
                             "(default: what the chapters give this profile, off when it runs several facts at once)")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.dataset, args.child, args.profile, Path(args.scratch), args.arenas)))
        return
    sizes = sorted(int(n) for n in args.facts.split(","))
    from fhs.run.profiles import get_profile
    from fhs.run.runner import HEAP_ARENAS

    arenas_settings = args.arenas.split(",") if args.arenas else [str(HEAP_ARENAS or "glibc")]
    several = get_profile(args.profile).workers > 1
    tcache_settings = args.tcache.split(",") if args.tcache else ["off" if several else "on"]
    if set(tcache_settings) - {"on", "off"}:
        sys.exit(f"--tcache takes on and/or off, not {args.tcache!r}")
    settings = [(arenas, tcache) for arenas in arenas_settings for tcache in tcache_settings]
    # one subprocess per setting and size, as many at once as there are cores (each run is
    # bound by one Python interpreter); a peak is its own process's, so they do not mix
    jobs = [(setting, n) for n in reversed(sizes) for setting in settings]
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        done = dict(zip(jobs, pool.map(lambda job: measure(args.dataset, job[1], args.profile, *job[0]), jobs)))
    growth = {}
    for setting in settings:
        name = f"C heaps {setting[0]}, thread caches {setting[1]}"
        print(name)
        growth[name] = report([done[setting, n] for n in sizes])
    if len(settings) > 1:
        first = next(iter(growth.values()))
        print("per-fact growth side by side: " + "; ".join(
            f"{name}: {kb:.2f} KB ({kb / first:.2f}x)" for name, kb in growth.items()))


def report(runs: list[dict]) -> float:
    """Print the runs' peaks and the growth per added fact between each pair; the first to last, in KB."""
    for run in runs:
        print(f"{run['facts']:>6} facts: peak {run['peak_kb'] / 1024:8.1f} MiB (after loading the data "
              f"{run['loaded_kb'] / 1024:.1f} MiB), records {run['records_bytes'] / 1e6:8.1f} MB "
              f"({run['records_bytes'] / run['facts'] / 1e3:.1f} KB a fact), {run['llm_calls']} model calls, "
              f"{run['seconds']} s; token-count memo {run['memo_lines']:,} of at most {run['memo_cap']:,} lines")
    pairs = list(zip(runs, runs[1:])) + ([(runs[0], runs[-1])] if len(runs) > 2 else [])
    for small, large in pairs:
        grown = (large["peak_kb"] - small["peak_kb"]) * 1024
        extra = large["facts"] - small["facts"]
        print(f"peak difference {small['facts']} -> {large['facts']} facts: {grown / 2**20:.1f} MiB over {extra} "
              f"more facts = {grown / extra / 1e3:.2f} KB a fact")
    print(f"(records: {runs[-1]['records_bytes'] / runs[-1]['facts'] / 1e3:.1f} KB a fact on disk)")
    return (runs[-1]["peak_kb"] - runs[0]["peak_kb"]) * 1024 / (runs[-1]["facts"] - runs[0]["facts"]) / 1e3


if __name__ == "__main__":
    main()
