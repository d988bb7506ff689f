"""An adapter's own book: the chapters that apply to one's dataset specs, and nothing else.

``make book DATASETS="my.yaml"`` (``scripts/adapter_book.py``) executes, in a folder of
its own (default ``_build/adapter``), the chapters whose needs the specs meet, each on
the specs that meet them, then builds a strict offline Jupyter Book of those chapters
plus the adapting, data and provenance pages. The book's own pages, saved values and
runs stay untouched: every chapter runs with that folder as its working directory.

This module decides and writes (which chapters, the TOC, the config, the index page);
:mod:`fhs.book.execute` runs the notebooks.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from fhs.book.registry import REGISTRY, Registry
from fhs.core.errors import InputError
from fhs.core.free_text import markdown_literal
from fhs.core.yamlfile import read_yaml_file

NEED_WORDS = {"domain": "a domain file (`domain:` in the spec; LLM methods need its dimensions)",
              "dev": "a development split (`dev:` in the spec)"}
# The chapters whose prose and tables are written for any dataset; the others still
# describe the paper's datasets in places, so they join only when named (CHAPTERS=...).
DEFAULT_CHAPTERS = tuple(chapter.stem for chapter in REGISTRY.adaptable() if chapter.adapter_default)
PAGES = ("adapting", "data")  # prose pages copied from book/; provenance is executed
SUMMARY = "provenance"


@dataclass(frozen=True)
class BookDataset:
    """One spec as the book shows it: its ``name``, its path relative to the book folder, what it offers."""

    name: str
    path: str  # relative to the adapter book's folder: what the chapters receive
    description: str
    offers: frozenset[str]


@dataclass
class BookPlan:
    datasets: list[BookDataset]
    chapters: dict[str, list[BookDataset]] = field(default_factory=dict)  # stem -> the datasets it runs on
    left_out: dict[str, str] = field(default_factory=dict)  # stem -> why (a sentence)
    titles: dict[str, str] = field(default_factory=dict)  # stem -> its title, for the index page


def book_dataset(spec_path: str | Path, book_dir: Path) -> BookDataset:
    """A spec file read for the book: a name, a relative path and the needs it meets (``dev``, ``domain``)."""
    from fhs.data.datasets.spec_file import read_spec_file
    from fhs.run.inputs import retrieval_config

    spec = read_spec_file(spec_path)
    retrieval_config(spec)  # a bad retrieval setting stops the book before any chapter runs
    relative = os.path.relpath(Path(spec_path).expanduser().resolve(), book_dir.resolve())
    offers = {need for need, present in (("dev", spec.dev is not None), ("domain", bool(spec.domain))) if present}
    return BookDataset(spec.name, relative, spec.description, frozenset(offers))


def plan_book(datasets: list[BookDataset], chapters: tuple[str, ...] = DEFAULT_CHAPTERS,
              registry: Registry = REGISTRY) -> BookPlan:
    """Each chapter with the datasets that meet its needs (``needs`` in :mod:`fhs.book.registry`); a chapter none of
    them meets is left out, with why."""
    needs_of = {chapter.stem: chapter.needs or () for chapter in registry.adaptable()}
    defaults = tuple(chapter.stem for chapter in registry.adaptable() if chapter.adapter_default)
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        raise InputError(f"two dataset specs share a name: {', '.join(names)}", field="name",
                         fix="give each spec its own `name:`; the pages and saved values are filed under it")
    unknown = [stem for stem in chapters if stem not in needs_of]
    if unknown:
        raise InputError(f"not a chapter an adapter's book can hold: {', '.join(unknown)}", field="CHAPTERS",
                         fix=f"choose from {', '.join(needs_of)}")
    plan = BookPlan(list(datasets), titles={chapter.stem: chapter.title for chapter in registry.adaptable()})
    for stem in needs_of:
        if stem not in chapters:
            continue
        needs = needs_of[stem]
        fit = [d for d in datasets if all(need in d.offers for need in needs)]
        if fit:
            plan.chapters[stem] = fit
        else:
            lacking = sorted({need for d in datasets for need in needs if need not in d.offers})
            plan.left_out[stem] = "it needs " + " and ".join(NEED_WORDS[n] for n in lacking) + \
                ", which no dataset of this book has"
    not_named = [stem for stem in needs_of if stem not in chapters]
    for stem in not_named:
        why = "not asked for" if stem in defaults else \
            "not written for any dataset yet (its prose still speaks of the paper's datasets in places)"
        plan.left_out[stem] = f"{why}; add it with `CHAPTERS=\"{' '.join((*chapters, stem))}\"`"
    return plan


_DOC = re.compile(r"\{doc\}`([^`<]+?)(?:\s*<([^>]+)>)?`")


def keep_links_inside(text: str, present: set[str]) -> str:
    """``{doc}`` references to pages this book lacks become plain words (a strict build fails on them)."""
    def replace(match: re.Match) -> str:
        title, target = match.group(1).strip(), (match.group(2) or match.group(1)).strip()
        if Path(target).name in present:
            return match.group(0)
        return f"*{title}* (a page of the companion's full book)" if match.group(2) else \
            f"the full book's *{Path(target).name}* page"
    return _DOC.sub(replace, text)


def pages_present(plan: BookPlan) -> set[str]:
    """The pages an adapter's book holds, which a ``{doc}`` reference may name."""
    return {"index", *plan.chapters, *PAGES, SUMMARY}


def keep_notebook_links_inside(path: Path, present: set[str]) -> bool:
    """``keep_links_inside`` over the Markdown cells of an executed chapter; whether it changed any."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    changed = False
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            kept = keep_links_inside(cell.source, present)
            changed |= kept != cell.source
            cell.source = kept
    if changed:
        nbformat.write(notebook, path)
    return changed


def index_page(plan: BookPlan, profile: str) -> str:
    """The book's first page: its datasets, its chapters, and each chapter it left out with why."""
    names = ", ".join(f"`{d.name}`" for d in plan.datasets)
    lines = [f"# An adapter's book: {names}", "",
             f"This book holds the companion's chapters executed on {len(plan.datasets)} dataset spec(s) of "
             f"one's own, under the `{profile}` profile, built by `make book DATASETS=...` "
             "({doc}`adapting` says how). Every table names a dataset by its spec's `name`.", "",
             "| dataset | description | offers |", "| --- | --- | --- |"]
    for d in plan.datasets:
        offers = ", ".join(sorted(d.offers)) or "facts and a taxonomy only"
        description = markdown_literal(d.description) if d.description else "(no description in the spec)"
        lines.append(f"| `{d.name}` | {description} | {offers} |")
    lines += ["", "## Chapters in this book", ""]
    for stem, datasets in plan.chapters.items():
        lines.append(f"- {{doc}}`{stem}`: on {', '.join(f'`{d.name}`' for d in datasets)}")
    lines += ["- {doc}`provenance`: what produced these pages", ""]
    if plan.left_out:
        lines += ["## Chapters left out", ""]
        for stem, why in plan.left_out.items():
            lines.append(f"- *{plan.titles[stem]}* ({stem}): {why}.")
        lines.append("")
    return "\n".join(lines)


def toc(plan: BookPlan) -> dict:
    return {
        "format": "jb-book",
        "root": "book/index",
        "parts": [
            {"caption": "Chapters", "numbered": True,
             "chapters": [{"file": f"book/{stem}"} for stem in plan.chapters]},
            {"caption": "About", "numbered": False,
             "chapters": [{"file": f"book/{page}"} for page in (*PAGES, SUMMARY)]},
        ],
    }


def write_book_files(book_dir: Path, repo: Path, plan: BookPlan, profile: str) -> None:
    """The TOC, the config, the index page and the copied prose pages of the adapter's book."""
    import yaml

    (book_dir / "book").mkdir(parents=True, exist_ok=True)
    config = read_yaml_file(repo / "_config.yml")
    config["title"] = "An adapter's book: " + ", ".join(d.name for d in plan.datasets)
    (book_dir / "_config.yml").write_text(
        "# written by scripts/adapter_book.py from the companion's _config.yml\n"
        + yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    (book_dir / "_toc.yml").write_text("# written by scripts/adapter_book.py\n"
                                       + yaml.safe_dump(toc(plan), sort_keys=False), encoding="utf-8")
    present = pages_present(plan)
    for page in PAGES:
        text = (repo / "book" / f"{page}.md").read_text(encoding="utf-8")
        (book_dir / "book" / f"{page}.md").write_text(keep_links_inside(text, present), encoding="utf-8")
    (book_dir / "book" / "index.md").write_text(index_page(plan, profile), encoding="utf-8")
