"""An adapter's own book: the chapters that apply to one's dataset specs, and nothing else.

``make book DATASETS="my.yaml"`` (``scripts/build_adapter_book.py``) executes, in a folder of
its own (default ``_build/adapter``), the chapters whose needs the specs meet, each on
the specs that meet them, then builds a strict offline Jupyter Book of those chapters
plus an index, a data page written from the specs and the provenance page. The book's own pages, saved values and
runs stay untouched: every chapter runs with that folder as its working directory.

This module decides and writes (which chapters, the TOC, the config, the index page);
:mod:`fhs.book.execute` runs the notebooks.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from fhs.book.adapter_data import data_page
from fhs.book.registry import REGISTRY, Registry
from fhs.core.errors import InputError
from fhs.core.free_text import markdown_literal
from fhs.core.yamlfile import read_yaml_file

# What a chapter needs (its registry entry's ``needs``, fhs/book/registry.py) is of a dataset (``domain``, ``dev``:
# fhs/run/dataset_offers.py) or of the build (``model``: a server given or the CPU model asked for; ``dense``: the
# dense extra installed).
BUILD_NEEDS = ("model", "dense")
MODEL_COMMAND = 'make book DATASETS="..." ARGS="-p base_url=URL"'  # a served model (OpenAI-compatible)
CPU_COMMAND = 'make book DATASETS="..." ARGS="--llm"'  # the profile's own model, in process on the CPU
NEED_WORDS = {
    "domain": "a domain file (`domain:` in the spec; the LLM methods and the oracle model read its dimensions, "
    "`fhs domain check` checks one)",
    "dev": "a development split (`dev:` in the spec, naming a spec of other facts)",
    "model": "a language model, which this build was not given (*Where this book spends its time* above gives "
    "the command that adds one)",
    "dense": "the dense retriever (`pip install 'fhs[dense]'`)",
}
# Every chapter an adapter's book can hold is considered; those that ask a model run only when one is given.
DEFAULT_CHAPTERS = tuple(chapter.stem for chapter in REGISTRY.adaptable() if chapter.adapter_default)
# Prose pages copied from book/: none, as the guide (book/adapting.md) walks through the paper's datasets; the data
# page is written from the specs.
PAGES: tuple[str, ...] = ()
DATA_PAGE = "data"
CLAIMS = "claims"  # the comparisons these datasets allow, judged on the chapters' values (fhs/book/claims.py)
SUMMARY = "provenance"
SUMMARIES = (CLAIMS, SUMMARY)  # executed after every chapter, in this order


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
    build: frozenset[str] = frozenset()  # what the build offers (BUILD_NEEDS): a model, the dense retriever
    titles: dict[str, str] = field(default_factory=dict)  # stem -> its title, for the index page
    needs: dict[str, tuple[str, ...]] = field(default_factory=dict)  # stem -> its needs (the registry's)

    def asks_model(self, stem: str) -> bool:
        """Whether a chapter asks a language model (the book runs it only when one is given)."""
        return "model" in self.needs.get(stem, ())


def book_dataset(spec_path: str | Path, book_dir: Path) -> BookDataset:
    """A spec file read for the book: a name, a relative path and the needs it meets (``dev``, ``domain``)."""
    from fhs.data.datasets.spec_file import read_spec_file
    from fhs.run.inputs import retrieval_config

    spec = read_spec_file(spec_path)
    retrieval_config(spec)  # a bad retrieval setting stops the book before any chapter runs
    relative = os.path.relpath(Path(spec_path).expanduser().resolve(), book_dir.resolve())
    offers = {need for need, present in (("dev", spec.dev is not None), ("domain", bool(spec.domain))) if present}
    return BookDataset(spec.name, relative, spec.description, frozenset(offers))


def plan_book(
    datasets: list[BookDataset],
    chapters: tuple[str, ...] = DEFAULT_CHAPTERS,
    build: frozenset[str] = frozenset(),
    registry: Registry = REGISTRY,
) -> BookPlan:
    """Each chapter with the datasets that meet its needs (``needs`` in :mod:`fhs.book.registry`); a chapter left
    out says what is lacking and how to add it.

    ``build`` is what the build offers besides the specs (``model``, ``dense``)."""
    needs_of = {chapter.stem: chapter.needs or () for chapter in registry.adaptable()}
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        raise InputError(
            f"two dataset specs share a name: {', '.join(names)}",
            field="name",
            fix="give each spec its own `name:`; the pages and saved values are filed under it",
        )
    unknown = [stem for stem in chapters if stem not in needs_of]
    if unknown:
        raise InputError(
            f"not a chapter an adapter's book can hold: {', '.join(unknown)}",
            field="CHAPTERS",
            fix=f"choose from {', '.join(needs_of)}",
        )
    plan = BookPlan(
        list(datasets),
        build=frozenset(build),
        titles={chapter.stem: chapter.title for chapter in registry.adaptable()},
        needs=needs_of,
    )
    for stem, needs in needs_of.items():
        if stem not in chapters:
            plan.left_out[stem] = f'not asked for; add it with `CHAPTERS="{" ".join((*chapters, stem))}"`'
            continue
        missing = [need for need in needs if need in BUILD_NEEDS and need not in build]
        fit = [d for d in datasets if all(need in d.offers for need in needs if need not in BUILD_NEEDS)]
        if fit and not missing:
            plan.chapters[stem] = fit
            continue
        lacking = [
            need
            for need in needs
            if need not in BUILD_NEEDS and not fit and any(need not in d.offers for d in datasets)
        ]
        words = [NEED_WORDS[n] + ", which no dataset of this book has" for n in lacking]
        plan.left_out[stem] = "it needs " + "; and ".join(words + [NEED_WORDS[n] for n in missing])
    return plan


_DOC = re.compile(r"\{doc\}`([^`<]+?)(?:\s*<([^>]+)>)?`")


def keep_links_inside(text: str, present: set[str]) -> str:
    """``{doc}`` references to pages this book lacks become plain words (a strict build fails on them)."""

    def replace(match: re.Match) -> str:
        title, target = match.group(1).strip(), (match.group(2) or match.group(1)).strip()
        if Path(target).name in present:
            return match.group(0)
        return (
            f"*{title}* (a page of the companion's full book)"
            if match.group(2)
            else f"the full book's *{Path(target).name}* page"
        )

    return _DOC.sub(replace, text)


def pages_present(plan: BookPlan) -> set[str]:
    """The pages an adapter's book holds, which a ``{doc}`` reference may name."""
    return {"index", *plan.chapters, *PAGES, DATA_PAGE, *SUMMARIES}


def keep_notebook_links_inside(path: Path, present: set[str]) -> bool:
    """``keep_links_inside`` over the Markdown cells of an executed chapter, and the cells about a dataset the
    page did not run (``needs-X``, hidden by the runner) dropped, so the page's download holds none of them
    either; whether it changed anything."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    kept_cells = [cell for cell in notebook.cells if not absent_dataset_cell(cell)]
    changed = len(kept_cells) != len(notebook.cells)
    notebook.cells = kept_cells
    for cell in notebook.cells:
        if cell.cell_type == "markdown":
            kept = keep_links_inside(cell.source, present)
            changed |= kept != cell.source
            cell.source = kept
    if changed:
        nbformat.write(notebook, path)
    return changed


def absent_dataset_cell(cell) -> bool:
    """A cell about a dataset the page did not run: tagged ``needs-X`` and hidden (``fhs.book.execute``)."""
    tags = cell.get("metadata", {}).get("tags", [])
    return "remove-cell" in tags and any(tag.startswith("needs-") for tag in tags)


def index_page(plan: BookPlan, profile: str) -> str:
    """The book's first page: its datasets, its chapters, and each chapter it left out with why."""
    names = ", ".join(f"`{d.name}`" for d in plan.datasets)
    lines = [
        f"# An adapter's book: {names}",
        "",
        f"This book holds the companion's chapters executed on {len(plan.datasets)} dataset spec(s) of "
        f"one's own, under the `{profile}` profile, built by `make book DATASETS=...` "
        "(the full book's *Adapting the companion* page says how). Every table names a dataset by its spec's "
        "`name`.",
        "",
        "| dataset | description | offers |",
        "| --- | --- | --- |",
    ]
    for d in plan.datasets:
        offers = ", ".join(sorted(d.offers)) or "facts and a taxonomy only"
        description = markdown_literal(d.description) if d.description else "(no description in the spec)"
        lines.append(f"| `{d.name}` | {description} | {offers} |")
    lines += ["", "## Chapters in this book", ""]
    for stem, datasets in plan.chapters.items():
        lines.append(f"- {{doc}}`{stem}`: on {', '.join(f'`{d.name}`' for d in datasets)}")
    lines += [
        "- {doc}`claims`: what this build establishes on these datasets",
        "- {doc}`data`: the spec files, their facts, taxonomy and domain",
        "- {doc}`provenance`: what produced these pages",
        "",
    ]
    lines += model_lines(plan)
    if plan.left_out:
        lines += ["## Chapters left out", ""]
        for stem, why in plan.left_out.items():
            lines.append(f"- *{plan.titles[stem]}* ({stem}): {why}.")
        lines.append("")
    return "\n".join(lines)


def model_lines(plan: BookPlan) -> list[str]:
    """Which chapters asked a model and which did not, and why; the command that adds the LLM chapters."""
    free = [f"{{doc}}`{stem}`" for stem in plan.chapters if not plan.asks_model(stem)]
    asked = [f"{{doc}}`{stem}`" for stem in plan.chapters if plan.asks_model(stem)]
    llm = [stem for stem in plan.titles if plan.asks_model(stem)]
    lines = ["## Where this book spends its time", ""]
    if free:
        lines.append(
            f"{' and '.join(free)} ask no language model: they run on every fact of each spec "
            "(the oracle model of chapter 09 reads the gold, it is not a model call)."
        )
    if asked:
        lines.append(
            f"{', '.join(asked)} asked a language model: their numbers come from that model on the "
            "profile's sample of facts, whole contexts at a time."
        )
    elif "model" not in plan.build:
        lines.append(
            f"The LLM chapters ({', '.join(llm)}) were not run: this build was given no model, and on a "
            "CPU they cost minutes a fact for a sample of a few facts, numbers a page calls protocol, "
            f"not evidence. `{MODEL_COMMAND}` runs them against a served model (an OpenAI-compatible "
            f"`base_url`); `{CPU_COMMAND}` runs them with the profile's own model on the CPU."
        )
    return [*lines, ""]


def toc(plan: BookPlan) -> dict:
    return {
        "format": "jb-book",
        "root": "book/index",
        "parts": [
            {"caption": "This build", "numbered": False, "chapters": [{"file": f"book/{CLAIMS}"}]},
            {"caption": "Chapters", "numbered": True, "chapters": [{"file": f"book/{stem}"} for stem in plan.chapters]},
            {
                "caption": "About",
                "numbered": False,
                "chapters": [{"file": f"book/{page}"} for page in (*PAGES, DATA_PAGE, SUMMARY)],
            },
        ],
    }


def write_book_files(book_dir: Path, repo: Path, plan: BookPlan, profile: str) -> None:
    """The TOC, the config, the index page and the copied prose pages of the adapter's book."""
    import yaml

    (book_dir / "book").mkdir(parents=True, exist_ok=True)
    config = read_yaml_file(repo / "_config.yml")
    config["title"] = "An adapter's book: " + ", ".join(d.name for d in plan.datasets)
    (book_dir / "_config.yml").write_text(
        "# written by scripts/build_adapter_book.py from the companion's _config.yml\n"
        + yaml.safe_dump(config, sort_keys=False),
        encoding="utf-8",
    )
    (book_dir / "_toc.yml").write_text(
        "# written by scripts/build_adapter_book.py\n" + yaml.safe_dump(toc(plan), sort_keys=False), encoding="utf-8"
    )
    present = pages_present(plan)
    for page in PAGES:
        text = (repo / "book" / f"{page}.md").read_text(encoding="utf-8")
        (book_dir / "book" / f"{page}.md").write_text(keep_links_inside(text, present), encoding="utf-8")
    (book_dir / "book" / "index.md").write_text(index_page(plan, profile), encoding="utf-8")
    specs = [(d.name, book_dir / d.path) for d in plan.datasets]
    (book_dir / "book" / f"{DATA_PAGE}.md").write_text(data_page(specs), encoding="utf-8")
