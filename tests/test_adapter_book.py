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
BOOK_COMMAND = re.compile(r'make book DATASETS="(?P<specs>[^"]+)"(?: PROFILE=(?P<profile>\w+))?(?= *(?:#|$))', re.M)


def dataset(name, *offers):
    return BookDataset(name, f"../{name}.yaml", f"{name} facts", frozenset(offers))


def test_a_chapter_no_dataset_can_run_is_left_out_with_why():
    plan = plan_book([dataset("mine", "domain"), dataset("yours")],
                     ("01_readiness_gap", "02_main_results", "03_ablations"), build=frozenset({"model"}))
    assert [d.name for d in plan.chapters["01_readiness_gap"]] == ["mine", "yours"]
    assert [d.name for d in plan.chapters["02_main_results"]] == ["mine"]  # needs a domain
    assert "03_ablations" not in plan.chapters
    assert "development split" in plan.left_out["03_ablations"]
    assert "CHAPTERS=" in plan.left_out["05_retriever_swap"]  # not asked for: how to ask
    page = index_page(plan, "smoke")
    assert "`mine`" in page and "development split" in page and "/" not in page.split("## Chapters left")[0] \
        .replace("{doc}`", "").replace("`make book DATASETS=...`", "")
    parts = {part["caption"]: [c["file"] for c in part["chapters"]] for part in toc(plan)["parts"]}
    assert parts["Chapters"] == ["book/01_readiness_gap", "book/02_main_results"]
    # the claims page comes first: the comparisons these datasets allow, judged on the chapters' values
    assert next(iter(parts)) == "This build" and parts["This build"] == ["book/claims"]
    assert "{doc}`claims`" in page


def test_without_a_model_the_book_holds_the_model_free_chapters_and_says_how_to_add_the_rest():
    """Chapter 09 is in every adapter's book by default (it needs a domain, no model); the LLM chapters wait for a
    model and the index gives the command that adds them; each chapter a spec allows runs when one is given."""
    from fhs.book.adapter_book import DEFAULT_CHAPTERS
    from fhs.book.registry import REGISTRY

    adaptable = [chapter.stem for chapter in REGISTRY.adaptable()]
    assert set(DEFAULT_CHAPTERS) == set(adaptable) >= {"03_ablations", "04_verifier_diagnostics",
                                                           "05_retriever_swap", "06_fhs_seq", "09_stage_ceilings"}
    specs = [dataset("mine", "domain"), dataset("tuned", "domain", "dev"), dataset("bare")]
    plan = plan_book(specs)
    assert list(plan.chapters) == ["01_readiness_gap", "09_stage_ceilings"]
    assert [d.name for d in plan.chapters["09_stage_ceilings"]] == ["mine", "tuned"]
    assert "language model" in plan.left_out["02_main_results"]
    page = index_page(plan, "cpu")
    assert 'ARGS="-p base_url=URL"' in page and 'ARGS="--llm"' in page and "ask no language model" in page
    served = plan_book(specs, build=frozenset({"model", "dense"}))
    assert list(served.chapters) == adaptable
    assert [d.name for d in served.chapters["03_ablations"]] == ["tuned"]  # the one spec with a dev split
    assert [d.name for d in served.chapters["02_main_results"]] == ["mine", "tuned"]
    assert "dense" in plan_book(specs, build=frozenset({"model"})).left_out["05_retriever_swap"]
    bare = plan_book([dataset("bare")])
    assert "domain file" in bare.left_out["09_stage_ceilings"] and list(bare.chapters) == ["01_readiness_gap"]


def test_makes_default_chapters_are_the_registrys():
    """The Makefile names no chapter by default, so the script's default (the registry's) holds."""
    line = next(line for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("CHAPTERS ?="))
    assert line.split("?=", 1)[1].split("##", 1)[0].split() == []


def test_the_build_has_a_model_when_a_server_is_given_or_the_cpu_model_asked_for():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from build_adapter_book import build_offers, with_server_backend
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    assert "model" not in build_offers({}, cpu_model=False)
    assert "model" not in build_offers({"sample.llm_limit": 1}, cpu_model=False)
    assert "model" in build_offers({"base_url": "http://127.0.0.1:8000/v1"}, cpu_model=False)
    assert "model" in build_offers({"server": {"base_url": "http://127.0.0.1:8000/v1"}}, cpu_model=False)
    assert "model" in build_offers({}, cpu_model=True)
    served = with_server_backend({"base_url": "http://127.0.0.1:8000/v1"})  # the CPU profiles' backend ignores URLs
    assert served == {"base_url": "http://127.0.0.1:8000/v1", "backend": "openai"}
    assert with_server_backend({"base_url": "u", "backend": "vllm"})["backend"] == "vllm"
    assert with_server_backend({"sample.llm_limit": 1}) == {"sample.llm_limit": 1}


def test_the_data_page_describes_the_adapters_spec_not_the_papers_sources(tmp_path):
    from fhs.book.adapter_data import data_page

    (tmp_path / "mine").mkdir()
    for name in ("concepts.csv", "ghg-domain.yaml"):
        (tmp_path / "mine" / name).write_text((FIXTURE / name).read_text())
    facts = [{"id": f"f{i}", "context_id": "t1" if i < 2 else "t2", "modality": "table", "value": "1,250",
              "datatype": "emissions", "context": "Scope 1 emissions 1,250", "gold": ["ghg:Scope1Emissions"],
              **({"row_header": "Scope 1 emissions"} if i else {})} for i in range(3)]
    (tmp_path / "mine" / "facts.jsonl").write_text("".join(json.dumps(f) + "\n" for f in facts))
    spec = tmp_path / "my.yaml"
    spec.write_text("name: ghg-report\nfacts: mine/facts.jsonl\ntaxonomy: mine/concepts.csv\n"
                    "domain: mine/ghg-domain.yaml\n")
    page = data_page([("ghg-report", spec)])
    assert "## `ghg-report`" in page and "3 facts in 2 contexts" in page and "12 concepts" in page
    assert "emissions 3" in page and "2 of 3 facts have a row or column header" in page
    assert "dimensions SCOPE, SOURCE" in page and "`my.yaml`" in page
    assert str(tmp_path) not in page
    assert not re.search(r"FinTagging|CodiEsp|US-GAAP|iXBRL", page)


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
        nbformat.v4.new_code_cell("codiesp = None  # a branch for CodiEsp", metadata={"tags": ["needs-codiesp"]}),
    ])
    path = tmp_path / "page.ipynb"
    nbformat.write(notebook, path)
    assert hide_absent_prose(path, ["fincl", "ixbrl"]) == 2
    tags = [cell.metadata.get("tags", []) for cell in nbformat.read(path, as_version=4).cells]
    assert "remove-cell" not in tags[0] and "remove-cell" in tags[1] and tags[2] == []
    assert "remove-cell" in tags[3]  # a code branch for a dataset the page lacks is not shown either


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
    profile = {"PROFILE": readme["profile"]} if readme["profile"] else {}
    done, calls = run_target(tmp_path, "book", DATASETS=readme["specs"], **profile)
    assert done.returncode == 0, done.stderr
    specs = readme["specs"].split()
    assert calls[0][:2 + len(specs) + 2] == ["python", "scripts/build_adapter_book.py", *specs, "--profile",
                                             readme["profile"] or "cpu"]


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


PAPER_NAMES = re.compile(r"FinTagging|CodiEsp|US-GAAP", re.I)


@pytest.mark.slow
def test_an_adapters_book_from_a_spec_the_project_never_saw(tmp_path):
    """The issue's acceptance run, as book/adapting.md's quick start gives it: facts from tables
    `fhs facts from-table` serialised, a concept file and a domain file of the adapter's own, direct
    and oracle, then the book command with no model: chapters 01 and 09, strict HTML, no word of the
    paper's datasets and no absolute path anywhere in what was built."""
    (tmp_path / "tests").symlink_to(ROOT / "tests")
    out = tmp_path / "book"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    book_command = BOOK_COMMAND.search((ROOT / "README.md").read_text(encoding="utf-8"))
    for line in quick_start():
        if line.startswith(("make install-book", "source ")):
            continue  # this test runs inside that environment
        if line == book_command.group(0):  # what `make book DATASETS=...` runs
            line = (f"{sys.executable} {ROOT}/scripts/build_adapter_book.py {book_command['specs']} "
                    f"--profile {book_command['profile'] or 'cpu'} --out {out}")
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", line], cwd=tmp_path, env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, (line, done.stdout[-4000:], done.stderr[-4000:])
    html = out / "_build" / "html"
    pages = {path.stem: path.read_text(encoding="utf-8") for path in html.glob("book/*.html")}
    assert set(pages) == {"index", "claims", "01_readiness_gap", "09_stage_ceilings", "provenance", "data"}
    claims = re.sub(r"<[^>]+>", " ", pages["claims"])
    assert "ghg-report" in claims and re.search(r"holds|does not hold|too few facts", claims)  # probe vs direct
    assert not any(word in claims for word in ("FinTagging", "CodiEsp", "fincl", "codiesp", "US-GAAP"))
    for stem in ("01_readiness_gap", "09_stage_ceilings"):
        text = re.sub(r"<[^>]+>", " ", pages[stem])
        assert "ghg-report" in text
        assert "(paper" not in text  # the paper never evaluated this dataset
    index = re.sub(r"<[^>]+>", " ", pages["index"])
    assert "--llm" in index and "base_url" in index and "02_main_results" in index  # how to add the LLM chapters
    assert "9 facts in 2 contexts" in pages["data"]  # the data page is the spec's, not the paper's sources
    assert "by construction" in pages["01_readiness_gap"]  # ten concepts a datatype: deep recall says nothing
    for path in out.rglob("*"):  # every file: what a reader downloads, the executed notebooks, the records, logs
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace")
            for where in (str(tmp_path), str(ROOT)):
                assert where not in text, (path.relative_to(out), where)
            if path.suffix == ".html" and "_static" not in path.parts:  # the pages a reader opens
                assert not PAPER_NAMES.search(text), (path.relative_to(out), PAPER_NAMES.search(text).group(0))
    for stem, page in pages.items():  # every section heading is followed by something a reader can read
        for section in re.findall(r"<section[^>]*>(.*?)</section>", page, flags=re.S):
            body = re.sub(r"<h[1-6].*?</h[1-6]>", "", section, flags=re.S)
            assert re.sub(r"<[^>]+>|\s|¶|#", "", body), (stem, section[:200])
    log = json.loads((out / "_build" / ".notebooks" / "executions.json").read_text())
    print("chapter seconds:", {stem: entry["seconds"] for stem, entry in log.items()})


@pytest.mark.slow
def test_the_same_book_with_a_server_given_adds_every_chapter_the_spec_allows(tmp_path):
    """With a (simulated) OpenAI-compatible server given as `-p base_url=...`, the book runs the LLM chapters too:
    02, 04, 06 on the spec, 03 on its development split, 05 where the dense extra is installed."""
    from fhs.core.extras import installed
    from fhs.plan.sim_server import running
    from llama_server import free_port

    import nbformat

    for name in ("concepts.csv", "ghg-domain.yaml", "emissions.csv", "targets.csv"):
        (tmp_path / name).write_text((FIXTURE / name).read_text())
    fhs = [sys.executable, "-m", "fhs.cli", "facts", "from-table"]
    for tables, out in ((["emissions.csv"], "facts.jsonl"), (["targets.csv", "emissions.csv"], "dev-facts.jsonl")):
        subprocess.run([*fhs, *tables, "--taxonomy", "concepts.csv", "--out", out], cwd=tmp_path, check=True)
    common = "taxonomy: concepts.csv\ndomain: ghg-domain.yaml\n"
    (tmp_path / "dev.yaml").write_text("name: ghg-dev\nfacts: dev-facts.jsonl\n" + common)
    (tmp_path / "my.yaml").write_text("name: ghg-report\nfacts: facts.jsonl\ndev: dev.yaml\n" + common)
    out = tmp_path / "book"
    with running(free_port(), "--fixed-latency", "0.01") as url:
        done = subprocess.run([sys.executable, "scripts/build_adapter_book.py", str(tmp_path / "my.yaml"), "--profile",
                               "smoke", "--out", str(out), "-p", f"base_url={url}", "--no-html"],
                              cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    expected = {"01_readiness_gap", "02_main_results", "03_ablations", "04_verifier_diagnostics", "06_fhs_seq",
                "09_stage_ceilings", *(["05_retriever_swap"] if installed("dense") else [])}
    log = json.loads((out / "_build" / ".notebooks" / "executions.json").read_text())
    assert expected | {"claims", "provenance"} == set(log)  # the summary pages follow the chapters
    index = (out / "book" / "index.md").read_text()
    assert "asked a language model" in index and "were not run" not in index
    page = nbformat.read(out / "book" / "03_ablations.ipynb", as_version=4)
    shown = "".join(str(output) for cell in page.cells for output in cell.get("outputs", []))
    assert "β chosen on ghg-dev" in shown and "FinTagging" not in shown
    for path in sorted((out / "book").glob("*.ipynb")):  # what a page shows: its kept cells' code and outputs
        for cell in nbformat.read(path, as_version=4).cells:
            tags = cell.get("metadata", {}).get("tags", [])
            if "remove-cell" in tags:
                continue
            text = ("" if "remove-input" in tags else cell.source) + (
                "" if "remove-output" in tags else "".join(str(output) for output in cell.get("outputs", [])))
            assert not PAPER_NAMES.search(text), (path.name, PAPER_NAMES.search(text).group(0), cell.source[:200])
    print("chapter seconds:", {stem: entry["seconds"] for stem, entry in log.items()})


def test_a_chapters_prose_names_only_pages_the_adapters_book_holds(tmp_path):
    """A chapter's Markdown may cite a page of the full book (the deviations page); in an adapter's
    book that page is absent and a strict build fails on the reference, so it becomes words."""
    import nbformat

    from fhs.book.adapter_book import keep_notebook_links_inside

    page = tmp_path / "01_readiness_gap.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("off by default (see {doc}`deviations`), as {doc}`01_readiness_gap` shows"),
        nbformat.v4.new_code_cell("x = '{doc}`deviations`'"),
        nbformat.v4.new_markdown_cell("On CodiEsp ...", metadata={"tags": ["needs-codiesp", "remove-cell"]})])
    nbformat.write(notebook, page)
    assert keep_notebook_links_inside(page, {"index", "01_readiness_gap"})
    cells = nbformat.read(page, as_version=4).cells
    assert cells[0].source == ("off by default (see the full book's *deviations* page), "
                               "as {doc}`01_readiness_gap` shows")
    assert cells[1].source == "x = '{doc}`deviations`'"  # code is left as it is
    assert len(cells) == 2  # a cell about a dataset the page did not run is dropped, download included
    assert not keep_notebook_links_inside(page, {"index", "01_readiness_gap"})  # nothing left to change
