"""The command line: one clear line for every kind of bad input, and a run on a user's own files."""

from __future__ import annotations

import json

import pytest

from fhs.cli import main
from fhs.method.registry import METHODS


def fail(capsys, *argv: str) -> str:
    """Run the CLI expecting exit status 2; return its single stderr line."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert code == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fhs: error: ")
    return lines[0]


@pytest.fixture
def own_files(tmp_path):
    taxonomy = tmp_path / "concepts.csv"
    taxonomy.write_text("id,label,definition,datatype\n"
                        "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
                        "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n")
    fact = {"id": "f1", "context_id": "c1", "modality": "table", "value": "10", "datatype": "monetaryItemType",
            "context": "Total revenues 10 9", "gold": ["Revenues"], "row_header": "Total revenues"}
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps(fact) + "\n")
    return facts, taxonomy


def test_unknown_dataset_names_the_field_and_the_choices(capsys, tmp_path):
    line = fail(capsys, "run", "--dataset", "finc", "--method", "direct", "--out", str(tmp_path), "--data", str(tmp_path))
    assert "unknown dataset 'finc'" in line and "field 'dataset'" in line and "fincl" in line and "codiesp" in line


def test_unknown_method_fails_before_any_data_is_read(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("FHS_DATA", raising=False)
    line = fail(capsys, "run", "--dataset", "fincl", "--method", "hyde", "--out", str(tmp_path))
    assert "unknown method 'hyde'" in line and ", ".join(METHODS) in line


def test_missing_data_directory_says_how_to_set_it(capsys, tmp_path, monkeypatch):
    monkeypatch.delenv("FHS_DATA", raising=False)
    line = fail(capsys, "run", "--dataset", "fincl", "--method", "direct", "--out", str(tmp_path))
    assert "FHS_DATA" in line and "book/data.md" in line
    line = fail(capsys, "run", "--dataset", "fincl", "--method", "direct", "--out", str(tmp_path),
                "--data", str(tmp_path / "nowhere"))
    assert "data directory does not exist" in line and "nowhere" in line


def test_a_dataset_missing_from_the_data_directory_says_where_it_comes_from(capsys, tmp_path):
    line = fail(capsys, "run", "--dataset", "codiesp", "--method", "direct", "--out", str(tmp_path / "o"),
                "--data", str(tmp_path))
    assert "codiesp" in line and "zenodo" in line.lower() and "testX.tsv" in line


def test_malformed_facts_line_names_file_line_and_field(capsys, tmp_path, own_files):
    facts, taxonomy = own_files
    good = facts.read_text()
    facts.write_text(good + '{"id": "f2", "context_id": "c1"\n')
    line = fail(capsys, "run", "--facts", str(facts), "--taxonomy", str(taxonomy), "--method", "direct",
                "--out", str(tmp_path / "o"))
    assert f"{facts}:2" in line and "not valid JSON" in line
    record = json.loads(good)
    del record["datatype"]
    facts.write_text(good + json.dumps({**record, "id": "f2"}) + "\n")
    line = fail(capsys, "run", "--facts", str(facts), "--taxonomy", str(taxonomy), "--method", "direct",
                "--out", str(tmp_path / "o"))
    assert f"{facts}:2" in line and "field 'datatype'" in line and "each fact needs" in line


def test_malformed_taxonomy_row_names_file_line_and_field(capsys, tmp_path, own_files):
    facts, taxonomy = own_files
    taxonomy.write_text(taxonomy.read_text() + "OperatingExpenses,,Expenses.,monetaryItemType\n")
    line = fail(capsys, "run", "--facts", str(facts), "--taxonomy", str(taxonomy), "--method", "direct",
                "--out", str(tmp_path / "o"))
    assert f"{taxonomy}:4" in line and "field 'label'" in line


def test_facts_and_taxonomy_go_together(capsys, tmp_path, own_files):
    facts, _ = own_files
    line = fail(capsys, "run", "--facts", str(facts), "--method", "direct", "--out", str(tmp_path / "o"))
    assert "--facts and --taxonomy go together" in line


def test_a_run_on_your_own_files(capsys, tmp_path, own_files):
    facts, taxonomy = own_files
    out = tmp_path / "run"
    assert main(["run", "--facts", str(facts), "--taxonomy", str(taxonomy), "--method", "oracle",
                 "--out", str(out), "--quiet"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_facts"] == 1 and metrics["recall@1"] == 1.0
    record = json.loads((out / "records.jsonl").read_text())
    assert record["ranking"][0] == "Revenues" and record["rank"] == 1


def test_run_offers_the_named_fhs_configurations_from_the_registry():
    from fhs.cli import build_parser
    from fhs.core.errors import InputError
    from fhs.method.config import NAMED_CONFIGS

    parser = build_parser()
    args = parser.parse_args(["run", "--dataset", "codiesp", "--method", "fhs", "--out", "x",
                              "--config", "codiesp-authors"])
    assert args.config == "codiesp-authors"
    assert parser.parse_args(["run", "--dataset", "codiesp", "--method", "fhs", "--out", "x"]).config == "paper"
    with pytest.raises(InputError) as error:
        parser.parse_args(["run", "--dataset", "codiesp", "--method", "fhs", "--out", "x", "--config", "nope"])
    err = str(error.value)
    assert "invalid choice" in err and all(repr(name) in err for name in NAMED_CONFIGS), err


@pytest.mark.model
def test_fhs_run_with_each_retriever_records_it(tmp_path, monkeypatch, capsys, own_files):
    """--retriever works through the whole command and lands in the run stamp (Table 17's swap)."""
    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))
    facts, concepts = own_files
    for kind in ("bm25", "dense", "hybrid"):
        out = tmp_path / kind
        assert main(["run", "--facts", str(facts), "--taxonomy", str(concepts), "--method", "direct",
                     "--retriever", kind, "--out", str(out), "--quiet"]) == 0
        stamp = json.loads((out / "run-config.json").read_text())
        assert stamp["retriever"]["kind"] == kind and ("model" in stamp["retriever"]) == (kind != "bm25")
        assert stamp["retrieval"]["w_cov"] == (1.0 if kind == "bm25" else 0.0)
        assert ("retriever" in stamp["inputs"]) == (kind != "bm25")
        record = json.loads((out / "records.jsonl").read_text().splitlines()[0])
        assert set(record["ranking"]) == {"Revenues", "CostOfRevenue"}
    assert list((tmp_path / "cache" / "dense").glob("*.npy"))  # one embedding, shared by dense and hybrid
    capsys.readouterr()
