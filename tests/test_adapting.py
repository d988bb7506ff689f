"""The adapter's conveniences: built-in taxonomies by name and as files, facts from any iXBRL filing.

``fhs taxonomy export`` must write a file the generic loader reads back
concept for concept; ``fhs facts from-ixbrl`` must reproduce the ``ixbrl``
dataset's facts of a filing exactly (it runs the same extraction).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fhs.cli import main
from fhs.data.datasets import load_facts
from fhs.data.datadir import data_dir, source_dir
from fhs.data.facts import read_facts
from fhs.data.taxonomies import load_taxonomy, load_taxonomy_file
from fhs.data.taxonomies.generic import write_generic
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.run.records import read_records

TOY = Taxonomy.from_concepts("toy", [
    Concept("Revenues", "Revenues", "Amount of revenue, \"quoted\", with a comma.", "monetaryItemType",
            {"balance": "credit", "period_type": "duration", "datatype": "monetaryItemType"}),
    Concept("R11.0", "Hypertensive heart disease with heart failure", "", "diagnosis", {"chapter": "9"}),
])


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv"])
def test_a_written_concept_file_reads_back_identically(tmp_path, suffix):
    path = write_generic(TOY, tmp_path / f"toy{suffix}")
    back = load_taxonomy_file(path)
    if suffix == ".jsonl":
        assert back == TOY
    else:  # a table has one column set: a concept without a field reads back with "" there
        assert [(c.id, c.label, c.definition, c.datatype) for c in back] == \
            [(c.id, c.label, c.definition, c.datatype) for c in TOY]
        assert back.get("R11.0").metadata["chapter"] == "9" and back.get("R11.0").metadata["balance"] == ""
        assert back.get("Revenues").metadata == {**TOY.get("Revenues").metadata, "chapter": ""}


def test_export_refuses_an_unknown_name_and_an_unknown_file_type(tmp_path, capsys):
    assert main(["taxonomy", "export", "us-gaap-1999", "--out", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "us-gaap-2024" in err and "icd-10-cm" in err
    assert main(["taxonomy", "export", "icd-10-cm", "--out", str(tmp_path / "x.xlsx")]) == 2
    assert ".jsonl" in capsys.readouterr().err


def test_icd_10_cm_exported_and_read_back_is_the_same_taxonomy(tmp_path, capsys):
    out = tmp_path / "icd-10-cm.jsonl"
    assert main(["taxonomy", "export", "icd-10-cm", "--out", str(out)]) == 0
    assert "concepts of icd-10-cm" in capsys.readouterr().out
    assert load_taxonomy_file(out) == load_taxonomy("icd-10-cm")


@pytest.mark.data
def test_us_gaap_exported_and_read_back_is_the_same_taxonomy(tmp_path):
    out = tmp_path / "us-gaap-2024.jsonl"
    assert main(["taxonomy", "export", "us-gaap-2024", "--out", str(out)]) == 0
    assert load_taxonomy_file(out) == load_taxonomy("us-gaap-2024")


def test_own_facts_against_a_built_in_taxonomy_by_name(tmp_path, capsys):
    fact = {"id": "m1", "context_id": "d1", "modality": "text", "value": "hypertensive heart disease",
            "datatype": "diagnosis", "context": "History of hypertensive heart disease with heart failure.",
            "gold": ["I11.0"], "sentence": "History of hypertensive heart disease with heart failure."}
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps(fact) + "\n")
    out = tmp_path / "run"
    assert main(["run", "--facts", str(facts), "--taxonomy", "icd-10-cm", "--method", "direct", "--quiet",
                 "--out", str(out)]) == 0
    (record,) = read_records(out / "records.jsonl")
    assert record["rank"] is not None and record["rank"] <= 10
    config = json.loads((out / "run-config.json").read_text())
    assert config["sources"]["taxonomy"] == "icd-10-cm" and config["sources"]["domain"] == "icd-10-cm"
    assert config["retrieval"]["pool_multiplier"] == 10  # CodiEsp's retrieval setting comes with the name
    capsys.readouterr()
    assert main(["show", str(out), "--fact", "m1", "--out", str(tmp_path / "p.html")]) == 0
    assert "hypertensive heart disease" in (tmp_path / "p.html").read_text()


FILING = "aapl-20250329"  # a 2024-taxonomy filing of the ixbrl test split


@pytest.mark.data
def test_facts_from_ixbrl_reproduce_the_datasets_facts_of_that_filing(tmp_path, capsys):
    root = data_dir(None)
    expected = [f for f in load_facts("ixbrl", root, load_taxonomy("us-gaap-2024"), progress=False)
                if f.metadata["filing"] == FILING]
    assert len(expected) > 500
    out = tmp_path / "facts.jsonl"
    assert main(["facts", "from-ixbrl", str(source_dir("ixbrl", root) / f"{FILING}.htm.gz"), "--out", str(out)]) == 0
    assert f"{len(expected):,} located facts" in capsys.readouterr().out
    assert read_facts(out) == expected


def test_facts_from_a_missing_filing_name_the_file(tmp_path, capsys):
    assert main(["facts", "from-ixbrl", str(tmp_path / "nope.htm"), "--out", str(tmp_path / "f.jsonl"),
                 "--taxonomy", "none"]) == 2
    assert "nope.htm" in capsys.readouterr().err


def test_a_spec_files_run_names_its_inputs_relative_to_its_folder_and_show_still_finds_them(tmp_path, capsys):
    """A run's records are published with an adapter's book: they name the spec's files relative to the run's
    folder, never by an absolute path, and `fhs show` reads the facts back through that path."""
    fixture = Path(__file__).parent / "fixtures" / "adapter"
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("concepts.csv", "ghg-domain.yaml", "targets.csv"):
        (mine / name).write_text((fixture / name).read_text())
    assert main(["facts", "from-table", str(mine / "targets.csv"), "--taxonomy", str(mine / "concepts.csv"),
                 "--out", str(mine / "facts.jsonl")]) == 0
    spec = tmp_path / "my.yaml"
    spec.write_text("name: ghg\nfacts: mine/facts.jsonl\ntaxonomy: mine/concepts.csv\ndomain: mine/ghg-domain.yaml\n")
    out = tmp_path / "runs" / "direct"
    assert main(["run", "--dataset", str(spec), "--method", "direct", "--quiet", "--out", str(out)]) == 0
    config = (out / "run-config.json").read_text()
    assert str(tmp_path) not in config and str(tmp_path) not in (out / "metrics.json").read_text()
    assert json.loads(config)["sources"]["facts"] == "../../mine/facts.jsonl"
    (record,) = read_records(out / "records.jsonl")
    capsys.readouterr()
    assert main(["show", str(out), "--fact", record["id"], "--out", str(tmp_path / "p.html")]) == 0
    assert "Reduction of scope 1 and 2 emissions" in (tmp_path / "p.html").read_text()
