"""How full does the client keep a GPU server? A utilisation benchmark against the simulated server.

    python -m dev.bench_serve                                   # 100 FinCL facts, fhs, --profile paper
    python -m dev.bench_serve --fixed-latency 1 --workers 128   # a server that answers in 1 s
    python -m dev.bench_serve --compare 16                      # beside a run limited to 16 in flight
    python -m dev.bench_serve --pool                            # the HTTP client alone: pool sizes

It starts the simulated server (``fhs.plan.sim_server``) on a free port (its own process), runs
``fhs run`` against it in another process with a fresh cache and run folder,
and reads the server's ``/stats``. It prints the workload, the wall time, the
peak and mean requests in flight while work remained (first arrival to last
answer), the share of that time with at least 64 in flight, and the
utilisation: the mean requests running over the server's ``--max-num-seqs``.
With ``--compare N`` the same workload runs again at ``--max-in-flight N``, the
ratios are printed side by side, and each fact's gold rank and selection are
compared between the two runs (they must not depend on the concurrency). Absolute seconds depend on the machine's
load; compare ratios from one invocation.

``--pool`` measures only the HTTP client: the same requests through
``OpenAIBackend`` with one connection pool for all requests in flight and with
pools of 16 (``fhs.llm.openai.CONNECTIONS_PER_CLIENT``), CPU seconds per request.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fhs.plan.sim_server import running, stats

ROOT = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_args(args: argparse.Namespace) -> list[str]:
    options = ["--max-num-seqs", str(args.max_num_seqs), "--time-scale", str(args.time_scale),
               "--prefill-tps", str(args.prefill_tps), "--decode-tps", str(args.decode_tps)]
    if args.fixed_latency is not None:
        options += ["--fixed-latency", str(args.fixed_latency)]
    return options


def answers(run_folder: Path) -> list[tuple]:
    """What the run decided per fact (id, gold rank, selected concept), in id order: the same at any concurrency."""
    rows = []
    for path in sorted(run_folder.rglob("records.jsonl")):
        with path.open(encoding="utf-8") as lines:
            rows += [(r["id"], r.get("rank"), json.dumps(r.get("selected"))) for r in map(json.loads, lines)]
    return sorted(rows)


def run_once(args: argparse.Namespace, max_in_flight: int) -> dict:
    """One `fhs run` against a fresh simulator; the server's stats, the run's wall time and its answers."""
    with tempfile.TemporaryDirectory(prefix="fhs-bench-serve-") as scratch, \
            running(free_port(), *server_args(args)) as url:
        command = [sys.executable, "-m", "fhs.cli", "run", "--dataset", args.dataset, "--method", args.method,
                   "--profile", args.profile, "--limit", str(args.facts), "--base-url", url,
                   "--max-in-flight", str(max_in_flight), "--out", str(Path(scratch) / "run"),
                   "--cache", str(Path(scratch) / "responses.sqlite"), "--quiet"]
        if args.workers:
            command += ["--workers", str(args.workers)]
        if args.data:
            command += ["--data", args.data]
        started = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"fhs run failed ({done.returncode}):\n{done.stderr[-3000:]}")
        summary = stats(url)
        summary["answers"] = answers(Path(scratch) / "run")
    summary["run_wall_seconds"] = round(wall, 1)
    summary["max_in_flight_setting"] = max_in_flight
    return summary


def report(summary: dict) -> str:
    at_least = summary["share_of_time_in_flight_at_least"]
    return (f"  max-in-flight {summary['max_in_flight_setting']}: {summary['requests']} requests, run "
            f"{summary['run_wall_seconds']} s (server busy {summary['busy_seconds']} s); in flight: peak "
            f"{summary['max_in_flight']}, mean {summary['mean_in_flight']}, >= 64 for "
            f"{100 * at_least.get('64', 0):.0f}% of the time; utilisation {100 * summary['utilisation']:.1f}% "
            f"of {summary['max_num_seqs']} sequences")


def bench_pool(args: argparse.Namespace) -> None:
    """CPU per request of the HTTP client: one pool for every connection vs pools of 16."""
    import fhs.llm.openai as openai_module
    from fhs.llm.contract import Message, Request

    requests = [Request(messages=(Message("user", f"Value: {i}\nSource context: revenue {i}"),), sample_index=i)
                for i in range(args.pool_requests)]
    results = {}
    with running(free_port(), "--fixed-latency", "0.2") as url:
        for label, per_client in (("one pool", 10 ** 6), ("pools of 16", openai_module.CONNECTIONS_PER_CLIENT)):
            openai_module.CONNECTIONS_PER_CLIENT = per_client
            backend = openai_module.OpenAIBackend([url], "bench", max_in_flight=args.max_in_flight)
            backend.complete(requests[:args.max_in_flight])  # connect and warm up
            cpu, wall = time.process_time(), time.perf_counter()
            backend.complete(requests)
            results[label] = ((time.process_time() - cpu) / len(requests) * 1000, time.perf_counter() - wall)
            backend.close()
    print(f"HTTP client, {len(requests)} requests, {args.max_in_flight} in flight, 0.2 s each:")
    for label, (ms, wall) in results.items():
        print(f"  {label:<12} {ms:.2f} ms CPU a request, {wall:.2f} s")
    one, sharded = results["one pool"][0], results["pools of 16"][0]
    print(f"  ratio: one pool costs {one / sharded:.1f}x the CPU of pools of 16")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", default="fincl")
    parser.add_argument("--method", default="fhs")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--facts", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None, help="facts at once (default: the profile's)")
    parser.add_argument("--max-in-flight", type=int, default=128)
    parser.add_argument("--compare", type=int, default=None, metavar="N", help="also run at --max-in-flight N")
    parser.add_argument("--max-num-seqs", type=int, default=256)
    parser.add_argument("--fixed-latency", type=float, default=None)
    parser.add_argument("--time-scale", type=float, default=1.0)
    parser.add_argument("--prefill-tps", type=float, default=20_000.0)
    parser.add_argument("--decode-tps", type=float, default=1_500.0)
    parser.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    parser.add_argument("--pool", action="store_true", help="measure the HTTP client's connection pools only")
    parser.add_argument("--pool-requests", type=int, default=1000)
    parser.add_argument("--json", default=None, help="also write the summaries here")
    args = parser.parse_args(argv)
    if args.pool:
        bench_pool(args)
        return 0
    latency = f"fixed {args.fixed_latency:g} s" if args.fixed_latency is not None else \
        f"prefill {args.prefill_tps:g} tok/s, decode {args.decode_tps:g} tok/s, time scale {args.time_scale:g}"
    print(f"{args.facts} {args.dataset} facts, --method {args.method} --profile {args.profile}"
          f"{f' --workers {args.workers}' if args.workers else ''}; simulated server: "
          f"max-num-seqs {args.max_num_seqs}, {latency}")
    summaries = [run_once(args, args.max_in_flight)]
    if args.compare:
        summaries.append(run_once(args, args.compare))
    for summary in summaries:
        print(report(summary))
    if len(summaries) == 2:
        first, second = summaries
        print(f"  ratios ({first['max_in_flight_setting']} vs {second['max_in_flight_setting']}): mean in flight "
              f"{first['mean_in_flight'] / max(second['mean_in_flight'], 1e-9):.2f}x, run wall time "
              f"{first['run_wall_seconds'] / second['run_wall_seconds']:.2f}x")
        same = first["answers"] == second["answers"] and bool(first["answers"])
        print(f"  results: {len(first['answers'])} facts' ranks and selections "
              f"{'identical' if same else 'DIFFER'} at {first['max_in_flight_setting']} and "
              f"{second['max_in_flight_setting']} in flight")
        if not same:
            return 1
    if args.json:
        Path(args.json).write_text(json.dumps(summaries, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
