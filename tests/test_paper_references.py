"""A regression file names the paper's figures by path into fhs/paper.py and never copies them."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from fhs.book import check as C
from fhs.core.errors import InputError
from fhs.paper import ABLATION, FHS_SEQ, TABLES, lookup

BUILT_IN = sorted(C.REGRESSIONS_DIR.glob("*.yaml"))


def write(directory: Path, paper_line: str) -> Path:
    path = directory / "demo.yaml"
    path.write_text(f"""\
chapter: demo
metrics:
  fincl/no_verifier/mrr:
    description: MRR without the verifier
    precision: 3
    tolerance: {{default: 1.0e-09, paper: 0.03}}
{paper_line}
  count:
    description: facts
    precision: 0
    paper: null
expected:
  cpu:
    fincl/no_verifier/mrr: 0.2
    count: 5
""")
    return path


def test_a_reference_resolves_to_the_number_fhs_paper_holds(tmp_path):
    write(tmp_path, "    paper: ablation/no_verifier/mrr")
    metric = C.load_regression("demo", tmp_path).metrics["fincl/no_verifier/mrr"]
    assert metric.paper == ABLATION["no_verifier"]["mrr"]
    assert metric.paper_reference == "ablation/no_verifier/mrr"
    assert metric.tolerance_for("paper") == 0.03  # a tolerance keyed "paper" is not a paper value
    assert C.load_regression("demo", tmp_path).metrics["count"].paper is None


@pytest.mark.parametrize("reference, says", [
    ("ablation/no_verifier/mmr", "ablation/no_verifier has no 'mmr'"),
    ("table-99/fhs/mrr", "TABLES has no 'table-99'"),
    ("fintagging/direct/accuracy", "a cell the paper does not report"),
    ("fintagging/direct", "a table, not a number"),
    ("fintagging/direct/mrr/more", "nothing lies under it"),
])
def test_a_reference_that_names_no_number_is_one_line_naming_file_metric_and_path(tmp_path, reference, says):
    path = write(tmp_path, f"    paper: {reference}")
    with pytest.raises(InputError) as error:
        C.load_regression("demo", tmp_path)
    message = str(error.value)
    assert "\n" not in message
    assert str(path) in message and "metrics.fincl/no_verifier/mrr.paper" in message
    assert repr(reference) in message and says in message


def test_the_command_line_reports_a_bad_reference_in_one_line_and_exits_2(tmp_path, monkeypatch, capsys):
    write(tmp_path, "    paper: ablation/no_verifier/mmr")
    monkeypatch.setattr(C, "REGRESSIONS_DIR", tmp_path)
    C.save_results({"count": 5}, "demo", "cpu", tmp_path / "runs")
    assert C.main(["verify", "demo", "--profile", "cpu", "--results-root", str(tmp_path / "runs")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "demo.yaml" in err and "'ablation/no_verifier/mmr'" in err


@pytest.mark.parametrize("number", ["0.205", "2509", "-0.006"])
def test_a_number_typed_into_paper_is_refused_with_the_fix(tmp_path, number):
    write(tmp_path, f"    paper: {number}")
    with pytest.raises(InputError, match=r"metrics\.fincl/no_verifier/mrr\.paper.*written as the number.*"
                                         r"add the number to fhs/paper\.py"):
        C.load_regression("demo", tmp_path)


def test_record_writes_references_back_never_their_numbers(tmp_path):
    write(tmp_path, "    paper: ablation/no_verifier/mrr")
    path = C.record("demo", "smoke", {"fincl": {"no_verifier": {"mrr": 0.3}}, "count": 4}, directory=tmp_path)
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert raw["metrics"]["fincl/no_verifier/mrr"]["paper"] == "ablation/no_verifier/mrr"
    assert raw["metrics"]["fincl/no_verifier/mrr"]["tolerance"] == {"default": 1.0e-09, "paper": 0.03}
    assert C.load_regression("demo", tmp_path).metrics["fincl/no_verifier/mrr"].paper == ABLATION["no_verifier"]["mrr"]


@pytest.mark.parametrize("path", BUILT_IN, ids=[p.stem for p in BUILT_IN])
def test_record_on_a_built_in_file_keeps_every_paper_line(tmp_path, monkeypatch, path):
    """``python -m fhs.book.check record`` on a copy of a shipped file, fed its own recorded values."""
    shutil.copy(path, tmp_path / path.name)
    before = yaml.safe_load(path.read_text(encoding="utf-8"))
    regression = C.load_regression(path.stem, tmp_path)
    profile = next(iter(regression.expected), "cpu")
    results = {name: e.value for name, e in regression.expected_for(profile).items()}
    C.save_results(results, path.stem, profile, tmp_path / "runs")
    monkeypatch.setattr(C, "REGRESSIONS_DIR", tmp_path)
    assert C.main(["record", path.stem, "--profile", profile, "--results-root", str(tmp_path / "runs")]) == 0
    after = yaml.safe_load((tmp_path / path.name).read_text(encoding="utf-8"))
    papers = {name: (spec or {}).get("paper") for name, spec in before["metrics"].items()}
    assert {name: (spec or {}).get("paper") for name, spec in after["metrics"].items()} == papers


def test_there_are_built_in_files_with_references():
    assert sum(1 for path in BUILT_IN for spec in yaml.safe_load(path.read_text())["metrics"].values()
               if isinstance((spec or {}).get("paper"), str)) > 100


@pytest.mark.parametrize("path", BUILT_IN, ids=[p.stem for p in BUILT_IN])
def test_every_built_in_paper_entry_is_a_reference_that_resolves(path):
    raw = yaml.safe_load(path.read_text(encoding="utf-8"))["metrics"]
    metrics = C.load_regression(path.stem).metrics
    for name, spec in raw.items():
        reference = (spec or {}).get("paper")
        assert reference is None or isinstance(reference, str), f"{path.name}: {name} holds a number"
        if reference is not None:
            assert isinstance(metrics[name].paper, float) and metrics[name].paper == lookup(reference)


def test_lookup_walks_every_table_of_fhs_paper():
    assert set(TABLES) >= {"fintagging", "codiesp", "appendix-g", "ablation", "verifier", "relocation"}
    assert lookup("relocation/rate") == TABLES["relocation"]["exact"] / TABLES["relocation"]["mentions"]
    assert lookup("fintagging/fhs-seq/delta_recall@50") == FHS_SEQ["delta_recall@50"][0]  # Table 20's estimate
