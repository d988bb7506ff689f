"""The build report: chapter seconds, closing-check counts and new model calls of a built book."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timezone
from pathlib import Path

import pytest

from fhs.book import build_report as R
from fhs.book.check import FAIL, NEW, OK, OK_TOL, CheckReport, CheckRow
from fhs.llm.cache import ResponseCache
from fhs.llm.contract import Response

ROOT = Path(__file__).resolve().parent.parent


def printed_check(chapter: str, statuses: list[str]) -> str:
    rows = [CheckRow(f"m{i}", 0.5, 0.5, 0.0, None, status) for i, status in enumerate(statuses)]
    return str(CheckReport(chapter, "cpu", rows))


def notebook(path: Path, *texts: str) -> None:
    cells = [{"cell_type": "code", "metadata": {}, "source": "", "execution_count": 1,
              "outputs": [{"output_type": "stream", "name": "stdout", "text": text.splitlines(True)}]}
             for text in texts]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="seconds")


@pytest.fixture
def built(tmp_path: Path) -> Path:
    """A checkout after a build: two chapters 100 s apart, a cache with calls in and out of them."""
    t0 = 1_800_000_000.0
    log = {stem: {"key": "0" * 64, "profile": "cpu", "seconds": seconds, "finished": iso(finished),
                  "parameters": {"profile": "cpu"}}  # as fhs.book.execute.run writes them
           for stem, seconds, finished in (("01_a", 50.0, t0 + 50), ("02_b", 30.0, t0 + 130))}
    (tmp_path / "_build" / ".notebooks").mkdir(parents=True)
    (tmp_path / "_build" / ".notebooks" / "executions.json").write_text(json.dumps(log))
    notebook(tmp_path / "book" / "01_a.ipynb", "some output\n", printed_check("01_a", [OK, OK, OK_TOL]))
    notebook(tmp_path / "book" / "02_b.ipynb", printed_check("02_b", [OK, FAIL]), printed_check("02_b", [NEW]))
    cache = ResponseCache(tmp_path / ".fhs-cache" / "responses.sqlite")
    calls = {"early": (t0 - 500, 99, 9, 9.0),  # replayed from an earlier build: no chapter's
             "a1": (t0 + 10, 100, 10, 4.0), "a2": (t0 + 49, 200, 20, 6.0),
             "b1": (t0 + 120, 300, 30, 7.5)}
    cache.put_many([(key, "llama", "m", "p", Response("x", tin, tout, sec))
                    for key, (_, tin, tout, sec) in calls.items()])
    with sqlite3.connect(cache.path) as db:
        db.executemany("UPDATE responses SET created = ? WHERE key = ?",
                       [(created, key) for key, (created, *_rest) in calls.items()])
    return tmp_path


def test_check_counts_adds_up_every_check_a_notebook_printed():
    text = printed_check("x", [OK, OK, FAIL]) + "\n" + printed_check("x", [OK_TOL, NEW, NEW])
    assert R.check_counts(text) == {OK: 2, OK_TOL: 1, FAIL: 1, NEW: 2}
    assert R.check_counts("a page with no check\n48 OK in prose is not a counts line") == {}


def test_chapter_costs_read_the_log_the_notebooks_and_the_calls_each_chapter_stored(built):
    costs = {c.chapter: c for c in R.chapter_costs(built)}
    assert list(costs) == ["01_a", "02_b"]
    assert costs["01_a"].seconds == 50.0 and costs["01_a"].checks == {OK: 2, OK_TOL: 1, FAIL: 0, NEW: 0}
    assert costs["02_b"].checks == {OK: 1, OK_TOL: 0, FAIL: 1, NEW: 1}
    assert costs["01_a"].model == R.ModelCalls(2, 300, 30, 10.0)
    assert costs["02_b"].model == R.ModelCalls(1, 300, 30, 7.5)


def test_markdown_lists_extra_steps_first_and_totals_everything(built):
    table = R.markdown(R.chapter_costs(built), [("install", 20.0)])
    lines = table.splitlines()
    assert lines[2].startswith("| install | 20.0 |")
    assert lines[3].startswith("| 01_a | 50.0 | 2 OK, 1 OK* | 2 | 300 | 30 | 10.0 |")
    assert lines[-1] == "| **total** | **100.0** (1.7 min) | 3 OK, 1 OK*, 1 FAIL, 1 NEW | 3 | 600 | 60 | 17.5 |"


def test_the_command_prints_the_table_and_names_what_is_missing(built, tmp_path, capsys):
    assert R.main([str(built), "--step", "install=12.5"]) == 0
    assert "| install | 12.5 |" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert R.main([str(empty)]) == 2
    assert "executions.json: no run log; build the book first" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        R.main([str(built), "--step", "install"])
    assert "expected LABEL=SECONDS" in capsys.readouterr().err


@pytest.mark.slow
def test_the_provenance_page_shows_what_the_build_cost(built):
    """The real provenance notebook, executed by papermill in the built checkout."""
    papermill = pytest.importorskip("papermill")
    jupytext = pytest.importorskip("jupytext")
    page = jupytext.read(ROOT / "notebooks" / "provenance.py")
    source, executed = built / "provenance.ipynb", built / "provenance.out.ipynb"
    jupytext.write(page, source)
    papermill.execute_notebook(str(source), str(executed), cwd=str(built), progress_bar=False,
                               kernel_name="python3", log_output=False)
    html = "".join("".join(o.get("data", {}).get("text/html", ""))
                   for cell in json.loads(executed.read_text())["cells"] for o in cell.get("outputs", []))
    assert "2 OK, 1 OK*" in html and "1 OK, 1 FAIL, 1 NEW" in html
