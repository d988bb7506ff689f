"""Run methods over facts: records as they finish, then metrics.

The runner is the single place where a method's per-fact output becomes a
record on disk, so every method (and every ablation) is evaluated the same
way, and a rerun resumes from the records already written.

Several runs execute together (:func:`run_jobs`) as *fact-major* tasks: one
task per fact runs that fact's runs one after another in the order given, and
different facts run at once, up to ``workers`` of them. Runs that reuse each
other's model calls (the response cache, the verdict ledger, both keyed by
the fact's own requests and id) therefore see, for each fact, exactly what
running them one after another would have shown them, whatever the
concurrency; and a server sees the facts of every run in flight together.
Only ``workers`` tasks exist at a time, and each holds one record at a time,
so memory does not grow with the number of facts.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from tqdm import tqdm  # plain text bars: no ipywidgets warning inside notebooks

from fhs.core.glibc_heap import limit_arenas, release_free_heap
from fhs.data.facts import Fact, gold_match_of, matches_gold
from fhs.data.taxonomies.ids import unknown_gold
from fhs.llm.contract import BackendError, RequestRefused
from fhs.method.context import MethodContext
from fhs.method.prompting import prompt_counter
from fhs.method.registry import get_method
from fhs.run.evaluate import MISS, gold_rank, metrics
from fhs.run.health import failed, failed_facts, stage_health, warn_about
from fhs.run.records import RecordWriter, encoded, write_json_atomic
from fhs.run.summary import COST_FIELDS, call_totals

__all__ = ["RunJob", "RunOutcome", "run_jobs", "run_method"]


@dataclass
class RunJob:
    """One run to execute: its facts, its method in its context, and where its records go.

    ``stamp`` is the run directory's ``run-config.json`` (records of another
    stamp are refused); ``refused`` says whether facts the server refused count
    as misses or are left out of the metrics (``fhs.run.evaluate.REFUSED``); ``retry_unusable`` runs
    again the recorded facts that hold an answer no stage could use (the cache asks the model again
    for exactly those answers: it keeps them apart, ``fhs.llm.cache``).
    """

    facts: Sequence[Fact]
    method: str
    ctx: MethodContext
    out_dir: Path
    stamp: Mapping[str, Any] | None = None
    fresh: bool = False
    refused: str = MISS
    retry_unusable: bool = False


@dataclass
class RunOutcome:
    """A finished run: its metrics (metrics.json's content) and its facts' summaries, in fact order."""

    path: Path
    metrics: dict[str, Any]
    summaries: Sequence[dict] = field(default_factory=list)  # fhs.run.records.Summaries: unpacked as read


def _guarded(function):
    """``function`` where a request the server refused for good fails only its own fact."""

    def run(fact: Fact, ctx: MethodContext) -> dict:
        try:
            return function(fact, ctx)
        except RequestRefused as error:
            return {"ranking": [], "failed": " ".join(str(error).split())}

    return run


def _timed(function):
    """The method with its wall-clock seconds on the fact added to the record (Table 19).

    A fact is recorded once, so the figure is the first run's, cached replays aside.
    """

    def timed(fact: Fact, ctx: MethodContext) -> dict:
        started = time.perf_counter()
        stage = function(fact, ctx)
        stage.setdefault("wall_seconds", round(time.perf_counter() - started, 3))
        return stage

    return timed


def _record(fact: Fact, method: str, stage: dict) -> dict:
    """The record of one fact: the runner's fields (id, gold, rank, ...) and the method's stages."""
    match = gold_match_of(fact)
    record = {
        "id": fact.id,
        "context_id": fact.context_id,
        "modality": fact.modality,
        "gold": list(fact.gold),
        "method": method,
        "rank": gold_rank(stage.get("ranking", []), fact.gold, match),
        **stage,
    }
    if match != "exact":
        record["gold_match"] = match
    if "selected" in stage:
        record["correct"] = matches_gold(stage["selected"], fact.gold, match)
    return record


Task = list[tuple[int, Fact]]  # one fact's (run index, fact) pairs, in the order of the runs


def _fact_tasks(jobs: Sequence[RunJob], writers: Sequence[RecordWriter]) -> list[Task]:
    """One task per fact id still to do (not recorded, recorded as failed, or with an unusable answer
    when the job retries those), in first-seen order."""
    tasks: dict[str, Task] = {}
    for index, (job, writer) in enumerate(zip(jobs, writers)):
        seen: set[str] = set()
        for fact in job.facts:
            if fact.id in seen or (
                fact.id in writer
                and not writer.failed(fact.id)
                and not (job.retry_unusable and writer.unusable(fact.id))
            ):
                continue
            seen.add(fact.id)
            tasks.setdefault(fact.id, []).append((index, fact))
    return list(tasks.values())


# facts finished between two returns of the C heap's free pages (fhs.core.glibc_heap)
TRIM_EVERY = 64
# C heaps (glibc arenas) the facts' threads share; None leaves glibc's default (eight per core).
# The threads run Python, which allocates holding the GIL, so more heaps buy little speed and
# each keeps free pages of its own: one heap grows least per fact (dev/bench_memory.py
# --arenas glibc,1,2 measures it)
HEAP_ARENAS: int | None = 1


def _as_finished(tasks: Iterable[Task], run: Callable[[Task], int], workers: int) -> Iterator[int]:
    """``run(task)`` for every task, at most ``workers`` at once; results as tasks finish.

    Tasks are handed to the pool only as others finish, so no more than
    ``workers`` exist (and hold results) at a time. If one fails, the error
    comes out here, tasks not started are dropped and those running finish
    (their records are written; the rerun skips them).
    """
    if workers <= 1:
        for task in tasks:
            yield run(task)
        return
    queue = iter(tasks)
    if HEAP_ARENAS is not None:
        limit_arenas(HEAP_ARENAS)
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        pending = {pool.submit(run, task) for task in islice(queue, workers)}
        finished = 0
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            results = [future.result() for future in done]
            pending |= {pool.submit(run, task) for task in islice(queue, len(done))}
            finished += len(done)
            if finished >= TRIM_EVERY:  # pages freed between live blocks go back to the system
                finished = 0
                release_free_heap()
            yield from results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


# LLM-free runs over this many facts or more (a full test split: 53,523 iXBRL facts) split
# them between processes, one per core; below it forking costs more than it saves.
FORK_MIN_FACTS = 2_000
PROCESSES_ENV = "FHS_RUN_PROCESSES"  # processes for such runs (default: one per core; 1 turns it off)
_FORKED: tuple[Sequence[Task], Callable[[Task], list]] | None = None  # what forked children compute


def run_processes(jobs: Sequence[RunJob], n_facts: int, processes: int | None = None) -> int:
    """Processes for these runs: one per core where no run asks a model (or only one that answers
    in pure Python and says it forks safely, the oracle) and every retriever forks safely.

    A model (in process or over HTTP) already keeps the cores or a server busy. BM25 with the
    coverage term is pure Python and numpy on one core, so chapter 1's full-split runs would
    leave the other core idle; a dense query (one short text through the encoder, one
    matrix-vector product) keeps two threads barely busy. A retriever says whether a forked
    copy searches alike (``fork_safe``). Each fact is computed alone, so the records are the
    same either way.
    """
    if not sys.platform.startswith("linux"):  # elsewhere fork is unsafe with the system's libraries
        return 1
    if processes is None:
        processes = int(os.environ.get(PROCESSES_ENV, "0")) or len(os.sched_getaffinity(0))
    forkable = all(
        (job.ctx.llm is None or getattr(job.ctx.llm, "fork_safe", False))
        and getattr(job.ctx.retriever, "fork_safe", False)
        for job in jobs
    )
    return processes if processes > 1 and n_facts >= FORK_MIN_FACTS and forkable else 1


def _compute_slice(bounds: tuple[int, int]) -> list:
    assert _FORKED is not None  # set by _forked before the children fork
    tasks, compute = _FORKED
    return [item for task in tasks[bounds[0] : bounds[1]] for item in compute(task)]


def _forked(tasks: Sequence[Task], compute: Callable[[Task], list], processes: int) -> Iterator[list]:
    """``compute(task)`` for every task in ``processes`` forked children; results in task order.

    The children inherit the tasks and the built indexes at the fork (nothing is pickled
    but slice bounds going out and finished records coming back), and the parent writes
    every record, in the order one process would have written them.
    """
    global _FORKED
    size = max(1, min(256, len(tasks) // (processes * 8) or 1))
    slices = [(start, min(start + size, len(tasks))) for start in range(0, len(tasks), size)]
    _FORKED = (tasks, compute)
    try:
        with warnings.catch_warnings():
            # Python 3.12+ warns on fork when the parent has threads (a notebook kernel's); the
            # children only score facts and return, and never touch those threads' locks.
            warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
            pool = mp.get_context("fork").Pool(processes)
        try:
            yield from pool.imap(_compute_slice, slices)
        finally:
            pool.terminate()
            pool.join()
    finally:
        _FORKED = None


def _warm_up(jobs: Sequence[RunJob]) -> None:
    """Load the token counter and build (or read) the jobs' indexes before the facts start.

    Every fact needs both soon after its first answer; built on first use, the
    facts in flight would wait for them one after another, holding the GIL
    from each other, with the server idle.
    """
    if any(job.ctx.llm is not None for job in jobs):
        prompt_counter()
    retrievers = (getattr(job.ctx, "retriever", None) for job in jobs)
    for retriever in {id(r): r for r in retrievers if r is not None}.values():
        if hasattr(retriever, "warm_up"):
            retriever.warm_up()


def run_jobs(
    jobs: Sequence[RunJob], *, workers: int = 1, progress: bool = True, processes: int | None = None
) -> list[RunOutcome]:
    """Execute several runs together (fact-major, ``workers`` facts at once); one outcome per job.

    LLM-free runs over many facts are split between ``processes`` (default: one per core;
    :func:`run_processes` says when), with the records one process would write.

    ``llm_calls``/``cache_hits``/tokens in each run's metrics count what THIS
    invocation did (a fact recorded by an earlier run costs nothing now);
    ``per_fact`` averages the cost over every record, cached or not, for the
    cost tables; ``wall_seconds`` is the time of the whole invocation. A fact
    whose request the server refused is recorded as failed (and retried by
    the next run) and counted as the job's ``refused`` policy says.
    """
    paths = [Path(job.out_dir).resolve() for job in jobs]
    if len(set(paths)) != len(paths):
        raise ValueError("two runs of one batch write to the same run directory")
    started = time.perf_counter()
    functions = [_timed(_guarded(get_method(job.method))) for job in jobs]
    writers: list[RecordWriter] = []
    try:
        for job in jobs:
            writers.append(RecordWriter(Path(job.out_dir) / "records.jsonl", config=job.stamp, fresh=job.fresh))
        tasks = _fact_tasks(jobs, writers)
        total = sum(len(task) for task in tasks)
        forks = run_processes(jobs, total, processes)
        if (workers > 1 or forks > 1) and tasks:
            _warm_up(jobs)
        # what this invocation added to each run: its facts' model costs summed, and their number
        added = [NewFacts() for _ in jobs]

        def compute(task: Task) -> list[tuple[int, tuple[str, bytes, dict]]]:
            return [
                (index, encoded(_record(fact, jobs[index].method, functions[index](fact, jobs[index].ctx))))
                for index, fact in task
            ]

        def write(results: list[tuple[int, tuple[str, bytes, dict]]]) -> int:
            for index, record in results:
                added[index].add(writers[index].append(*record))
            return len(results)

        label = jobs[0].method if len(jobs) == 1 else f"{len(jobs)} runs"
        with tqdm(total=total, desc=label, unit="fact", disable=not progress or not total, leave=False) as bar:
            if forks > 1:
                for results in _forked(tasks, compute, forks):
                    bar.update(write(results))
            else:
                for done in _as_finished(tasks, lambda task: write(compute(task)), workers):
                    bar.update(done)
        wall = round(time.perf_counter() - started, 3)
        return [_finish(job, writer, new, wall) for job, writer, new in zip(jobs, writers, added)]
    finally:
        for writer in writers:
            writer.close()


class AllFactsFailed(BackendError):
    """Every fact of a run failed: its metrics (each failure's reason; not written to disk) measure nothing."""

    def __init__(self, message: str, metrics: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.metrics = dict(metrics)


class NewFacts:
    """The model costs of the facts one invocation added to a run, summed as they finish (thread-safe)."""

    def __init__(self) -> None:
        self.count = 0
        self.cost = dict.fromkeys(COST_FIELDS, 0)
        self._lock = threading.Lock()

    def add(self, summary: Mapping[str, Any]) -> None:
        with self._lock:
            self.count += 1
            for name, value in summary["cost"].items():
                self.cost[name] += value


def _finish(job: RunJob, writer: RecordWriter, new: NewFacts, wall_seconds: float) -> RunOutcome:
    """metrics.json of one run, from its facts' summaries (no record is read again)."""
    ids = list(dict.fromkeys(fact.id for fact in job.facts))
    summaries = writer.summaries(ids)  # packed: each pass below unpacks one summary at a time
    n_ran = sum(not failed(s) for s in summaries)
    # Acc. and its basis (selector pick or rank 1) come from fhs.run.evaluate, as in the chapters
    result: dict[str, Any] = {"method": job.method, **metrics(summaries, refused=job.refused)}
    totals = call_totals(s for s in summaries if not failed(s))
    result.update(call_totals([{"cost": new.cost}]))
    result["n_new"] = new.count
    result["wall_seconds"] = wall_seconds
    n = max(n_ran, 1)
    result["per_fact"] = {
        "llm_calls": (totals["llm_calls"] + totals["cache_hits"]) / n,
        "tokens_in": totals["tokens_in"] / n,
        "tokens_out": totals["tokens_out"] / n,
        "model_seconds": totals["recorded_seconds"] / n,
    }
    stages = stage_health(summaries)
    result["parse_failures"] = {name: block["parse_failures"] for name, block in stages.items()}
    result["truncations"] = {name: block["truncations"] for name, block in stages.items()}
    result["fallbacks"] = {name: block["fallbacks"] for name, block in stages.items()}
    result["stages"] = stages
    result["failed_facts"] = failed_facts(summaries)
    unknown = unknown_gold(job.facts, job.ctx.taxonomy)
    result["unknown_gold"] = {"count": len(unknown), "ids": unknown[:50]}
    warn_about(stages, result["failed_facts"], len(summaries), refused=job.refused, in_process=_in_process(job.ctx.llm))
    if job.stamp:
        result["config"] = dict(job.stamp)
    if summaries and not n_ran:  # every fact failed: a recall of 0.0 would be a metric of nothing, not written
        reasons = result["failed_facts"]
        raise AllFactsFailed(
            f"all {len(summaries)} facts failed, so there is no metric to report "
            f"(e.g. {reasons['ids'][0]}: {reasons['reasons'][reasons['ids'][0]][:160]})",
            result,
        )
    write_json_atomic(Path(job.out_dir) / "metrics.json", result)
    return RunOutcome(Path(job.out_dir), result, summaries)


def _in_process(llm) -> bool:
    """Whether the run's model is llama.cpp inside this process (under the response cache's wrapper)."""
    for _ in range(4):
        if llm is None:
            return False
        if type(llm).__module__.startswith("fhs.llm.llama_cpp"):
            return True
        llm = getattr(llm, "backend", None)
    return False


def run_method(
    facts: Sequence[Fact],
    method: str,
    ctx: MethodContext,
    out_dir: str | Path,
    *,
    run_config: Mapping[str, Any] | None = None,
    progress: bool = True,
    workers: int = 1,
    fresh: bool = False,
    refused: str = MISS,
    retry_unusable: bool = False,
) -> dict:
    """Run ``method`` on every fact not yet recorded in ``out_dir``; return metrics.json's content.

    One run of :func:`run_jobs` (see there for what the metrics count);
    ``workers`` facts are in flight at once.
    """
    job = RunJob(
        facts, method, ctx, Path(out_dir), stamp=run_config, fresh=fresh, refused=refused, retry_unusable=retry_unusable
    )
    return run_jobs([job], workers=workers, progress=progress)[0].metrics
