"""The hold-out check: a spec for facts the project has never seen, against us-gaap-2024, runs
``fhs run --dataset spec.yaml`` and chapter 01 by papermill parameter (needs FHS_DATA)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fhs.book.execute import Plan, execute
from fhs.book.manifest import chapter_parameters
from fhs.book.toc import Chapter
from fhs.data.datasets.fincl import load
from fhs.data.taxonomies import load_taxonomy

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.data, pytest.mark.slow]


@pytest.fixture(scope="module")
def held_out(tmp_path_factory) -> Path:
    """Six FinCL facts, renamed, in a facts file of their own with a spec beside it."""
    data = Path(os.environ.get("FHS_DATA", ROOT.parent / "shared" / "data"))
    facts = load(data, load_taxonomy("us-gaap-2024", data))
    chosen = facts[10:16]
    folder = tmp_path_factory.mktemp("held-out")
    with (folder / "filing-facts.jsonl").open("w") as out:
        for number, fact in enumerate(chosen):
            record = {**fact.to_dict(), "id": f"held-{number}", "context_id": f"ctx-{fact.context_id}"}
            out.write(json.dumps(record) + "\n")
    (folder / "filing.yaml").write_text("name: held-out-filing\nfacts: filing-facts.jsonl\ntaxonomy: us-gaap-2024\n")
    return folder / "filing.yaml"


def test_fhs_run_takes_the_spec(held_out, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "fhs.cli", "run", "--dataset", str(held_out), "--method", "direct",
                           "--quiet", "--out", str(tmp_path / "out")], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert metrics["n_facts"] == 6
    assert json.loads((tmp_path / "out" / "run-config.json").read_text())["dataset"] == "held-out-filing"


def test_chapter_01_runs_on_the_spec_by_parameter(held_out, tmp_path, monkeypatch):
    pytest.importorskip("papermill")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's fhs
    stem = "01_readiness_gap"
    parameters = chapter_parameters(stem, "smoke", {"datasets": [str(held_out)], "runs_dir": "runs",
                                                           "bootstrap_resamples": 50})
    parameters["profile"] = "smoke"
    chapter = Chapter(stem, ROOT / "notebooks" / f"{stem}.py", tmp_path / "book" / f"{stem}.ipynb")
    # cwd tmp_path: the chapter's runs and saved results land there, not in the checkout
    execute(Plan(chapter, parameters, key="", reason="test"), kernel="python3", root=tmp_path,
            failed_dir=tmp_path / "failed", progress_bar=False)
    saved = json.loads((tmp_path / "runs" / "smoke" / "results" / f"{stem}.json").read_text())
    assert saved["held-out-filing/facts"] == 6  # filed under the spec's name
    assert set(saved) >= {f"held-out-filing/{m}/recall@10" for m in ("direct", "oracle", "direct-located")}
    text = (tmp_path / "book" / f"{stem}.ipynb").read_text()
    # the closing check: every metric of the new dataset NEW (a count line "N NEW."), none failed
    assert re.search(r"\b\d+ NEW\. gap = ours - paper", text) and not re.search(r"\b\d+ (FAIL|OK)\b", text)
    tables = "".join("".join(output.get("data", {}).get("text/html", "")) for cell in json.loads(text)["cells"]
                     for output in cell.get("outputs", []))
    assert "held-out-filing" in tables and str(held_out) not in tables  # rows carry the spec's name, not its path
    assert "direct-located" in tables  # FinCL's facts have headers: the located query stands beside direct


@pytest.mark.model
def test_chapters_02_and_03_run_on_the_spec_by_parameter_in_the_smoke_profile(held_out, tmp_path, monkeypatch):
    """The LLM chapters take the spec like the built-ins (SmolLM2 on one fact, one seeded run):
    chapter 02's table and chapter 03's Table 6 on the user's facts, each metric filed under its name
    as new; chapter 03's development tables keep the built-in development split. Chapter 02 runs FHS and
    direct only (its ``methods`` parameter): the spec reaching it does not need every baseline's model calls."""
    pytest.importorskip("papermill")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    main = {"datasets": [str(held_out)], "methods": ["direct", "fhs"]}
    for stem, given in (("02_main_results", main), ("03_ablations", {"dataset": str(held_out)})):
        parameters = chapter_parameters(stem, "smoke", {**given, "runs_dir": "runs", "bootstrap_resamples": 50,
                                                              "llm_limit": 1, "runs": 1,
                                                              "cache_dir": str(tmp_path / "cache")})
        parameters["profile"] = "smoke"
        chapter = Chapter(stem, ROOT / "notebooks" / f"{stem}.py", tmp_path / "book" / f"{stem}.ipynb")
        execute(Plan(chapter, parameters, key="", reason="test"), kernel="python3", root=tmp_path,
                failed_dir=tmp_path / "failed", progress_bar=False)
        saved = json.loads((tmp_path / "runs" / "smoke" / "results" / f"{stem}.json").read_text())
        assert any(key.startswith("held-out-filing/fhs") for key in saved), sorted(saved)[:20]
        text = (tmp_path / "book" / f"{stem}.ipynb").read_text()
        assert re.search(r"\b\d+ NEW\b", text) and not re.search(r"\b\d+ FAIL\b", text), stem
    assert "runs 2 of the" in (tmp_path / "book" / "02_main_results.ipynb").read_text()  # the page says so
    main_saved = json.loads((tmp_path / "runs" / "smoke" / "results" / "02_main_results.json").read_text())
    assert {key.split("/")[1] for key in main_saved if key.count("/") == 2} == {"direct", "fhs", "oracle"}
