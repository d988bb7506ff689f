#!/usr/bin/env python
"""The dress rehearsal of the paper profile: its chapters against the simulated server, then a report.

    python scripts/rehearsal.py [--fraction 0.02] [--port 8017] [--out _build/rehearsal]
        [--server fhs.plan.sim_server] [--server-args "--time-scale 100"] [--chapter STEM ...]
        [--kill-chapter 02_main_results] [--kill-after 0.4] [--no-kill] [-p NAME=VALUE ...]
    python scripts/rehearsal.py report [--out _build/rehearsal]

``make rehearsal`` runs the first form. In a copy of the checkout (its own book/,
runs/ and .fhs-cache/, and its own ``FHS_CACHE`` for what the LLM relocator answers, so the
user's build and caches are left alone) it:

1. sizes the same run with ``fhs plan --profile paper --fraction F --json --build-dense`` (the
   dense and hybrid runs planned on the real retrievers, whose embeddings the chapters then reuse);
2. starts the simulated OpenAI-compatible server (``python -m fhs.plan.sim_server``) with a
   request log;
3. executes each chapter with the paper profile on the fraction ``F`` of every LLM
   sample (``-p llm_fraction=F``), one chapter at a time, measuring the project's
   own CPU seconds and peak memory (the runner and its kernel, not the server);
4. runs one chapter again in fresh folders, kills it with SIGKILL when the server
   has answered ``--kill-after`` of its planned requests, and runs it again to the end;
5. stops the server and prints the report: per chapter the requests and tokens the
   server saw against the plan's (ratio), CPU seconds per fact, peak memory, cache
   and records on disk; and the kill check (nothing lost: every run's records are
   complete; no request asked twice, except those in flight when the process died).

``report`` prints the report again from the files in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def server_command(server: str) -> list[str]:
    """How to start ``server``: a .py file of this checkout, or a module (``fhs.plan.sim_server``); [] if neither."""
    if server.endswith(".py"):
        path = (ROOT / server).resolve()
        return [sys.executable, str(path)] if path.is_file() else []
    import importlib.util

    try:
        found = importlib.util.find_spec(server) is not None
    except ModuleNotFoundError:  # a missing parent package
        found = False
    return [sys.executable, "-m", server] if found else []


def copy_checkout(target: Path) -> None:
    """The tracked and unignored files of this checkout, copied (not the build, runs or caches)."""
    import shutil

    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / name.decode()
        if source.is_file():
            (target / name.decode()).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name.decode())


def own_cache(target: Path) -> Path:
    """A project cache (``FHS_CACHE``) for the rehearsal alone, so no simulated answer reaches the user's.

    The LLM relocator's answers live there (``relocation/*--llm-<model>-*.jsonl``), named by the
    served model's name: in the user's cache, a rehearsal's stand-in answers would be reused by the
    real run. What is built from the data alone (taxonomies, indexes, parsed filings, embeddings,
    models, the deterministic relocations) is linked from the user's cache, not rebuilt.
    """
    import shutil

    from fhs.core.files import cache_dir

    source = cache_dir()
    if target.exists():
        shutil.rmtree(target)
    (target / "relocation").mkdir(parents=True)
    for entry in source.iterdir() if source.is_dir() else []:
        if entry.name == "relocation":
            for item in entry.glob("*.jsonl"):
                if "--llm-" not in item.name:
                    shutil.copy2(item, target / "relocation" / item.name)
        elif entry.name != "llm":  # llm/: answers and verdicts of a model
            (target / entry.name).symlink_to(entry.resolve())
    return target


def lines(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:  # a line cut by the server's own end
            continue
    return out


def disk_mb(path: Path, suffixes: tuple[str, ...] = ()) -> float:
    total = 0
    for item in path.rglob("*") if path.exists() else []:
        if item.is_file() and (not suffixes or item.name.endswith(suffixes)):
            total += item.stat().st_size
    return round(total / 2**20, 2)


def identity(entry: dict) -> tuple:
    """What makes two logged requests the same request (its prompt, sampling settings and seed)."""
    return (entry.get("prompt_sha256"), entry.get("seed"), entry.get("temperature"), entry.get("max_tokens"))


def cache_entries(cache: Path) -> int:
    path = cache / "responses.sqlite"
    if not path.is_file():
        return 0
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])


def measure(argv: list[str], cwd: Path, env: dict, out: Path) -> dict:
    """Run ``argv`` in a child that reports its descendants' CPU seconds and peak memory."""
    probe = [sys.executable, str(Path(__file__).resolve()), "measure", "--json", str(out), "--", *argv]
    started = time.perf_counter()
    done = subprocess.run(probe, cwd=cwd, env=env)
    result = json.loads(out.read_text()) if out.is_file() else {"returncode": done.returncode}
    result["wall_seconds"] = round(time.perf_counter() - started, 1)
    return result


def cmd_measure(args: argparse.Namespace) -> int:
    done = subprocess.run(args.argv)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    Path(args.json).write_text(json.dumps({"returncode": done.returncode,
                                           "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
                                           "peak_rss_mb": round(usage.ru_maxrss / 1024, 1)}))
    return done.returncode


def wait_for(url: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit(f"rehearsal: the server did not answer {url} within {seconds:.0f} s")


def chapter_command(chapter: str, base_url: str, fraction: float, extra: list[str]) -> list[str]:
    params = [f"base_url={base_url}", f"llm_fraction={fraction}", *extra]
    return [sys.executable, "scripts/run_notebooks.py", "--profile", "paper", "--only", chapter, "--force",
            "--no-progress", *[arg for p in params for arg in ("-p", p)]]


def kill_check(work: Path, env: dict, out: Path, chapter: str, base_url: str, fraction: float,
               extra: list[str], planned: int, kill_after: float, log: Path, uninterrupted: int | None) -> dict:
    """The chapter in fresh folders, killed with SIGKILL part-way, then run again to the end."""
    folders = [f"runs_dir=runs-kill", f"cache_dir=.fhs-cache-kill"]
    env = {**env, "FHS_CACHE": str(own_cache(out / "fhs-cache-kill"))}  # as empty of answers as the first run's
    argv = chapter_command(chapter, base_url, fraction, [*extra, *folders])
    first = len(lines(log))
    threshold = first + max(1, int(kill_after * planned))
    process = subprocess.Popen(argv, cwd=work, env=env, start_new_session=True,
                               stdout=open(out / f"kill-{chapter}.log", "w"), stderr=subprocess.STDOUT)
    while process.poll() is None and len(lines(log)) < threshold:
        time.sleep(0.2)
    killed = process.poll() is None
    at_kill = len(lines(log))
    if killed:  # the runner and every process under it (the kernel runs in a session of its own)
        for pid in [process.pid, *descendants(process.pid)]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        process.wait()
    time.sleep(3)  # requests in flight when the client died still finish (and are logged) on the server
    after_kill = len(lines(log))
    resumed = subprocess.run(argv, cwd=work, env=env, stdout=open(out / f"resume-{chapter}.log", "w"),
                             stderr=subprocess.STDOUT)
    entries = lines(log)[first:]
    cut = at_kill - first
    seen: Counter = Counter(identity(e) for e in entries)
    twice = [key for key, n in seen.items() if n > 1]
    before = {identity(e) for e in entries[:cut]}
    lost = [key for key in twice if key in before]  # answered before the kill, asked again after it
    records_kill = {p.parent.relative_to(work / "runs-kill"): sum(1 for _ in open(p))
                    for p in (work / "runs-kill").rglob("records.jsonl")}
    records_main = {p.parent.relative_to(work / "runs"): sum(1 for _ in open(p))
                    for p in (work / "runs").rglob("records.jsonl")}
    missing = {str(k): (v, records_kill.get(k, 0)) for k, v in records_main.items()
               if k in records_kill and records_kill[k] < v}
    return {"chapter": chapter, "killed": killed, "requests_before_kill": cut,
            "in_flight_at_kill": after_kill - at_kill, "requests": len(entries), "distinct_requests": len(seen),
            "distinct_requests_uninterrupted": uninterrupted,
            "asked_twice": len(twice), "asked_twice_although_answered_before_the_kill": len(lost),
            "cache_entries": cache_entries(work / ".fhs-cache-kill"), "resume_returncode": resumed.returncode,
            "run_folders": len(records_kill), "run_folders_short_of_the_uninterrupted_run": missing}


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), read from /proc."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def plan_by_chapter(plan: dict) -> dict[str, dict]:
    """The plan's requests, tokens and facts per chapter (facts: every dataset the chapter sends to a model)."""
    out: dict[str, dict] = {}
    for row in plan["rows"]:
        block = out.setdefault(row["chapter"], {"requests": 0, "prompt_tokens": 0, "output_tokens": 0, "facts": {}})
        for key in ("requests", "prompt_tokens", "output_tokens"):
            block[key] += row[key]
        if row["asks_model"]:
            block["facts"][row["dataset"]] = max(block["facts"].get(row["dataset"], 0), row["facts"])
    return out


def report(out: Path) -> str:
    data = json.loads((out / "rehearsal.json").read_text())
    plan = json.loads((out / "plan.json").read_text())
    planned = plan_by_chapter(plan)
    lines_ = [f"rehearsal of the paper profile on {data['fraction']:g} of every LLM sample "
              f"(server: {data['server']} {data['server_args']}); plan: fhs plan --profile paper --fraction "
              f"{data['fraction']:g} --dry-run-facts {data['plan_sample']}", "",
              f"{'chapter':<24}{'requests':>10}{'/plan':>7}{'prompt tok':>12}{'/plan':>7}{'output tok':>11}"
              f"{'/plan':>7}{'facts':>7}{'CPU s':>8}{'CPU s/fact':>11}{'peak MB':>9}{'cache MB':>9}{'records MB':>11}"]

    def ratio(a: float, b: float) -> str:
        return f"{a / b:.2f}" if b else ("-" if not a else "inf")

    for chapter, got in data["chapters"].items():
        want = planned.get(chapter, {"requests": 0, "prompt_tokens": 0, "output_tokens": 0, "facts": {}})
        facts = sum(want["facts"].values()) or 1
        lines_.append(f"{chapter:<24}{got['requests']:>10,}{ratio(got['requests'], want['requests']):>7}"
                      f"{got['prompt_tokens']:>12,}{ratio(got['prompt_tokens'], want['prompt_tokens']):>7}"
                      f"{got['output_tokens']:>11,}{ratio(got['output_tokens'], want['output_tokens']):>7}"
                      f"{facts:>7,}{got['cpu_seconds']:>8.0f}{got['cpu_seconds'] / facts:>11.2f}"
                      f"{got['peak_rss_mb']:>9.0f}{got['cache_mb']:>9.1f}{got['records_mb']:>11.1f}"
                      + ("" if got["returncode"] == 0 else f"  FAILED ({got['returncode']})"))
    total = {k: sum(c[k] for c in data["chapters"].values()) for k in ("requests", "prompt_tokens", "output_tokens")}
    wanted = {k: sum(planned[c][k] for c in data["chapters"] if c in planned) for k in total}
    lines_ += ["", "all chapters: " + ", ".join(f"{k} {total[k]:,} (plan {wanted[k]:,}, ratio {ratio(total[k], wanted[k])})"
                                               for k in total),
               "CPU s: the runner and its kernel (the provenance page included), not the server; peak MB: the "
               "largest of them; cache and records: on disk after the chapter (.fhs-cache/, runs/)"]
    kill = data.get("kill")
    if kill:
        ok = (kill["resume_returncode"] == 0 and not kill["run_folders_short_of_the_uninterrupted_run"]
              and kill["asked_twice_although_answered_before_the_kill"] == 0
              and kill["asked_twice"] <= kill["in_flight_at_kill"]
              and kill["distinct_requests_uninterrupted"] in (None, kill["distinct_requests"]))
        lines_ += ["", f"kill -9 and resume ({kill['chapter']}): {'OK' if ok else 'PROBLEM'}",
                   f"  killed after {kill['requests_before_kill']:,} answered requests, {kill['in_flight_at_kill']} in "
                   f"flight; after the resume {kill['requests']:,} requests, {kill['distinct_requests']:,} distinct "
                   f"(the uninterrupted run from an empty cache: {kill['distinct_requests_uninterrupted'] or 'not comparable'}"
                   f"), {kill['cache_entries']:,} in the cache",
                   f"  asked twice: {kill['asked_twice']} (in flight at the kill: {kill['in_flight_at_kill']}; asked "
                   f"again although answered before the kill: {kill['asked_twice_although_answered_before_the_kill']})",
                   f"  run folders: {kill['run_folders']}, short of the uninterrupted run: "
                   f"{kill['run_folders_short_of_the_uninterrupted_run'] or 'none'}"]
    return "\n".join(lines_)


def cmd_run(args: argparse.Namespace) -> int:
    out = Path(args.out).resolve()
    work = out / "checkout"
    if work.exists():
        import shutil

        shutil.rmtree(work)
    out.mkdir(parents=True, exist_ok=True)
    copy_checkout(work)
    env = {**os.environ, "PYTHONPATH": str(work), "PYTHONUNBUFFERED": "1",
           "FHS_CACHE": str(own_cache(out / "fhs-cache"))}
    from fhs.book.registry import REGISTRY

    chapters = args.chapter or [chapter.stem for chapter in REGISTRY.planned()]  # what fhs plan sizes
    log = out / "requests.jsonl"
    log.unlink(missing_ok=True)
    base_url = f"http://127.0.0.1:{args.port}/v1"

    print(f"rehearsal: planning ({args.fraction:g} of the paper profile's LLM facts)", flush=True)
    plan_argv = [sys.executable, "-m", "fhs.cli", "plan", "--profile", "paper", "--fraction", str(args.fraction),
                 "--json", "--quiet", "--dry-run-facts", str(args.plan_sample), "--build-dense",
                 *[arg for c in chapters for arg in ("--chapter", c)]]
    with open(out / "plan.json", "w") as handle:
        if subprocess.run(plan_argv, cwd=work, env=env, stdout=handle).returncode != 0:
            raise SystemExit("rehearsal: fhs plan failed")
    plan = json.loads((out / "plan.json").read_text())

    server_argv = [*server_command(args.server), "--port", str(args.port), "--log", str(log),
                   *shlex.split(args.server_args)]
    server = subprocess.Popen(server_argv, cwd=work, env=env, stdout=open(out / "server.log", "w"),
                              stderr=subprocess.STDOUT)
    result = {"fraction": args.fraction, "server": args.server, "server_args": args.server_args,
              "plan_sample": args.plan_sample, "chapters": {}}
    try:
        wait_for(f"{base_url}/models")
        for chapter in chapters:
            print(f"rehearsal: {chapter}", flush=True)
            first = len(lines(log))
            measured = measure(chapter_command(chapter, base_url, args.fraction, args.parameter), work, env,
                               out / f"measure-{chapter}.json")
            entries = lines(log)[first:]
            result["chapters"][chapter] = {
                **measured, "requests_before": first, "requests": len(entries),
                "distinct_requests": len({identity(e) for e in entries}),
                "prompt_tokens": sum(e.get("prompt_tokens", 0) for e in entries),
                "output_tokens": sum(e.get("completion_tokens", 0) for e in entries),
                "by_purpose": dict(Counter(e.get("purpose") or "other" for e in entries)),
                "cache_mb": disk_mb(work / ".fhs-cache"), "records_mb": disk_mb(work / "runs", (".jsonl",))}
            (out / "rehearsal.json").write_text(json.dumps(result, indent=2))
        if not args.no_kill and args.kill_chapter in chapters:
            planned = plan_by_chapter(plan).get(args.kill_chapter, {}).get("requests", 0)
            print(f"rehearsal: kill -9 and resume {args.kill_chapter}", flush=True)
            main = result["chapters"][args.kill_chapter]
            # the uninterrupted run is a like-for-like count only if it, too, started from an empty cache
            fresh = main["distinct_requests"] if main["requests_before"] == 0 else None
            result["kill"] = kill_check(work, env, out, args.kill_chapter, base_url, args.fraction, args.parameter,
                                        max(planned, main["requests"]) or 100, args.kill_after, log, fresh)
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        (out / "rehearsal.json").write_text(json.dumps(result, indent=2))
    text = report(out)
    (out / "report.txt").write_text(text + "\n")
    print(text)
    failed = [c for c, r in result["chapters"].items() if r.get("returncode") != 0]
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    if argv[:1] == ["measure"]:  # measure --json FILE -- COMMAND...
        if "--" not in argv:
            parser.error("measure: --json FILE -- COMMAND...")
        split = argv.index("--")
        parser.add_argument("command")
        parser.add_argument("--json", required=True)
        args = parser.parse_args(argv[:split])
        args.argv = argv[split + 1:]
        return cmd_measure(args)
    if argv[:1] == ["report"]:
        parser.add_argument("command")
        parser.add_argument("--out", default="_build/rehearsal")
        args = parser.parse_args(argv)
        print(report(Path(args.out)))
        return 0
    parser.add_argument("--fraction", type=float, default=0.02, help="share of every LLM sample (REHEARSAL_FRACTION)")
    parser.add_argument("--port", type=int, default=8017)
    parser.add_argument("--out", default="_build/rehearsal", help="the copy of the checkout, the logs and the report")
    parser.add_argument("--server", default="fhs.plan.sim_server",
                        help="the simulated server, a module or a .py file (its CLI: --port --log ...)")
    parser.add_argument("--server-args", default="--time-scale 100", help="more arguments for the server")
    parser.add_argument("--chapter", action="append", default=None, help="rehearse only this chapter (repeatable)")
    parser.add_argument("--plan-sample", type=int, default=20, help="fhs plan's --dry-run-facts")
    parser.add_argument("--kill-chapter", default="02_main_results", help="the chapter killed and resumed")
    parser.add_argument("--kill-after", type=float, default=0.4, help="kill when this share of its requests is answered")
    parser.add_argument("--no-kill", action="store_true", help="skip the kill -9 and resume check")
    parser.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                        help="another papermill parameter for every chapter (e.g. readiness_limit=2000)")
    args = parser.parse_args(argv)
    if not 0 < args.fraction <= 1:
        parser.error("--fraction must be above 0 and at most 1")
    if not server_command(args.server):
        parser.error(f"no simulated server at {args.server} (fhs.plan.sim_server: the simulated OpenAI-compatible "
                     "server)")
    return cmd_run(args)


if __name__ == "__main__":
    sys.exit(main())
