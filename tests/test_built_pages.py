"""What every built chapter shows: no absolute path, one check table, warnings in one line, tied figures readable.

The end-to-end tests execute one small chapter with papermill through the book's runner
(``fhs.book.execute.run``) and read the executed notebook back; they need the [book] extra.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from book_records import fact, memory_run
from fhs.book.chapters import main_results as M
from fhs.book.check import REGRESSIONS_DIR, CheckReport
from fhs.book.paths import CHECKOUT, shown_path, shown_values

TOC = """\
format: jb-book
root: book/intro
parts:
  - caption: Reproductions
    chapters:
      - file: book/01_alpha
"""

PROFILES = """\
profiles:
  smoke:
    parameters: {}
"""

CHAPTER = '''\
# %% [markdown]
# # A page

# %% tags=["parameters"]
profile = "cpu"
runs_dir = "runs"
spec = ""
server = {}

# %%
from fhs.book.page import open_page
from fhs.core.errors import warn

page = open_page("01_readiness_gap", profile, runs_dir, sample={"protocol_check": True}, llm=False)

# %%
for stage in range(15):
    warn(f"stage {stage}: 3 of 3 answers could not be parsed")

# %%
warn("only this one")

# %%
page.close({"fincl/facts": 3})
'''


SERVER_WITH_PASSWORD = "http://reader:pw-Zq81x@127.0.0.1:9/v1"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """One chapter executed through the runner, with a dataset spec and a replay archive given by absolute paths."""
    pytest.importorskip("papermill")
    pytest.importorskip("jupytext")
    tmp = tmp_path_factory.mktemp("built")
    tree, elsewhere = tmp / "checkout", tmp / "elsewhere"
    for folder in (tree / "book", tree / "notebooks", tree / "fhs", elsewhere):
        folder.mkdir(parents=True)
    (tree / "fhs" / "mod.py").write_text("X = 1\n")
    (tree / "_toc.yml").write_text(TOC)
    (tree / "notebooks" / "profiles.yaml").write_text(PROFILES)
    (tree / "book" / "intro.md").write_text("# Intro\n")
    (tree / "notebooks" / "01_alpha.py").write_text(CHAPTER)
    spec, archive = elsewhere / "greenhouse.yaml", tree / "paper.fhsa"
    spec.write_text("name: greenhouse\n")
    archive.write_bytes(b"")
    log = tmp / "stderr.txt"
    script = (f"import sys; from pathlib import Path; from fhs.book.execute import run; "
              f"sys.exit(run(Path({str(tree)!r}), 'smoke', progress_bar=False, "
              f"profiles_file=Path({str(tree / 'notebooks' / 'profiles.yaml')!r}), "
              f"overrides={{'spec': {str(spec)!r}, 'server': {{'replay': {str(archive)!r}, "
              f"'base_url': {SERVER_WITH_PASSWORD!r}}}}}))")
    with log.open("w") as err:  # the kernel writes its own log lines to the runner's stderr
        done = subprocess.run([_python(), "-c", script], cwd=tree, stdout=subprocess.PIPE, stderr=err, text=True,
                              timeout=300)
    assert done.returncode == 0, log.read_text()
    return {"tree": tree, "spec": spec, "archive": archive, "stderr": log.read_text(),
            "page": tree / "book" / "01_alpha.ipynb"}


def _python() -> str:
    import sys

    return sys.executable


def _code_cells(page: Path) -> list[dict]:
    return [cell for cell in json.loads(page.read_text())["cells"] if cell["cell_type"] == "code"]


@pytest.mark.slow
def test_an_executed_chapter_names_neither_the_checkout_nor_the_spec_by_its_absolute_path(built):
    text = built["page"].read_text()
    for absolute in (str(built["tree"]), str(CHECKOUT), str(built["spec"]), str(built["spec"].parent)):
        assert absolute not in text, absolute
    record = json.loads(text)["metadata"]["papermill"]
    assert record["input_path"] == "notebooks/01_alpha.py" and record["output_path"] == "book/01_alpha.ipynb"
    assert record["parameters"]["spec"] == "…/elsewhere/greenhouse.yaml"
    assert record["parameters"]["server"] == {"replay": "paper.fhsa", "base_url": "http://127.0.0.1:9/v1"}
    assert "pw-Zq81x" not in text  # a server's password given to the book is never in a page
    injected = next(c for c in _code_cells(built["page"]) if "injected-parameters" in c["metadata"].get("tags", []))
    assert 'spec = "…/elsewhere/greenhouse.yaml"' in "".join(injected["source"])
    run_log = (built["tree"] / "_build" / ".notebooks" / "executions.json").read_text()
    assert str(built["tree"]) not in run_log and str(built["spec"]) not in run_log  # the Provenance page prints it
    assert "pw-Zq81x" not in run_log


@pytest.mark.slow
def test_the_check_is_shown_once_as_a_table_with_its_text_as_that_outputs_fallback(built):
    close = _code_cells(built["page"])[-1]
    shown = [o for o in close["outputs"] if "Regression check" in json.dumps(o)]
    assert len(shown) == 1 and shown[0]["output_type"] == "display_data"
    data = shown[0]["data"]
    assert "<table>" in "".join(data["text/html"])
    plain = "".join(data["text/plain"])
    assert plain.startswith("Regression check: 01_readiness_gap") and "Recorded values: fhs/book/regressions/" in plain


@pytest.mark.slow
def test_a_cells_warnings_read_as_one_line_that_points_to_the_log(built):
    many, one = _code_cells(built["page"])[-3:-1]
    lines = "".join("".join(o.get("text", "")) for o in many["outputs"]).splitlines()
    assert lines == ["fhs: 15 warnings, the first: stage 0: 3 of 3 answers could not be parsed "
                     "(every one in runs/smoke/logs/01_readiness_gap.log)"]
    assert "".join("".join(o.get("text", "")) for o in one["outputs"]).strip() == "fhs: warning: only this one"
    log = (built["tree"] / "runs" / "smoke" / "logs" / "01_readiness_gap.log").read_text().splitlines()
    assert len(log) == 16 and log[14] == "fhs: warning: stage 14: 3 of 3 answers could not be parsed"


@pytest.mark.slow
def test_the_kernel_runs_without_the_unencrypted_tcp_warning(built):
    assert "without encryption" not in built["stderr"] and "IPKernelApp" not in built["stderr"]


def test_paths_are_shown_relative_to_the_folder_or_the_checkout_never_absolute(tmp_path):
    assert shown_path(tmp_path / "runs" / "x.json", tmp_path) == "runs/x.json"
    assert shown_path(REGRESSIONS_DIR / "01_readiness_gap.yaml", tmp_path) == \
        "fhs/book/regressions/01_readiness_gap.yaml"
    assert shown_path("/nowhere/at/all/my.yaml", tmp_path) == "…/all/my.yaml"
    assert shown_values({"datasets": [str(tmp_path / "a.yaml"), "fincl", "../b.yaml"], "n": 3}, tmp_path) == \
        {"datasets": ["a.yaml", "fincl", "../b.yaml"], "n": 3}


def test_a_check_reports_plain_text_names_its_regression_file_relative_to_the_checkout():
    report = CheckReport("01_readiness_gap", "smoke", source=REGRESSIONS_DIR / "01_readiness_gap.yaml")
    for text in (repr(report), report._repr_html_()):
        assert str(CHECKOUT) not in text and "PosixPath" not in text
        assert "fhs/book/regressions/01_readiness_gap.yaml" in text


def test_methods_that_tie_share_one_readable_label():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    methods = ["direct", "fhs", "hybrid", "iterative"]
    results = {("mine", m): [memory_run("mine", m, [fact("a", 1), fact("b", 1, context="c2")])] for m in methods}
    figure = M.head_depth_figure(results, ["mine"], methods, {"resamples": 20, "seed": 1})
    for ax in figure.axes:
        assert [t.get_text() for t in ax.texts] == ["direct, fhs, hybrid,\niterative"]
        assert ax.texts[0].get_ha() == "right"  # at Recall@50 = 1 the label sits left of the point
    assert [names for *_, names in M.tied_groups({"a": (1.0, 0.5), "b": (1.0, 0.501), "c": (0.2, 0.5)})] == \
        [["a", "b"], ["c"]]
