#!/usr/bin/env python
"""Build an adapter's book: the chapters that apply to one's dataset specs, strict offline HTML.

    python scripts/adapter_book.py my.yaml other.yaml --profile smoke     # what `make book DATASETS=...` runs
    python scripts/adapter_book.py my.yaml --chapters 01_readiness_gap --out _build/mine
    python scripts/adapter_book.py my.yaml -p sample.llm_limit=2 --dry-run

Chapters run with the book folder (default _build/adapter) as their working directory, so
the companion's own pages, runs and saved values are left as they are; a second build
re-executes only what changed. The HTML lands in <out>/_build/html/index.html.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout even before `pip install -e .`

from fhs.book.adapter_book import (DEFAULT_CHAPTERS, SUMMARY, book_dataset, keep_notebook_links_inside,  # noqa: E402
                                   pages_present, plan_book, write_book_files)
from fhs.book.toc import PROFILES, Chapter, load_profiles, parse_assignment  # noqa: E402
from fhs.core.errors import InputError  # noqa: E402
from fhs.core.outputs import check_out  # noqa: E402
from fhs.data.download.fetch import target_dir  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("datasets", nargs="+", help="dataset spec files (YAML, fhs/data/datasets/spec_file.py)")
    parser.add_argument("--profile", default="cpu", help="smoke | cpu | paper ... (fhs/book/profiles.yaml)")
    parser.add_argument("--chapters", nargs="+", default=list(DEFAULT_CHAPTERS), metavar="STEM",
                        help=f"the chapters to consider (default: {' '.join(DEFAULT_CHAPTERS)})")
    parser.add_argument("--out", default="_build/adapter", help="the book's folder (default _build/adapter)")
    parser.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                        help="override a chapter parameter, as scripts/run_notebooks.py -p does")
    parser.add_argument("--force", action="store_true", help="re-execute every chapter")
    parser.add_argument("--kernel", default="python3", help="Jupyter kernel; must run this Python")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    parser.add_argument("--no-html", action="store_true", help="execute the chapters, build no HTML")
    args = parser.parse_args(argv)
    try:
        return build(args)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


def build(args: argparse.Namespace) -> int:
    from fhs.book.execute import (STATE_DIR, RunLog, append_timing, check_kernel, declared_parameters, execute,
                                  kernel_environment, log_entry, plan, read_source)

    out = (ROOT / args.out) if not Path(args.out).is_absolute() else Path(args.out)
    check_out(out, files=[(ROOT, "companion's own book folder"), *((path, "dataset spec") for path in args.datasets)],
              folders=[(target_dir(None)[0], "the data directory")])
    out.mkdir(parents=True, exist_ok=True)
    datasets = [book_dataset(path, out) for path in args.datasets]
    book = plan_book(datasets, tuple(args.chapters))
    write_book_files(out, ROOT, book, args.profile)
    where = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"{len(book.chapters)} chapter(s) on {', '.join(d.name for d in datasets)} -> {where}")
    for stem, why in book.left_out.items():
        print(f"  left out {stem}: {why}")
    profiles = load_profiles(PROFILES)
    profiles.profile(args.profile)
    chapters = [Chapter(stem, ROOT / "notebooks" / f"{stem}.py", out / "book" / f"{stem}.ipynb")
                for stem in book.chapters]
    chapters.append(Chapter(SUMMARY, ROOT / "notebooks" / f"{SUMMARY}.py", out / "book" / f"{SUMMARY}.ipynb",
                            summary=True))
    given = dict(parse_assignment(text) for text in args.parameter)
    log = RunLog.load(out / STATE_DIR / "executions.json")
    declared = {c.stem: declared_parameters(read_source(c)) for c in chapters}
    plans = []
    for chapter in chapters:
        overrides = {**given, "datasets": [d.path for d in book.chapters.get(chapter.stem, [])]}
        plans += plan([chapter], profiles, args.profile, log, root=ROOT, kernel=args.kernel, overrides=overrides,
                      force=args.force, declared={chapter.stem: declared[chapter.stem]})
    if plans[-1].chapter.summary:  # the provenance page follows every chapter before it
        plans[-1:] = plan([chapters[-1]], profiles, args.profile, log, root=ROOT, kernel=args.kernel,
                          overrides=given, force=args.force or any(p.needed for p in plans[:-1]),
                          declared={SUMMARY: declared[SUMMARY]})
    for p in plans:
        print(f"  {p.chapter.stem:<28} {'run (' + p.reason + ')' if p.needed else 'up to date'}")
    if args.dry_run:
        return 0
    todo = [p for p in plans if p.needed]
    if todo:
        check_kernel(args.kernel)
    env = kernel_environment(args.profile, os.environ)
    for number, p in enumerate(todo, start=1):
        print(f"[{number}/{len(todo)}] {p.chapter.stem}", flush=True)
        try:
            seconds = execute(p, kernel=args.kernel, root=out, failed_dir=out / STATE_DIR / "failed",
                              progress_bar=False, env=env)
        except Exception as error:  # NotebookFailed carries the cell and its traceback
            log.entries.pop(p.chapter.stem, None)
            log.save()
            print(f"\nFAILED: {error}", file=sys.stderr, flush=True)
            return 1
        log.entries[p.chapter.stem] = log_entry(p, args.profile, seconds, out)
        log.save()
        append_timing(out / STATE_DIR / "timings.tsv", args.profile, p.chapter.stem, seconds, "ok")
        print(f"      done in {seconds:.1f} s", flush=True)
    for stem in book.chapters:  # a chapter's prose may name a page of the full book this one lacks
        page = out / "book" / f"{stem}.ipynb"
        if page.is_file():
            keep_notebook_links_inside(page, pages_present(book))
    if args.no_html:
        return 0
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    subprocess.run([str(jupyter_book), "build", str(out), "-W", "-n", "--keep-going"], check=True)
    subprocess.run([sys.executable, "-m", "fhs.book.offline", str(out / "_build" / "html")], check=True)
    print(f"the book: {out / '_build' / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as error:
        sys.exit(error.returncode or 1)
