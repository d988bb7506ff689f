"""Every chapter is prose plus a few calls: at most about 80 lines of code and no function of its own.

Tables, figures, tallies and case rules live in ``fhs/book/`` modules, with
tests; a chapter that grows past the limit has started computing inline again.
Code lines are the non-blank, non-comment lines of a chapter's code cells
(Jupytext percent format); the parameters cell counts too.
"""

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from fhs.book.registry import REGISTRY

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
MAX_CODE_LINES = 90  # "about 80": the largest chapter (08, an adapter's own inputs) needs 90
CHAPTERS = [NOTEBOOKS / f"{stem}.py" for stem in REGISTRY.stems]


def code_cells(path: Path) -> list[list[str]]:
    """The code lines of each code cell (markdown cells and comments left out)."""
    cells, current, kind = [], [], None
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# %%"):
            if kind == "code":
                cells.append(current)
            kind, current = ("markdown" if "[markdown]" in line else "code"), []
        elif kind == "code" and line.strip() and not line.strip().startswith("#"):
            current.append(line)
    if kind == "code":
        cells.append(current)
    return [cell for cell in cells if cell]


def test_every_chapter_is_found():
    assert CHAPTERS and all(path.is_file() for path in CHAPTERS)


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_chapter_is_prose_plus_a_few_calls(path):
    lines = [line for cell in code_cells(path) for line in cell]
    assert len(lines) <= MAX_CODE_LINES, f"{path.name}: {len(lines)} code lines (at most {MAX_CODE_LINES})"
    defined = [line.strip() for line in lines if re.match(r"\s*(async\s+)?(def|class)\s", line)]
    assert not defined, f"{path.name} defines {defined}: move it into an fhs/book module with a test"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_set_up_and_plot_cells_show_no_code(path):
    """The cell that imports ``fhs`` is hidden, and so is every cell that calls ``plt.show``."""
    text = path.read_text(encoding="utf-8")
    for header, body in re.findall(r"^(# %%.*)\n((?:(?!# %%).*\n?)*)", text, flags=re.M):
        if "[markdown]" in header or "parameters" in header:
            continue
        hidden = "hide-input" in header or "remove-input" in header or "remove-cell" in header
        if re.search(r"^from fhs\.book", body, flags=re.M) or "plt.show()" in body:
            assert hidden, f"{path.name}: the cell starting {body.splitlines()[0]!r} shows its code"


MAX_PARAMETER_LINES = 8  # the server and sample settings are one mapping each (fhs/book/page.py)


def parameters_cell(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    match = re.search(r'^# %% tags=\["parameters"\]\n((?:(?!# %%).*\n?)*)', text, flags=re.M)
    assert match, f"{path.name}: no parameters cell"
    return [line for line in match.group(1).splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.stem)
def test_a_chapter_opens_and_closes_alike(path):
    """A short parameters cell with the server settings as one mapping; modules by their full names; one
    closing helper (the same check, record and page time on every page)."""
    cell = parameters_cell(path)
    assert len(cell) <= MAX_PARAMETER_LINES, f"{path.name}: {len(cell)} parameter lines, at most {MAX_PARAMETER_LINES}"
    names = {line.split("=")[0].strip() for line in cell}
    assert "sample" in names and not names & {"backend", "base_url", "cache_dir", "seed", "llm_limit"}, names
    text = path.read_text(encoding="utf-8")
    aliased = re.findall(r"^from (fhs\S*) import (\w+) as \w+", text, flags=re.M)
    packages = [(package, name) for package, name in aliased if hasattr(importlib.import_module(package), "__path__")]
    modules = [f"{package}.{name}" for package, name in packages if importlib.util.find_spec(f"{package}.{name}")]
    assert not modules and not re.search(r"^import fhs\S* as ", text, flags=re.M), \
        f"{path.name} imports a module under an alias: {modules}"
    assert 'open_page("' + path.stem + '"' in text and text.count("page.close(") == 1, path.name
