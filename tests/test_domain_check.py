"""``fhs domain check``: line-numbered errors, overlap warnings, a taxonomy's view; --domain for own files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fhs.cli import main
from fhs.core.errors import InputError
from fhs.data.domain import load_domain
from fhs.data.domain_check import check_domain
from fhs.data.taxonomy import Concept, Taxonomy

US_GAAP = Path(__file__).resolve().parents[1] / "fhs" / "data" / "domains" / "us-gaap.yaml"
GOOD = """\
name: tiny
taxonomy: TINY
evidence: a mention
dimensions:
{dimensions}
operators:
  - name: direct_label
    gloss: the mention names it
profile:
  approach:
    categories:
      open: [open approach]
      endoscopic: [percutaneous endoscopic approach]
      percutaneous: [percutaneous approach]
"""
SIX = "".join(f"  - name: D{i}\n    gloss: gloss {i}\n    verifier_gloss: judged {i}\n    examples: [x{i}]\n"
              for i in range(6))


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "domain.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_good_file_passes_with_an_overlap_warning(tmp_path):
    report = check_domain(write(tmp_path, GOOD.format(dimensions=SIX)))
    assert report.ok, report.errors
    assert len(report.warnings) == 1
    assert "domain.yaml:37" in report.warnings[0] and "'percutaneous endoscopic approach'" in report.warnings[0]


def test_a_missing_gloss_is_named_with_its_line(tmp_path):
    broken = SIX.replace("    gloss: gloss 3\n", "")
    report = check_domain(write(tmp_path, GOOD.format(dimensions=broken)))
    assert report.errors == [f"{tmp_path / 'domain.yaml'}:17, field 'dimensions[3].gloss': missing required key"]
    with pytest.raises(InputError, match=r"domain.yaml:17, field 'dimensions\[3\].gloss'"):
        load_domain(tmp_path / "domain.yaml")  # loading says the line too


def test_five_dimensions_are_a_warning_as_fhs_run_accepts_them_and_twin_glosses_are_errors(tmp_path):
    five = "".join(SIX.split("  - name: ")[i] and "  - name: " + SIX.split("  - name: ")[i] for i in range(1, 6))
    report = check_domain(write(tmp_path, GOOD.format(dimensions=five)))
    assert report.ok and any(":4: field 'dimensions': 5 dimensions, not the paper's 6" in w for w in report.warnings)
    twins = SIX.replace("judged 4", "judged 1")
    report = check_domain(write(tmp_path, GOOD.format(dimensions=twins)))
    assert sum("same verifier gloss" in e for e in report.errors) == 2


def test_bad_yaml_and_bad_types_have_lines(tmp_path):
    report = check_domain(write(tmp_path, GOOD.format(dimensions=SIX) + "  broken: [\n"))
    assert len(report.errors) == 1 and "not valid YAML" in report.errors[0]
    report = check_domain(write(tmp_path, GOOD.format(dimensions=SIX).replace("open: [open approach]", "open: 3")))
    assert report.errors and ":36, field 'profile.approach.categories.open'" in report.errors[0]


def test_against_a_taxonomy_unused_categories_and_metadata_keys(tmp_path):
    text = GOOD.format(dimensions=SIX) + "  section:\n    from_metadata: section_name\n"
    taxonomy = Taxonomy.from_concepts("t", [Concept("A", "Resection, Open Approach"),
                                            Concept("B", "Resection, Percutaneous Approach")])
    report = check_domain(write(tmp_path, text), taxonomy)
    assert report.profiles == 2
    assert any("category endoscopic matches no concept" in w for w in report.warnings)
    assert any("no concept of t has metadata 'section_name'" in w for w in report.warnings)


def test_the_bundled_domains_pass():
    assert check_domain(US_GAAP).ok


def test_cli_domain_check_exit_status(tmp_path, capsys):
    assert main(["domain", "check", str(write(tmp_path, GOOD.format(dimensions=SIX)))]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["domain", "check", str(write(tmp_path, GOOD.format(dimensions=SIX[:40])))]) == 1
    assert "error:" in capsys.readouterr().err


def test_llm_methods_on_own_files_need_a_domain(tmp_path, capsys):
    concepts = tmp_path / "concepts.csv"
    concepts.write_text("id,label\n0DT60ZZ,Resection of Stomach\n")
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"id": "f", "context_id": "c", "modality": "text", "value": "gastrectomy",
                                 "datatype": "", "context": "gastrectomy", "gold": ["0DT60ZZ"]}) + "\n")
    for method in ("structured", "fhs"):
        code = main(["run", "--facts", str(facts), "--taxonomy", str(concepts), "--method", method,
                     "--profile", "smoke", "--out", str(tmp_path / method)])
        err = capsys.readouterr().err
        assert code == 2 and "field 'domain'" in err and "--domain" in err


@pytest.mark.model
def test_fhs_runs_on_own_procedure_files_with_the_adapters_domain(tmp_path, capsys):
    """The PCS domain file shipped in fhs/book/pcs/ drives a real model through `fhs run` (SmolLM2, smoke profile)."""
    domain = Path(__file__).resolve().parents[1] / "fhs" / "book" / "pcs" / "icd-10-pcs.yaml"
    concepts = tmp_path / "concepts.tsv"
    concepts.write_text("id\tlabel\tdatatype\tsection_name\n"
                        "0DT60ZZ\tResection of Stomach, Open Approach\tprocedure\tMedical and Surgical\n"
                        "0DTJ4ZZ\tResection of Appendix, Percutaneous Endoscopic Approach\tprocedure\t"
                        "Medical and Surgical\n"
                        "BW40ZZZ\tUltrasonography of Abdomen\tprocedure\tImaging\n")
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"id": "f", "context_id": "c", "modality": "text", "value": "laparoscopic appendectomy",
                                 "datatype": "procedure", "context": "A laparoscopic appendectomy was performed.",
                                 "gold": ["0DTJ"], "metadata": {"gold_match": "prefix"}}) + "\n")
    code = main(["run", "--facts", str(facts), "--taxonomy", str(concepts), "--domain", str(domain),
                 "--method", "fhs", "--profile", "smoke", "--quiet", "--out", str(tmp_path / "run"),
                 "--cache", str(tmp_path / "llm.sqlite")])
    assert code == 0, capsys.readouterr().err
    record = json.loads((tmp_path / "run" / "records.jsonl").read_text().splitlines()[0])
    assert record["gold_match"] == "prefix" and record["rank"] is not None  # three concepts, all ranked
    assert record["llm_calls"]  # the hypotheses, verifier and selector asked the model
