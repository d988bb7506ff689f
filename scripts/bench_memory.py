"""Peak memory of one FHS run over a small and a large sample: does it grow with the number of facts?

Each size runs in a subprocess of its own (so one run's peak cannot hide the
other's) through the engine behind ``fhs run --method fhs``
(``fhs.run.spec.RunSpec.execute``) at a profile's settings (default ``paper``:
the paper's budgets, a 200-candidate selector), with the in-process simulated
model (``fhs.llm.simulated``: schema-valid answers, no latency, Qwen-vocabulary
token counts) behind the response cache and the verdict ledger. It prints each
run's peak resident memory (``ru_maxrss``), the size of its records, and the
difference per fact between the two peaks. Both runs load the same dataset, so
the difference is what the run itself adds per fact.

    python scripts/bench_memory.py                       # ixbrl-dev, 200 and 3000 facts
    python scripts/bench_memory.py --facts 100,500 --dataset fincl

Needs ``FHS_DATA``; the runs and caches go to a temporary folder and are removed.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def child(dataset: str, n: int, profile: str, scratch: Path) -> dict:
    """One run in this process; what it measured."""
    from fhs.data.sampling import sample_by_context
    from fhs.llm.cache import CachedLLM, ResponseCache
    from fhs.llm.simulated import SimulatedBackend
    from fhs.method.prompting import prompt_counter
    from fhs.run.inputs import ModelChoice, load_experiment
    from fhs.run.spec import RunSpec

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
            # the token-count memo of fhs.llm.lines fills up to its cap, then starts afresh: bounded, not per fact
            "memo_lines": prompt_counter().lines_held, "memo_cap": prompt_counter().max_lines}


def measure(dataset: str, n: int, profile: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="fhs-memory-") as scratch:
        done = subprocess.run([sys.executable, __file__, "--child", str(n), "--dataset", dataset,
                               "--profile", profile, "--scratch", scratch],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            sys.exit(f"the {n}-fact run failed:\n{done.stderr[-3000:]}")
        return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="ixbrl-dev")
    parser.add_argument("--facts", default="200,3000", help="two sample sizes (context-level samples)")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.dataset, args.child, args.profile, Path(args.scratch))))
        return
    small, large = (int(n) for n in args.facts.split(","))
    runs = [measure(args.dataset, n, args.profile) for n in (small, large)]
    for run in runs:
        print(f"{run['facts']:>6} facts: peak {run['peak_kb'] / 1024:8.1f} MiB (after loading the data "
              f"{run['loaded_kb'] / 1024:.1f} MiB), records {run['records_bytes'] / 1e6:8.1f} MB "
              f"({run['records_bytes'] / run['facts'] / 1e3:.1f} KB a fact), {run['llm_calls']} model calls, "
              f"{run['seconds']} s; token-count memo {run['memo_lines']:,} of at most {run['memo_cap']:,} lines")
    grown = (runs[1]["peak_kb"] - runs[0]["peak_kb"]) * 1024
    extra = runs[1]["facts"] - runs[0]["facts"]
    print(f"peak difference: {grown / 2**20:.1f} MiB over {extra} more facts = {grown / extra / 1e3:.2f} KB a fact "
          f"(records: {runs[1]['records_bytes'] / runs[1]['facts'] / 1e3:.1f} KB a fact on disk)")


if __name__ == "__main__":
    main()
