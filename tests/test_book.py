"""fhs.book.execute: which chapters run, with which parameters, and when they are skipped.

The planning tests build a tiny book in a temporary folder and need only PyYAML.
The end-to-end test executes real notebooks with papermill and needs the [book]
extra, which ``make test`` installs; it is skipped only where that extra is absent.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from fhs.book import execute as B
from fhs.book import toc as C
from fhs.core.errors import InputError

TOC = """\
format: jb-book
root: book/intro
parts:
  - caption: Reproductions
    chapters:
      - file: book/01_alpha
      - file: book/02_beta
        sections:
          - file: book/notes
  - caption: About
    chapters:
      - file: book/provenance
"""

PROFILES = """\
profiles:
  smoke:
    parameters: {limit: 5, model: tiny, seed: 1}
  cpu:
    parameters: {limit: null, model: small, seed: 1}
chapters:
  02_beta:
    parameters:
      cpu: {limit: 50}
  provenance:
    summary: true
"""


def notebook_source(body: str, parameters: str) -> str:
    """A Jupytext percent-format chapter with a parameters cell."""
    return (
        "# %% [markdown]\n# # Title\n\n"
        '# %% tags=["parameters"]\n' + textwrap.dedent(parameters) + "\n"
        "# %%\n" + textwrap.dedent(body) + "\n"
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "book").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "fhs").mkdir()
    (tmp_path / "fhs" / "mod.py").write_text("X = 1\n")
    (tmp_path / "_toc.yml").write_text(TOC)
    (tmp_path / "notebooks" / "profiles.yaml").write_text(PROFILES)
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "book" / "notes.md").write_text("# Notes\n")
    (tmp_path / "notebooks" / "01_alpha.py").write_text(
        notebook_source("print(limit)", 'profile = "cpu"\nlimit = None\n'))
    (tmp_path / "notebooks" / "02_beta.py").write_text(
        notebook_source("print(model)", 'profile = "cpu"\nmodel = "x"\nlimit = None\n'))
    (tmp_path / "notebooks" / "provenance.py").write_text(
        notebook_source("print(run_log)", 'profile = "cpu"\nrun_log = ""\n'))
    return tmp_path


def declared(tree: Path) -> dict[str, set[str]]:
    return {"01_alpha": {"profile", "limit"}, "02_beta": {"profile", "model", "limit"},
            "provenance": {"profile", "run_log"}}


def test_toc_files_in_reading_order(tree):
    assert C.toc_files(tree / "_toc.yml") == [
        "book/intro", "book/01_alpha", "book/02_beta", "book/notes", "book/provenance"]


def test_chapters_are_the_toc_entries_with_notebook_sources(tree):
    chapters = C.chapters_from_toc(tree, summaries=["provenance"])
    assert [c.stem for c in chapters] == ["01_alpha", "02_beta", "provenance"]
    assert chapters[0].source == tree / "notebooks" / "01_alpha.py"
    assert chapters[0].output == tree / "book" / "01_alpha.ipynb"
    assert [c.summary for c in chapters] == [False, False, True]


def test_toc_entry_without_any_source_is_an_error(tree):
    (tree / "book" / "notes.md").unlink()
    with pytest.raises(InputError, match="book/notes.*no source"):
        C.chapters_from_toc(tree)


def test_toc_entry_with_two_sources_is_an_error(tree):
    (tree / "book" / "01_alpha.md").write_text("# duplicate\n")
    with pytest.raises(InputError, match="both"):
        C.chapters_from_toc(tree)


def test_profile_parameters_merge_chapter_overrides(tree):
    profiles = C.load_profiles(tree / "notebooks" / "profiles.yaml")
    assert profiles.parameters("cpu", "01_alpha") == {
        "limit": None, "model": "small", "seed": 1, "profile": "cpu"}
    assert profiles.parameters("cpu", "02_beta")["limit"] == 50  # override for cpu
    assert profiles.parameters("smoke", "02_beta")["limit"] == 5  # not for smoke
    assert profiles.summaries == ("provenance",)
    with pytest.raises(InputError, match="unknown profile 'gpu'"):
        profiles.parameters("gpu", "01_alpha")


def test_profile_file_errors_name_the_field(tmp_path):
    path = tmp_path / "profiles.yaml"
    path.write_text("profiles:\n  cpu: {limit: 3}\n")
    with pytest.raises(InputError, match="profiles.cpu.parameters"):
        C.load_profiles(path)
    path.write_text("profiles:\n  cpu: {parameters: {}}\nchapters:\n  a: {parameters: {gpu: {}}}\n")
    with pytest.raises(InputError, match="chapters.a.parameters.gpu"):
        C.load_profiles(path)


def test_parse_assignment_reads_yaml_values():
    assert C.parse_assignment("limit=null") == ("limit", None)
    assert C.parse_assignment("runs=3") == ("runs", 3)
    assert C.parse_assignment("base_url=http://h:8000/v1") == ("base_url", "http://h:8000/v1")
    assert C.parse_assignment("seeds=[0, 1]") == ("seeds", [0, 1])
    with pytest.raises(InputError):
        C.parse_assignment("novalue")


def test_declared_parameters_reads_the_tagged_cell():
    notebook = {"cells": [
        {"metadata": {}, "source": "a = 1"},
        {"metadata": {"tags": ["parameters"]}, "source": "limit = None  # c\nmodel: str = 'm'\n"},
    ]}
    assert B.declared_parameters(notebook) == {"limit", "model"}
    assert B.declared_parameters({"cells": []}) == set()


def _plan(tree, log, **kwargs):
    profiles = C.load_profiles(tree / "notebooks" / "profiles.yaml")
    chapters = C.chapters_from_toc(tree, summaries=profiles.summaries)
    return {p.chapter.stem: p for p in B.plan(chapters, profiles, kwargs.pop("profile", "cpu"),
                                                log, root=tree, kernel="python3",
                                                declared=declared(tree), **kwargs)}


def _mark_done(tree, log, plans):
    for stem, p in plans.items():
        p.chapter.output.write_text("{}")
        log.entries[stem] = {"key": p.key}


def test_plan_runs_everything_first_then_nothing(tree):
    log = B.RunLog(tree / "_build" / "executions.json")
    first = _plan(tree, log)
    assert {stem: p.reason for stem, p in first.items()} == {
        "01_alpha": "no output yet", "02_beta": "no output yet", "provenance": "no output yet"}
    # only declared names are passed; run_log only to the chapter that asks for it
    assert first["01_alpha"].parameters == {"profile": "cpu", "limit": None}
    assert first["02_beta"].parameters == {"profile": "cpu", "model": "small", "limit": 50}
    assert first["provenance"].parameters["run_log"] == str(B.STATE_DIR / "executions.json")
    _mark_done(tree, log, first)
    assert not any(p.needed for p in _plan(tree, log).values())
    assert all(p.needed and p.reason == "forced" for p in _plan(tree, log, force=True).values())


def test_a_changed_source_reruns_that_chapter_and_the_summary(tree):
    log = B.RunLog(tree / "_build" / "executions.json")
    _mark_done(tree, log, _plan(tree, log))
    source = tree / "notebooks" / "02_beta.py"
    source.write_text(source.read_text() + "\n# %%\nprint('more')\n")
    needed = {stem for stem, p in _plan(tree, log).items() if p.needed}
    assert needed == {"02_beta", "provenance"}


def test_a_changed_package_file_reruns_every_chapter(tree):
    log = B.RunLog(tree / "_build" / "executions.json")
    _mark_done(tree, log, _plan(tree, log))
    (tree / "fhs" / "mod.py").write_text("X = 2\n")
    assert all(p.needed for p in _plan(tree, log).values())


def test_parameters_change_only_the_chapters_that_declare_them(tree):
    log = B.RunLog(tree / "_build" / "executions.json")
    _mark_done(tree, log, _plan(tree, log))
    plans = _plan(tree, log, overrides={"model": "other"})  # only 02_beta declares model
    assert {stem for stem, p in plans.items() if p.needed} == {"02_beta", "provenance"}


def test_the_mapping_parameters_merge_key_by_key_and_take_their_keys_given_alone():
    """``server`` and ``sample`` merge over the profile; ``-p base_url=...`` (the flat name chapters took before)
    and ``-p server.model=...`` join the mapping of a chapter that declares it; a null key is its default."""
    profile = {"sample": {"bootstrap_resamples": 200}, "server": {}, "llm_limit": None}
    given = C.merged(profile, {"sample": {"runs": 1}, "base_url": "http://gpu:8000/v1", "server.model": "m",
                               "llm_limit": 3, "thinking": None})
    assert given["sample"] == {"bootstrap_resamples": 200, "runs": 1}
    folded = C.folded(given, {"profile", "server", "sample"})
    assert folded["server"] == {"base_url": "http://gpu:8000/v1", "model": "m"}
    assert folded["sample"] == {"bootstrap_resamples": 200, "runs": 1, "llm_limit": 3}
    assert "base_url" not in folded and "thinking" not in folded
    # a chapter that declares the flat name keeps it flat
    assert C.folded({"base_url": "u"}, {"base_url", "server"}) == {"base_url": "u"}


def test_a_missing_output_reruns_even_with_a_matching_key(tree):
    log = B.RunLog(tree / "_build" / "executions.json")
    _mark_done(tree, log, _plan(tree, log))
    (tree / "book" / "01_alpha.ipynb").unlink()
    assert _plan(tree, log)["01_alpha"].reason == "no output yet"


def test_run_log_survives_a_damaged_file(tmp_path):
    path = tmp_path / "executions.json"
    path.write_text("{not json")
    assert B.RunLog.load(path).entries == {}
    log = B.RunLog(path, {"a": {"key": "k"}})
    log.save()
    assert json.loads(path.read_text()) == {"a": {"key": "k"}}


def test_dry_run_prints_the_plan_without_executing(tree, capsys, monkeypatch):
    pytest.importorskip("jupytext")
    monkeypatch.setenv("FHS_DATA", str(tree))
    assert B.run(tree, "smoke", dry_run=True, profiles_file=tree / "notebooks" / "profiles.yaml") == 0
    out = capsys.readouterr().out
    assert "profile smoke: 3 of 3 chapter(s) to execute" in out
    assert '"limit": 5' in out
    assert not (tree / "book" / "01_alpha.ipynb").exists()


@pytest.mark.slow
def test_run_executes_skips_and_reports_a_failing_cell(tree, capsys, monkeypatch):
    pytest.importorskip("papermill")
    pytest.importorskip("jupytext")
    monkeypatch.chdir(tree)
    assert B.run(tree, "smoke", progress_bar=False, profiles_file=tree / "notebooks" / "profiles.yaml") == 0
    executed = json.loads((tree / "book" / "01_alpha.ipynb").read_text())
    outputs = [o for c in executed["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
    tags = [c["metadata"].get("tags", []) for c in executed["cells"]]
    assert ["parameters", "remove-cell"] in tags  # defaults hidden from the reader
    assert ["injected-parameters"] in tags  # what actually ran is shown
    texts = ["".join(o.get("text", "")).strip() for o in outputs]
    assert "5" in texts  # limit from the smoke profile
    log = json.loads((tree / "_build" / ".notebooks" / "executions.json").read_text())
    assert set(log) == {"01_alpha", "02_beta", "provenance"}
    assert (tree / "_build" / ".notebooks" / "timings.tsv").read_text().count("\tok\n") == 3
    capsys.readouterr()

    assert B.run(tree, "smoke", progress_bar=False, profiles_file=tree / "notebooks" / "profiles.yaml") == 0
    assert "0 of 3 chapter(s) to execute" in capsys.readouterr().out

    (tree / "notebooks" / "02_beta.py").write_text(
        notebook_source("raise ValueError('broken on purpose')", 'profile = "cpu"\n'))
    assert B.run(tree, "smoke", progress_bar=False, profiles_file=tree / "notebooks" / "profiles.yaml") == 1
    err = capsys.readouterr().err
    assert "02_beta.py failed in cell" in err
    assert "raise ValueError('broken on purpose')" in err  # the cell source
    assert "ValueError: broken on purpose" in err  # the traceback
    assert (tree / "_build" / ".notebooks" / "failed" / "02_beta.ipynb").is_file()
    assert "02_beta" not in json.loads((tree / "_build" / ".notebooks" / "executions.json").read_text())


def test_a_summary_page_listed_first_runs_after_the_chapters_it_reports_on(tree):
    """The claims page sits near the front of the TOC but judges every chapter's values, so it runs last."""
    toc = tree / "_toc.yml"
    toc.write_text(toc.read_text().replace("      - file: book/01_alpha\n",
                                           "      - file: book/claims\n      - file: book/01_alpha\n"))
    (tree / "notebooks" / "claims.py").write_text(notebook_source("print(profile)", 'profile = "cpu"\n'))
    profiles = tree / "notebooks" / "profiles.yaml"
    profiles.write_text(profiles.read_text() + "  claims:\n    summary: true\n")
    log = B.RunLog(tree / "_build" / "executions.json")
    plans = B.plan(C.chapters_from_toc(tree, summaries=C.load_profiles(profiles).summaries),
                   C.load_profiles(profiles), "cpu", log, root=tree, kernel="python3",
                   declared={**declared(tree), "claims": {"profile"}})
    assert [p.chapter.stem for p in plans] == ["01_alpha", "02_beta", "claims", "provenance"]
    _mark_done(tree, log, {p.chapter.stem: p for p in plans})
    source = tree / "notebooks" / "02_beta.py"
    source.write_text(source.read_text() + "\n# %%\nprint('more')\n")
    again = B.plan(C.chapters_from_toc(tree, summaries=C.load_profiles(profiles).summaries),
                   C.load_profiles(profiles), "cpu", log, root=tree, kernel="python3",
                   declared={**declared(tree), "claims": {"profile"}})
    assert {p.chapter.stem for p in again if p.needed} == {"02_beta", "claims", "provenance"}
