"""A dataset as a spec file: read, loaded, run, checked and recorded like a built-in one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from fhs.book import check as C
from fhs.book.study import Study
from fhs.core.errors import InputError
from fhs.data.datasets import DATASETS, resolve_dataset
from fhs.data.datasets.spec_file import read_spec_file
from fhs.run.dataset_offers import dataset_has, lacking, modalities
from fhs.run.inputs import load_experiment, retrieval_config

ROOT = Path(__file__).resolve().parents[1]
CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n"
            "NetIncomeLoss,Net Income Loss,Profit or loss for the period.,monetaryItemType\n")
FACTS = [
    {"id": "a1", "context_id": "t1", "modality": "table", "value": "10", "datatype": "monetaryItemType",
     "context": "Total revenues 10 9", "gold": ["Revenues"], "row_header": "Total revenues"},
    {"id": "a2", "context_id": "t1", "modality": "table", "value": "4", "datatype": "monetaryItemType",
     "context": "Cost of revenue 4 3", "gold": ["CostOfRevenue"], "row_header": "Cost of revenue"},
    {"id": "a3", "context_id": "s1", "modality": "text", "value": "2", "datatype": "monetaryItemType",
     "context": "Net income was 2 million for the year.", "gold": ["NetIncomeLoss"]},
]


def write_spec(folder: Path, **fields) -> Path:
    """A spec file beside its facts and concept files (relative paths, as a user writes them)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.jsonl").write_text("".join(json.dumps(f) + "\n" for f in FACTS))
    (folder / "concepts.csv").write_text(CONCEPTS)
    spec = {"name": "my-filing", "facts": "facts.jsonl", "taxonomy": "concepts.csv", **fields}
    path = folder / "my-filing.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in spec.items() if v is not None}))
    return path


def test_a_spec_file_resolves_paths_beside_itself_and_takes_defaults(tmp_path):
    spec = read_spec_file(write_spec(tmp_path / "inputs"))
    assert spec.name == "my-filing" and spec.source == (tmp_path / "inputs" / "my-filing.yaml").resolve()
    assert spec.facts_file == (tmp_path / "inputs" / "facts.jsonl").resolve()
    assert spec.taxonomy == "concepts" and spec.taxonomy_file == (tmp_path / "inputs" / "concepts.csv").resolve()
    assert spec.domain == "" and spec.dev is None and spec.oracle_query == "label-definition"
    assert resolve_dataset(str(spec.source)) == spec  # wherever a dataset name is accepted


def test_a_built_in_taxonomy_brings_its_datasets_domain_retrieval_and_oracle(tmp_path):
    spec = read_spec_file(write_spec(tmp_path, taxonomy="icd-10-cm"))
    codiesp = DATASETS["codiesp"]
    assert (spec.domain, spec.retrieval, spec.oracle_with_id) == (codiesp.domain, codiesp.retrieval, True)
    assert retrieval_config(spec) == retrieval_config("icd-10-cm")  # the taxonomy's settings
    own = read_spec_file(write_spec(tmp_path / "b", taxonomy="icd-10-cm", retrieval={"top_k": 50},
                                    oracle="label-definition", domain="us-gaap"))
    assert retrieval_config(own).top_k == 50 and retrieval_config(own).pool_multiplier == 10
    assert (own.oracle_with_id, own.domain) == (False, "us-gaap")


def test_the_built_ins_are_specs_with_their_settings():
    assert DATASETS["ixbrl"].dev == "ixbrl-dev" and DATASETS["fincl"].dev is None
    assert retrieval_config(DATASETS["codiesp"]).pool_multiplier == 10
    assert retrieval_config(DATASETS["fincl"]) == retrieval_config("us-gaap-2024")
    assert DATASETS["codiesp"].oracle_query == "id-label-definition"


def test_a_spec_loads_runs_and_is_filed_under_its_name(tmp_path):
    path = write_spec(tmp_path / "inputs", domain="us-gaap", dev=None)
    experiment = load_experiment(str(path))
    assert [f.id for f in experiment.facts] == ["a1", "a2", "a3"] and len(experiment.taxonomy) == 3
    assert modalities(experiment) == ("table", "text")
    assert dataset_has(experiment, "domain") and not dataset_has(experiment, "dev")
    assert lacking(experiment, ["dev", "table"]) == ["dev"]
    study = Study.for_profile("smoke", tmp_path / "runs", progress=False)
    run = study.run(str(path), "direct")
    assert run.path.parent == tmp_path / "runs" / "smoke" / "my-filing"
    assert json.loads((run.path / "run-config.json").read_text())["dataset"] == "my-filing"
    assert len(run.summaries) == 3 and run.metrics["recall@1"] == pytest.approx(
        sum(s["rank"] == 1 for s in run.summaries) / 3)
    assert study.run("my-filing", "direct").path == run.path  # the name finds the same experiment
    assert study.has(str(path), "text") and not study.has(str(path), "dev")


def test_two_spec_files_with_one_name_are_refused(tmp_path):
    study = Study.for_profile("smoke", tmp_path / "runs", progress=False)
    study.experiment(str(write_spec(tmp_path / "a")))
    other = write_spec(tmp_path / "b", description="another filing")
    with pytest.raises(InputError, match="field 'name'.*already named 'my-filing'"):
        study.experiment(str(other))


REGRESSION = """\
chapter: demo
metrics:
  fincl/direct/recall@1:
    description: 'fincl: Recall@1 of the raw fact'
    paper: fintagging/direct/recall@1
    precision: 4
    tolerance: 1.0e-09
  fincl/facts:
    description: 'fincl: facts'
    precision: 0
expected:
  smoke:
    fincl/direct/recall@1: 0.25
    fincl/facts: 200
inputs:
  smoke:
    fincl/facts: aaaa
"""


def test_a_new_dataset_is_new_not_failed_and_record_adds_it(tmp_path, monkeypatch):
    (tmp_path / "reg").mkdir()
    (tmp_path / "reg" / "demo.yaml").write_text(REGRESSION)
    path = write_spec(tmp_path / "inputs")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(C, "REGRESSIONS_DIR", tmp_path / "reg")
    results = {f"{path}/direct/recall@1": 0.5, f"{path}/facts": 3}  # a chapter keys results by its parameter
    inputs = {f"{path}/facts": "bbbb"}
    report = C.check(results, "demo", "smoke", inputs=inputs, directory=tmp_path / "reg", quiet=True)
    assert [(r.metric, r.status, r.paper) for r in report.rows] == [
        ("my-filing/direct/recall@1", C.NEW, None), ("my-filing/facts", C.NEW, None)]
    assert not report.input_changes  # fincl was not run, so its fingerprint is not compared
    report.assert_ok()
    assert C.main(["record", "demo", "--profile", "smoke", "--results-root", "runs"]) == 0
    recorded = C.load_regression("demo", tmp_path / "reg")
    assert recorded.expected_for("smoke")["my-filing/facts"].value == 3
    assert recorded.expected_for("smoke")["fincl/direct/recall@1"].value == 0.25  # the other dataset stays
    assert recorded.metrics["my-filing/direct/recall@1"].description == "my-filing: Recall@1 of the raw fact"
    assert recorded.inputs_for("smoke") == {"fincl/facts": "aaaa", "my-filing/facts": "bbbb"}
    again = C.check(results, "demo", "smoke", inputs=inputs, directory=tmp_path / "reg", save=False, quiet=True)
    assert {r.status for r in again.rows} == {C.OK}


def test_an_unrelated_undefined_metric_is_still_an_error(tmp_path):
    (tmp_path / "demo.yaml").write_text(REGRESSION)
    with pytest.raises(InputError, match="not defined"):
        C.check({"fincl/direct/recall@7": 0.1}, "demo", "smoke", directory=tmp_path, save=False)
    with pytest.raises(InputError, match="not defined"):
        C.check({"elsewhere/unknown": 0.1}, "demo", "smoke", directory=tmp_path, save=False)


def fhs(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fhs.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


def test_fhs_run_takes_a_spec_file_and_records_where_its_files_are(tmp_path):
    path = write_spec(tmp_path / "inputs")
    done = fhs("run", "--dataset", str(path), "--method", "direct", "--quiet", "--out", "out", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    stamp = json.loads((tmp_path / "out" / "run-config.json").read_text())
    assert stamp["dataset"] == "my-filing"
    assert not Path(stamp["sources"]["spec"]).is_absolute()  # relative to the run's folder: no absolute path
    assert (tmp_path / "out" / stamp["sources"]["spec"]).resolve() == path.resolve()
    assert len((tmp_path / "out" / "records.jsonl").read_text().splitlines()) == 3


# Each case: (what it writes into the spec, the field the one line names, words the line holds)
BAD_SPECS = [
    ({"colour": "red"}, "colour", "unknown field"),
    ({"facts": None}, "facts", "missing required field"),
    ({"facts": "nowhere.jsonl"}, "facts", "no such facts file"),
    ({"taxonomy": "us-gaap-1999"}, "taxonomy", "unknown taxonomy"),
    ({"taxonomy": "missing.csv"}, "taxonomy", "no such concept file"),
    ({"domain": "astrology"}, "domain", "unknown domain"),
    ({"domain": "missing.yaml"}, "domain", "no such domain file"),
    ({"oracle": "gold-label"}, "oracle", "unknown oracle query form"),
    ({"retrieval": {"depth": 3}}, "retrieval.depth", "not a retrieval setting"),
    ({"retrieval": {"top_k": "many"}}, "retrieval.top_k", "expected a whole number"),
    ({"retrieval": [1, 2]}, "retrieval", "expected a mapping"),
    ({"name": "fincl"}, "name", "built-in dataset"),
    ({"name": "my filing/2"}, "name", "not a usable name"),
    ({"dev": "ixbrl-devel"}, "dev", "unknown development split"),
    ({"dev": "missing-dev.yaml"}, "dev", "no such spec file"),
    ({"facts": 7}, "facts", "expected a string"),
]


@pytest.mark.parametrize("fields, field, words", BAD_SPECS, ids=[case[1] + ":" + case[2] for case in BAD_SPECS])
def test_a_bad_spec_is_one_line_naming_the_file_and_field(tmp_path, fields, field, words):
    path = write_spec(tmp_path / "inputs", **fields)
    if fields.get("facts") is None and "facts" in fields:
        raw = yaml.safe_load(path.read_text())
        raw.pop("facts", None)
        path.write_text(yaml.safe_dump(raw))
    with pytest.raises(InputError) as error:
        load_experiment(str(path))
    line = str(error.value)
    assert str(path.resolve()) in line and f"field '{field}'" in line and words in line
    assert "\n" not in line


def test_a_bad_spec_on_the_command_line_exits_2_with_one_line(tmp_path):
    path = write_spec(tmp_path / "inputs", colour="red")
    done = fhs("run", "--dataset", str(path), "--method", "direct", "--out", "out", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0 and "field 'colour'" in done.stderr and str(path.name) in done.stderr
    missing = fhs("run", "--dataset", "nowhere.yaml", "--method", "direct", "--out", "out", cwd=tmp_path)
    assert missing.returncode == 2 and "no such dataset spec file" in missing.stderr
    assert not (tmp_path / "out").exists()


def test_not_yaml_and_not_a_mapping_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    with pytest.raises(InputError, match=r"bad.yaml:2: not valid YAML"):  # the line YAML stopped at
        read_spec_file(bad)
    bad.write_text("- a\n- list\n")
    with pytest.raises(InputError, match="bad.yaml: expected a mapping"):
        read_spec_file(bad)


def test_fhs_plan_sizes_the_chapters_on_a_spec(tmp_path):
    path = write_spec(tmp_path / "inputs", domain="us-gaap")
    done = fhs("plan", "--profile", "smoke", "--chapter", "01_readiness_gap", "--chapter", "02_main_results",
               "--dataset", str(path), "--json", "--quiet", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)["rows"]
    assert {row["dataset"] for row in rows} == {str(path)}
    assert {"direct", "oracle", "fhs"} <= {row["method"] for row in rows}
    assert all(row["facts"] == 3 for row in rows if row["chapter"] == "02_main_results")


def test_a_chapters_run_of_a_spec_stamps_where_its_files_are(tmp_path):
    from fhs.book.verified_inputs import vouched_inputs

    path = write_spec(tmp_path / "inputs")
    run = Study.for_profile("smoke", tmp_path / "runs", progress=False).run(str(path), "direct")
    stamp = json.loads((run.path / "run-config.json").read_text())
    assert (run.path / stamp["sources"]["spec"]).resolve() == path.resolve()
    facts, taxonomy, note = vouched_inputs(stamp, None, run.path)  # what `fhs show` reads back
    assert [f.id for f in facts] == ["a1", "a2", "a3"] and len(taxonomy) == 3 and note == ""
