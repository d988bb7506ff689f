"""An adapter's book: `make book DATASETS=...` on a spec the project has never seen (issue 43)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fhs.book.adapter_book import (BookDataset, index_page, keep_links_inside, plan_book, toc)
from fhs.book.execute import hide_absent_prose
from fhs.book.toc import parse_mapping
from fhs.core.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "adapter"
# The adapter's book command, as README.md and book/adapting.md give it (spec name aside)
BOOK_COMMAND = re.compile(r'make book DATASETS="(?P<specs>[^"]+)" PROFILE=(?P<profile>\w+)')


def dataset(name, *offers):
    return BookDataset(name, f"../{name}.yaml", f"{name} facts", frozenset(offers))


def test_a_chapter_no_dataset_can_run_is_left_out_with_why():
    plan = plan_book([dataset("mine", "domain"), dataset("yours")],
                     ("01_readiness_gap", "02_main_results", "03_ablations"))
    assert [d.name for d in plan.chapters["01_readiness_gap"]] == ["mine", "yours"]
    assert [d.name for d in plan.chapters["02_main_results"]] == ["mine"]  # needs a domain
    assert "03_ablations" not in plan.chapters
    assert "development split" in plan.left_out["03_ablations"]
    assert "CHAPTERS=" in plan.left_out["05_retriever_swap"]  # not asked for: how to ask
    page = index_page(plan, "smoke")
    assert "`mine`" in page and "development split" in page and "/" not in page.split("## Chapters left")[0] \
        .replace("{doc}`", "").replace("`make book DATASETS=...`", "")
    assert [c["file"] for c in toc(plan)["parts"][0]["chapters"]] == ["book/01_readiness_gap", "book/02_main_results"]


def test_two_specs_of_one_name_are_refused():
    with pytest.raises(InputError, match="share a name"):
        plan_book([dataset("mine"), dataset("mine")])


def test_links_to_pages_the_book_lacks_become_words():
    text = "see {doc}`reproducing`, {doc}`the data <data>` and {doc}`Chapter 8 <08_procedures_pcs>`"
    kept = keep_links_inside(text, {"data", "adapting"})
    assert "{doc}`the data <data>`" in kept
    assert "{doc}`reproducing`" not in kept and "*reproducing*" in kept
    assert "*Chapter 8* (a page of the companion's full book)" in kept


def test_prose_about_an_absent_dataset_is_removed(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("On FinCL ...", metadata={"tags": ["needs-fincl"]}),
        nbformat.v4.new_markdown_cell("On both ...", metadata={"tags": ["needs-fincl", "needs-codiesp"]}),
        nbformat.v4.new_markdown_cell("Always."),
    ])
    path = tmp_path / "page.ipynb"
    nbformat.write(notebook, path)
    assert hide_absent_prose(path, ["fincl", "ixbrl"]) == 1
    tags = [cell.metadata.get("tags", []) for cell in nbformat.read(path, as_version=4).cells]
    assert "remove-cell" not in tags[0] and "remove-cell" in tags[1] and tags[2] == []


def test_run_notebooks_takes_papermill_style_yaml():
    assert parse_mapping("datasets: [my.yaml]") == {"datasets": ["my.yaml"]}
    with pytest.raises(InputError, match="mapping"):
        parse_mapping("[my.yaml]")
    done = subprocess.run([sys.executable, "scripts/run_notebooks.py", "--profile", "smoke", "--only",
                           "01_readiness_gap", "-y", "datasets: [my.yaml]", "--dry-run"],
                          cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert '"datasets": ["my.yaml"]' in done.stdout


def documented_book_commands() -> list[re.Match]:
    found = []
    for page in (ROOT / "README.md", ROOT / "book" / "adapting.md"):
        found += list(BOOK_COMMAND.finditer(page.read_text(encoding="utf-8")))
    return found


def test_readme_and_adapting_give_the_same_book_command_and_make_runs_the_script(tmp_path):
    from make_stub import run_target

    commands = documented_book_commands()
    readme = BOOK_COMMAND.search((ROOT / "README.md").read_text(encoding="utf-8"))
    adapting = BOOK_COMMAND.search((ROOT / "book" / "adapting.md").read_text(encoding="utf-8"))
    assert readme and adapting and readme.group(0) == adapting.group(0), commands
    done, calls = run_target(tmp_path, "book", DATASETS=readme["specs"], PROFILE=readme["profile"])
    assert done.returncode == 0, done.stderr
    specs = readme["specs"].split()
    assert calls[0][:2 + len(specs) + 2] == ["python", "scripts/adapter_book.py", *specs, "--profile", readme["profile"]]


ABSOLUTE = re.compile(r"(?<![\w.~])/(?:root|home|work|tmp|usr|opt|var)/")


def quick_start() -> list[str]:
    """The bash lines of book/adapting.md's quick start, here-documents kept whole."""
    text = (ROOT / "book" / "adapting.md").read_text(encoding="utf-8")
    block = text.split("## Quick start", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    lines, heredoc = [], None
    for line in block.splitlines():
        if heredoc is not None:
            lines[-1] += "\n" + line
            heredoc = None if line == heredoc else heredoc
        else:
            lines.append(line.split("  #")[0].rstrip())
            found = re.search(r"<<'(\w+)'", line)
            heredoc = found.group(1) if found else None
    return lines


ABSOLUTE = re.compile(r"(?<![\w.~])/(?:root|home|work|tmp|usr|opt|var)/")


@pytest.mark.slow
@pytest.mark.model
def test_an_adapters_book_from_a_spec_the_project_never_saw(tmp_path):
    """The issue's acceptance run, as book/adapting.md's quick start gives it: facts from tables
    `fhs facts from-table` serialised, a concept file and a domain file of the adapter's own, direct
    and oracle, then the book command under the smoke profile: chapters 01 and 02, strict HTML."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    out = tmp_path / "book"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    book_command = BOOK_COMMAND.search((ROOT / "README.md").read_text(encoding="utf-8"))
    for line in quick_start():
        if line.startswith(("make install-book", "source ")):
            continue  # this test runs inside that environment
        if line == book_command.group(0):  # what `make book DATASETS=... PROFILE=...` runs
            line = (f"{sys.executable} {ROOT}/scripts/adapter_book.py {book_command['specs']} "
                    f"--profile {book_command['profile']} --out {out}")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=tmp_path, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, (line, done.stdout[-4000:], done.stderr[-4000:])
    html = out / "_build" / "html"
    pages = {path.stem: path.read_text(encoding="utf-8") for path in html.glob("book/*.html")}
    assert {"index", "01_readiness_gap", "02_main_results", "provenance", "adapting", "data"} <= set(pages)
    for stem in ("01_readiness_gap", "02_main_results"):
        text = re.sub(r"<[^>]+>", " ", pages[stem])
        assert "ghg-report" in text
        assert not ABSOLUTE.search(text), (stem, ABSOLUTE.search(text).group(0))
        assert "(paper)" not in text  # the paper never evaluated this dataset
        assert "On FinCL" not in text and "CodiEsp relocation" not in text
    assert not ABSOLUTE.search(re.sub(r"<[^>]+>", " ", pages["provenance"]))
    assert "by construction" in pages["01_readiness_gap"]  # ten concepts a datatype: deep recall says nothing
    assert "one fact here" in pages["02_main_results"]  # the smoke sample: the one-cell table
    for stem, page in pages.items():  # every section heading is followed by something a reader can read
        for section in re.findall(r"<section[^>]*>(.*?)</section>", page, flags=re.S):
            body = re.sub(r"<h[1-6].*?</h[1-6]>", "", section, flags=re.S)
            assert re.sub(r"<[^>]+>|\s|¶|#", "", body), (stem, section[:200])
    log = json.loads((out / "_build" / ".notebooks" / "executions.json").read_text())
    print("chapter seconds:", {stem: entry["seconds"] for stem, entry in log.items()})


def test_a_chapters_prose_names_only_pages_the_adapters_book_holds(tmp_path):
    """A chapter's Markdown may cite a page of the full book (the deviations page); in an adapter's
    book that page is absent and a strict build fails on the reference, so it becomes words."""
    import nbformat

    from fhs.book.adapter_book import keep_notebook_links_inside

    page = tmp_path / "01_readiness_gap.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("off by default (see {doc}`deviations`), as {doc}`01_readiness_gap` shows"),
        nbformat.v4.new_code_cell("x = '{doc}`deviations`'")])
    nbformat.write(notebook, page)
    assert keep_notebook_links_inside(page, {"index", "01_readiness_gap"})
    cells = nbformat.read(page, as_version=4).cells
    assert cells[0].source == ("off by default (see the full book's *deviations* page), "
                               "as {doc}`01_readiness_gap` shows")
    assert cells[1].source == "x = '{doc}`deviations`'"  # code is left as it is
    assert not keep_notebook_links_inside(page, {"index", "01_readiness_gap"})  # nothing left to change
