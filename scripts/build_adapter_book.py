#!/usr/bin/env python
"""Build an adapter's book: the chapters that apply to one's dataset specs, strict offline HTML.

    python scripts/build_adapter_book.py my.yaml other.yaml --profile smoke     # what `make book DATASETS=...` runs
    python scripts/build_adapter_book.py my.yaml --chapters 01_readiness_gap --out _build/mine
    python scripts/build_adapter_book.py my.yaml -p base_url=http://host:8000/v1   # adds the LLM chapters (a server)
    python scripts/build_adapter_book.py my.yaml --llm -p sample.llm_limit=2 --dry-run   # them on the CPU model

Chapters run with the book folder (default _build/adapter) as their working directory, so
the companion's own pages, runs and saved values are left as they are; a second build
re-executes only what changed. The HTML lands in <out>/_build/html/index.html.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout even before `pip install -e .`

from fhs.book.adapter_book import (CPU_COMMAND, DEFAULT_CHAPTERS, MODEL_COMMAND, SUMMARIES, BookDataset,  # noqa: E402
                                   book_dataset, keep_notebook_links_inside, pages_present, plan_book,
                                   write_book_files)
from fhs.book.toc import MAPPINGS, PROFILES, Chapter, folded, load_profiles, parse_assignment  # noqa: E402
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
    parser.add_argument("--llm", action="store_true",
                        help="run the LLM chapters on the profile's own model on the CPU when no server is given")
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


def build_offers(given: dict, cpu_model: bool) -> frozenset[str]:
    """What the build offers the chapters: a model (a server or replay given, or the CPU model asked for), dense."""
    from fhs.core.extras import installed

    server = folded(given, MAPPINGS).get("server") or {}
    offers = {"model"} if cpu_model or server.get("base_url") or server.get("replay") else set()
    return frozenset(offers | ({"dense"} if installed("dense") else set()))


def with_server_backend(given: dict) -> dict:
    """A ``base_url`` given without a backend means an OpenAI-compatible server: the CPU profiles' own backend runs
    a model in process and would ignore the URL."""
    server = folded(given, MAPPINGS).get("server") or {}
    return {**given, "backend": "openai"} if server.get("base_url") and not server.get("backend") else given


def dataset_parameters(stem: str, datasets: list[BookDataset], out: Path) -> dict:
    """A chapter's dataset parameters: ``datasets``, or, for a chapter whose registry defaults name one ``dataset``
    with its ``dev_dataset`` (chapter 3's tuning), those two (a spec file's split named relative to the book's
    folder, as the specs are)."""
    from fhs.book.registry import REGISTRY
    from fhs.data.datasets import is_spec_file
    from fhs.data.datasets.spec_file import read_spec_file

    given: dict = {"datasets": [d.path for d in datasets]}
    defaults = REGISTRY.get(stem).defaults if stem in REGISTRY.stems else {}  # a summary page has none
    if "dev_dataset" in defaults and datasets:
        dev = read_spec_file(out / datasets[0].path).dev
        if dev is not None and is_spec_file(dev):
            dev = os.path.relpath(Path(dev).resolve(), out.resolve())
        given = {"dataset": datasets[0].path, "dev_dataset": dev}
    return given


def build(args: argparse.Namespace) -> int:
    from fhs.book.execute import (STATE_DIR, RunLog, append_timing, check_kernel, declared_parameters, execute,
                                  kernel_environment, log_entry, plan, read_source)

    out = (ROOT / args.out) if not Path(args.out).is_absolute() else Path(args.out)
    check_out(out, files=[(ROOT, "companion's own book folder"), *((path, "dataset spec") for path in args.datasets)],
              folders=[(target_dir(None)[0], "the data directory")])
    out.mkdir(parents=True, exist_ok=True)
    datasets = [book_dataset(path, out) for path in args.datasets]
    given = with_server_backend(dict(parse_assignment(text) for text in args.parameter))
    book = plan_book(datasets, tuple(args.chapters), build_offers(given, args.llm))
    write_book_files(out, ROOT, book, args.profile)
    where = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    print(f"{len(book.chapters)} chapter(s) on {', '.join(d.name for d in datasets)} -> {where}")
    for stem, why in book.left_out.items():
        print(f"  left out {stem}: {why}")
    if "model" not in book.build:
        print(f"  the chapters that ask a model: {MODEL_COMMAND} (a server) or {CPU_COMMAND} (the CPU model)")
    profiles = load_profiles(PROFILES)
    profiles.profile(args.profile)
    chapters = [Chapter(stem, ROOT / "notebooks" / f"{stem}.py", out / "book" / f"{stem}.ipynb")
                for stem in book.chapters]
    chapters += [Chapter(stem, ROOT / "notebooks" / f"{stem}.py", out / "book" / f"{stem}.ipynb", summary=True)
                 for stem in SUMMARIES]
    log = RunLog.load(out / STATE_DIR / "executions.json")
    declared = {c.stem: declared_parameters(read_source(c)) for c in chapters}
    plans = []
    for chapter in chapters:
        overrides = {**given, **dataset_parameters(chapter.stem, book.chapters.get(chapter.stem, []), out)}
        plans += plan([chapter], profiles, args.profile, log, root=ROOT, kernel=args.kernel, overrides=overrides,
                      force=args.force, declared={chapter.stem: declared[chapter.stem]})
    changed = any(p.needed for p in plans if not p.chapter.summary)
    plans = [plan([p.chapter], profiles, args.profile, log, root=ROOT, kernel=args.kernel, overrides=given,
                  force=args.force or changed, declared={p.chapter.stem: declared[p.chapter.stem]})[0]
             if p.chapter.summary else p for p in plans]  # the summary pages follow every chapter
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
    # Sphinx's pickled doctrees name the folder's absolute path; the HTML is rebuilt from the notebooks without them
    shutil.rmtree(out / "_build" / ".doctrees", ignore_errors=True)
    print(f"the book: {out / '_build' / 'html' / 'index.html'}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except subprocess.CalledProcessError as error:
        sys.exit(error.returncode or 1)
