"""Taxonomy loaders: generic concept files, FASB XML, the US-GAAP merge, ICD-10-CM, the registry.

Unit tests run on files written here or under tests/fixtures/; tests marked
``data`` read the real inventories (FHS_DATA, the installed ICD package).
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from fhs.core.errors import InputError
from fhs.core.text import camel_split, token_set
from fhs.data.taxonomies import clear_taxonomy_cache, load_taxonomy, load_taxonomy_file, taxonomy_names
from fhs.data.taxonomies.cache import cache_path, read_taxonomy_cache, write_taxonomy_cache
from fhs.data.taxonomies.fasb import load_fasb
from fhs.data.taxonomies.generic import load_generic
from fhs.data.taxonomies.icd10cm import icd_role, normalize_icd_code
from fhs.data.taxonomies.usgaap import build_us_gaap, element_kind
from fhs.data.taxonomy import Concept, Taxonomy

FIXTURES = Path(__file__).parent / "fixtures"
FASB = FIXTURES / "fasb"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- generic concept files -------------------------------------------------------------------

def test_generic_jsonl_keeps_fields_and_metadata(tmp_path):
    path = write(tmp_path / "mini.jsonl", "\n".join([
        json.dumps({"id": "A1", "label": "Alpha", "definition": "First.", "datatype": "t", "group": "g1"}),
        "",
        json.dumps({"id": 7, "label": "Seven", "weight": 2.5, "tags": ["x", "y"], "note": None}),
    ]) + "\n")
    taxonomy = load_generic(path)
    assert taxonomy.name == "mini"
    assert [c.id for c in taxonomy] == ["A1", "7"]
    first, second = taxonomy["A1"], taxonomy["7"]
    assert (first.label, first.definition, first.datatype) == ("Alpha", "First.", "t")
    assert first.metadata == {"group": "g1"}
    assert (second.definition, second.datatype) == ("", "")
    assert second.metadata == {"weight": "2.5", "tags": json.dumps(["x", "y"]), "note": ""}
    assert first.index_text == "A1. Alpha. First."


def test_generic_csv_and_tsv(tmp_path):
    csv_path = write(tmp_path / "codes.csv",
                     'id,label,definition,family\nK1,"Kilo, one",,alpha\n\nK2,Kilo two,Second one.,beta\n')
    taxonomy = load_taxonomy_file(csv_path, name="kilo")
    assert taxonomy.name == "kilo"
    assert [(c.id, c.label, c.definition, c.metadata["family"]) for c in taxonomy] == [
        ("K1", "Kilo, one", "", "alpha"), ("K2", "Kilo two", "Second one.", "beta")]
    tsv_path = write(tmp_path / "codes.tsv", "id\tlabel\tdatatype\nT1\tTango\tdiagnosis\n")
    assert load_generic(tsv_path)["T1"].datatype == "diagnosis"


@pytest.mark.parametrize("lines, line, field, words", [
    ([{"id": "A", "label": "a"}, {"id": "B"}], 2, "label", "missing or empty"),
    ([{"id": "A", "label": "a"}, {"id": "  ", "label": "b"}], 2, "id", "missing or empty"),
    ([{"id": "A", "label": "a"}, {"id": "C", "label": "c"}, {"id": "A", "label": "again"}], 3, "id",
     "duplicate id 'A' (first seen on line 1)"),
    ([{"id": "A", "label": {"en": "a"}}], 1, "label", "expected text, got dict"),
])
def test_generic_jsonl_bad_rows_name_file_line_field(tmp_path, lines, line, field, words):
    path = write(tmp_path / "bad.jsonl", "\n".join(json.dumps(row) for row in lines) + "\n")
    with pytest.raises(InputError) as caught:
        load_generic(path)
    message = str(caught.value)
    assert message.startswith(f"{path}:{line}, field '{field}': ")
    assert words in message


def test_generic_invalid_json_names_the_line(tmp_path):
    path = write(tmp_path / "broken.jsonl", '{"id": "A", "label": "a"}\n{"id": "B", "label": \n')
    with pytest.raises(InputError, match=rf"^{re.escape(str(path))}:2: not valid JSON"):
        load_generic(path)
    write(path, '["A", "a"]\n')
    with pytest.raises(InputError, match=r":1: expected a JSON object, got list"):
        load_generic(path)


def test_generic_csv_errors(tmp_path):
    no_label = write(tmp_path / "no_label.csv", "id,name\nA,alpha\n")
    with pytest.raises(InputError, match=r"no_label\.csv:1, field 'label': header lacks column\(s\) label"):
        load_generic(no_label)
    ragged = write(tmp_path / "ragged.csv", "id,label\nA,alpha\nB,beta,extra\n")
    with pytest.raises(InputError, match=r"ragged\.csv:3: row has 3 fields, header has 2"):
        load_generic(ragged)
    duplicate = write(tmp_path / "dup.csv", "id,label\nA,alpha\nA,again\n")
    with pytest.raises(InputError, match=r"dup\.csv:3, field 'id': duplicate id 'A' \(first seen on line 2\)"):
        load_generic(duplicate)
    with pytest.raises(InputError, match=r"unknown taxonomy file type '\.txt'"):
        load_generic(write(tmp_path / "codes.txt", "id,label\n"))
    with pytest.raises(InputError, match=r"no concepts in file"):
        load_generic(write(tmp_path / "empty.jsonl", "\n"))


# --- FASB taxonomy files -------------------------------------------------------------------

def load_fixture_fasb(*linkbases: str) -> Taxonomy:
    return load_fasb(FASB / "us-gaap-2024.xsd", [FASB / name for name in linkbases])


def test_fasb_labels_documentation_and_attributes():
    taxonomy = load_fixture_fasb("us-gaap-lab-2024.xml", "us-gaap-doc-2024.xml")
    assert taxonomy.name == "us-gaap"
    assert [c.id for c in taxonomy] == ["Assets", "AssetsAbstract", "Revenues", "EarningsPerShareBasic",
                                        "StatementBusinessSegmentsAxis", "ConcentrationRiskPercentage1"]
    assets = taxonomy["Assets"]
    assert (assets.label, assets.datatype) == ("Assets", "monetaryItemType")
    assert assets.definition == "Amount of asset recognized for present right to economic benefit."
    assert {key: assets.metadata[key] for key in ("period_type", "balance", "abstract", "kind")} == {
        "period_type": "instant", "balance": "debit", "abstract": "false", "kind": "item"}
    # The abstract element has a label but no documentation.
    abstract = taxonomy["AssetsAbstract"]
    assert (abstract.label, abstract.definition) == ("Assets [Abstract]", "")
    assert (abstract.metadata["abstract"], abstract.metadata["kind"]) == ("true", "abstract")
    # English label chosen over the German one listed first; line breaks collapsed.
    revenues = taxonomy["Revenues"]
    assert revenues.label == "Revenues" and revenues.metadata["balance"] == "credit"
    assert "goods sold, services rendered" in revenues.definition
    # The standard label wins over the terse label; the type prefix (dtr-types:) is dropped.
    eps = taxonomy["EarningsPerShareBasic"]
    assert (eps.label, eps.datatype, eps.metadata["balance"]) == ("Earnings Per Share, Basic", "perShareItemType", "")
    assert eps.metadata["label_tokens"] == str(len(token_set("Earnings Per Share, Basic")))
    axis = taxonomy["StatementBusinessSegmentsAxis"]
    assert (axis.metadata["kind"], axis.metadata["substitution_group"]) == ("axis", "dimensionItem")
    # No label at all: fall back to the camel-split name, and say so.
    bare = taxonomy["ConcentrationRiskPercentage1"]
    assert (bare.label, bare.definition) == (camel_split("ConcentrationRiskPercentage1"), "")
    assert bare.metadata["label_source"] == "name"


def test_fasb_without_documentation_linkbase_has_no_definitions():
    taxonomy = load_fixture_fasb("us-gaap-lab-2024.xml")
    assert all(concept.definition == "" for concept in taxonomy)
    assert taxonomy["Revenues"].label == "Revenues"


def fasb_copy(tmp_path: Path, edit_linkbase) -> tuple[Path, Path]:
    schema = write(tmp_path / "us-gaap-2024.xsd", (FASB / "us-gaap-2024.xsd").read_text())
    linkbase = write(tmp_path / "us-gaap-lab-2024.xml", edit_linkbase((FASB / "us-gaap-lab-2024.xml").read_text()))
    return schema, linkbase


def line_of(path: Path, needle: str) -> int:
    return next(number for number, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_fasb_malformed_xml_names_file_and_line(tmp_path):
    schema, linkbase = fasb_copy(tmp_path, lambda text: text.replace("</link:labelLink>", "</link:labelLnk>"))
    with pytest.raises(InputError) as caught:
        load_fasb(schema, [linkbase])
    assert str(caught.value).startswith(f"{linkbase}:{line_of(linkbase, '</link:labelLnk>')}: malformed XML")
    broken_schema = write(tmp_path / "broken.xsd", "<xs:schema xmlns:xs='http://www.w3.org/2001/XMLSchema'>\n<xs:element")
    with pytest.raises(InputError, match=rf"^{re.escape(str(broken_schema))}:2: malformed XML"):
        load_fasb(broken_schema, [])


def test_fasb_loc_pointing_at_no_element(tmp_path):
    schema, linkbase = fasb_copy(tmp_path, lambda text: text.replace("#us-gaap_Revenues", "#us-gaap_Revenue"))
    with pytest.raises(InputError) as caught:
        load_fasb(schema, [linkbase])
    message = str(caught.value)
    assert message.startswith(f"{linkbase}:{line_of(linkbase, '#us-gaap_Revenue')}, field 'xlink:href': ")
    assert "points at no element of us-gaap-2024.xsd" in message


def test_fasb_loc_into_another_schema_and_dangling_arc(tmp_path):
    schema, linkbase = fasb_copy(tmp_path, lambda text: text.replace(
        'xlink:href="us-gaap-2024.xsd#us-gaap_Assets"', 'xlink:href="../dei/dei-2024.xsd#dei_Assets"'))
    with pytest.raises(InputError, match=r"points into dei-2024\.xsd, not the schema us-gaap-2024\.xsd"):
        load_fasb(schema, [linkbase])
    schema, linkbase = fasb_copy(tmp_path, lambda text: text.replace(
        'xlink:to="lab_Revenues"', 'xlink:to="lab_Revenue"'))
    with pytest.raises(InputError, match=rf":{line_of(linkbase, 'lab_Revenue' + chr(34))}, field 'xlink:to': "
                                         r"labelArrow to 'lab_Revenue' names no link:label"):
        load_fasb(schema, [linkbase])


# --- US-GAAP inventory + terminology merge (fixture files) ----------------------------------

def write_inventory(path: Path, tags_and_types: list[tuple[str, str]]) -> Path:
    rows = [{"us_gaap_tag": f"us-gaap:{tag}", "entity_type": datatype, "text": camel_split(tag)}
            for tag, datatype in tags_and_types]
    return write(path, "\n".join(json.dumps(row) for row in rows) + "\n")


def write_terminology(path: Path, rows: list[tuple[object, object]]) -> Path:
    import openpyxl

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.append(["Term", "Explanation", None, None])
    for row in rows:
        sheet.append(list(row))
    workbook.save(path)
    return path


MINI_TAGS = [
    ("StockholdersEquityOther", "monetaryItemType"),
    ("LinesOfCreditCurrent", "monetaryItemType"),
    ("DepositAssets", "monetaryItemType"),
    ("DepositsAssets", "monetaryItemType"),
    ("SegmentsAxis", "stringItemType"),
    ("IncomeTaxDisclosureTextBlock", "textBlockItemType"),
    ("LoansAndLeasesReceivableNetReportedAmount", "monetaryItemType"),
    ("ConcentrationRiskPercentage1", "percentItemType"),
]
MINI_TERMS = [
    ("Stockholders' Equity, Other", "Other equity."),                 # exact (apostrophe, comma)
    ("Line of Credit, Current", "Current part of a credit line."),    # plural-insensitive
    ("Deposit Assets", "Deposits held as assets."),                   # exact although a plural twin exists
    ("Deposit Asset", "Ambiguous between two names."),               # plural key names two concepts
    ("Stockholders Equity, Other", "A later duplicate."),             # same concept again: shadowed
    ("Loans and Leases Receivable, Net Amount", "Renamed element."),  # the name abbreviates: unmatched
    ("Concentration Risk, Percentage", "Share of a benchmark."),      # re-issued as <Name>1: versioned
    ("abstract", "A glossary entry, not a concept."),                 # unmatched
    (None, None),                                                     # blank row: skipped
    ("#NAME?", "#NAME?"),                                             # Excel error cells: skipped
]


def test_us_gaap_merge_rules(tmp_path):
    inventory = write_inventory(tmp_path / "inventory.jsonl", MINI_TAGS)
    terminology = write_terminology(tmp_path / "terms.xlsx", MINI_TERMS)
    taxonomy, report = build_us_gaap(inventory, terminology)
    assert [c.id for c in taxonomy] == [tag for tag, _ in MINI_TAGS]
    assert {tag: match.how for tag, match in report.matches.items()} == {
        "StockholdersEquityOther": "exact", "LinesOfCreditCurrent": "plural", "DepositAssets": "exact",
        "ConcentrationRiskPercentage1": "versioned"}
    assert taxonomy["StockholdersEquityOther"].definition == "Other equity."
    assert taxonomy["LinesOfCreditCurrent"].definition == "Current part of a credit line."
    assert taxonomy["DepositsAssets"].definition == ""
    assert taxonomy["ConcentrationRiskPercentage1"].definition == "Share of a benchmark."
    assert [row.term for row in report.ambiguous] == ["Deposit Asset"]
    assert [row.term for row in report.shadowed] == ["Stockholders Equity, Other"]
    assert [row.term for row in report.unmatched] == ["Loans and Leases Receivable, Net Amount", "abstract"]
    assert report.skipped_rows == 2
    # Default label = the inventory's camel-split name; the FASB label is kept in metadata.
    equity = taxonomy["StockholdersEquityOther"]
    assert equity.label == "Stockholders Equity Other"
    assert equity.metadata["fasb_label"] == "Stockholders' Equity, Other"
    assert "fasb_label" not in taxonomy["DepositsAssets"].metadata
    assert equity.metadata["label_tokens"] == str(len(token_set("Stockholders Equity Other")))
    assert taxonomy["SegmentsAxis"].metadata["kind"] == "axis"
    assert taxonomy["IncomeTaxDisclosureTextBlock"].metadata["kind"] == "text_block"
    fasb_labels, _ = build_us_gaap(inventory, terminology, label_source="fasb")
    assert fasb_labels["StockholdersEquityOther"].label == "Stockholders' Equity, Other"
    assert fasb_labels["DepositsAssets"].label == "Deposits Assets"
    with pytest.raises(InputError, match="field 'label_source': unknown label_source 'xbrl'"):
        build_us_gaap(inventory, terminology, label_source="xbrl")


def test_us_gaap_inventory_errors(tmp_path):
    bad = write(tmp_path / "inventory.jsonl", '{"us_gaap_tag": "us-gaap:A", "entity_type": "x", "text": "A"}\n'
                                               '{"us_gaap_tag": "us-gaap:B", "text": "B"}\n')
    with pytest.raises(InputError, match=r"inventory\.jsonl:2, field 'entity_type': missing or empty field"):
        build_us_gaap(bad)
    twice = write_inventory(tmp_path / "twice.jsonl", [("A", "x"), ("A", "x")])
    with pytest.raises(InputError, match=r"duplicate concept id 'A'"):
        build_us_gaap(twice)


@pytest.mark.parametrize("name, kind", [
    ("AccidentAndHealthInsuranceSegmentMember", "member"), ("StatementBusinessSegmentsAxis", "axis"),
    ("AssetsAbstract", "abstract"), ("IncomeTaxDisclosureTextBlock", "text_block"),
    ("SegmentDomain", "domain"), ("ScheduleOfDebtTable", "table"), ("ScheduleOfDebtLineItems", "line_items"),
    ("Assets", "item"), ("MembershipFees", "item"),
])
def test_element_kind_from_the_name(name, kind):
    assert element_kind(name) == kind


# --- registry and caches ---------------------------------------------------------------------

def fixture_data_dir(tmp_path: Path) -> Path:
    (tmp_path / "fintagging").mkdir()
    (tmp_path / "xbrl-terminology").mkdir()
    write_inventory(tmp_path / "fintagging" / "us_gaap_2024_BM25.jsonl", MINI_TAGS)
    write(tmp_path / "fintagging" / "FinCL-eval-subset.csv", "")
    write_terminology(tmp_path / "xbrl-terminology" / "XBRL_Terminology.xlsx", MINI_TERMS)
    return tmp_path


def test_registry_loads_caches_and_rejects_bad_names(tmp_path):
    clear_taxonomy_cache()
    data = fixture_data_dir(tmp_path)
    first = load_taxonomy("us-gaap-2024", data)
    assert len(first) == len(MINI_TAGS) and first.name == "us-gaap-2024"
    assert load_taxonomy("us-gaap-2024", data) is first
    relabelled = load_taxonomy("us-gaap-2024", data, label_source="fasb")
    assert relabelled is not first
    assert relabelled["StockholdersEquityOther"].label == "Stockholders' Equity, Other"
    assert "us-gaap-2024" in taxonomy_names() and "icd-10-cm" in taxonomy_names()
    with pytest.raises(InputError, match=r"unknown taxonomy 'icd-10'.*choose one of us-gaap-2024, icd-10-cm"):
        load_taxonomy("icd-10")
    with pytest.raises(InputError, match=r"field 'colour': taxonomy 'us-gaap-2024' has no option colour "
                                         r"\(its options are: label_source, definitions\)"):
        load_taxonomy("us-gaap-2024", data, colour="red")
    clear_taxonomy_cache()


def test_disk_cache_round_trip_stale_and_damaged(tmp_path, monkeypatch):
    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))
    taxonomy = Taxonomy.from_concepts("tiny", [
        Concept("A", "Alpha", "Ä definition.", "t", {"k": "v"}), Concept("B", "Beta")])
    path = cache_path("tiny", "v1")
    assert path.parent == tmp_path / "cache" / "taxonomies"
    write_taxonomy_cache(path, taxonomy, "v1")
    assert list(path.parent.iterdir()) == [path]  # no temporary file left behind
    assert read_taxonomy_cache(path, "v1") == taxonomy
    assert read_taxonomy_cache(path, "v2") is None
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")  # truncated
    assert read_taxonomy_cache(path, "v1") is None
    path.write_text("not json\n")
    assert read_taxonomy_cache(path, "v1") is None
    assert read_taxonomy_cache(tmp_path / "missing.jsonl", "v1") is None


# --- ICD-10-CM: code normalisation and roles ---------------------------------------------------

@pytest.mark.parametrize("raw, code", [
    ("s22.49xa", "S22.49XA"), ("S2249XA", "S22.49XA"), (" r69 ", "R69"), ("r69.", "R69"),
    ("e11.9", "E11.9"), ("QA0.8", "QA0.8"), ("o9a.119", "O9A.119"),
])
def test_normalize_icd_code(raw, code):
    assert normalize_icd_code(raw) == code


@pytest.mark.parametrize("raw", ["", "1A2", "S22.49XA1", "S2", "hello"])
def test_normalize_icd_code_rejects_non_codes(raw):
    with pytest.raises(InputError, match="field 'code': not an ICD-10-CM code"):
        normalize_icd_code(raw)


@pytest.mark.parametrize("code, role", [
    ("C50.911", "neoplasm"), ("D49.9", "neoplasm"), ("D00.00", "neoplasm"), ("D50.0", "disease/disorder"),
    ("S22.49XA", "injury/poisoning"), ("T36.0X1A", "injury/poisoning"), ("V29.9XXA", "external cause"),
    ("W19.XXXA", "external cause"), ("Y92.009", "external cause"), ("Z79.4", "health-status factor"),
    ("O80", "pregnancy-related"), ("P07.30", "perinatal"), ("Q21.1", "congenital"),
    ("R11.0", "symptom/sign/abnormal-finding"), ("E11.9", "disease/disorder"), ("U07.1", "disease/disorder"),
])
def test_icd_role_from_prefix(code, role):
    assert icd_role(code) == role


# --- real data -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data_dir() -> Path:
    from fhs.data.datadir import data_dir as resolve

    return resolve()


def independent_definition_count(inventory: Path, terminology: Path) -> tuple[set[str], dict[str, str]]:
    """Recompute the merge with pandas and plain regexes: the tags that get a definition."""
    import pandas as pd

    tags = [json.loads(line)["us_gaap_tag"].split(":")[-1] for line in inventory.open() if line.strip()]
    sheet = pd.read_excel(terminology, usecols=["Term", "Explanation"]).dropna()
    sheet = sheet[(sheet.Term != "#NAME?") & (sheet.Explanation != "#NAME?")]

    def squash(text: str) -> str:
        return re.sub(r"[^a-z0-9]", "", text.lower())

    def depluralize(words: str) -> str:
        words = re.sub(r"\b(\w{2,})ies\b", r"\1y", words)
        return squash(re.sub(r"\b(\w{3,}[^s\W])s\b", r"\1", words))

    def tag_words(tag: str) -> str:
        return " ".join(re.findall(r"[a-z0-9]+", camel_split(tag).lower()))

    def term_words(term: str) -> str:
        return " ".join(re.findall(r"[a-z0-9]+", camel_split(term.replace("'", "").replace("\u2019", "")).lower()))

    exact = {tag.lower(): tag for tag in tags}
    plural: dict[str, list[str]] = {}
    versioned: dict[str, list[str]] = {}
    for tag in tags:
        plural.setdefault(depluralize(tag_words(tag)), []).append(tag)
        if re.search(r"[A-Za-z][1-9]$", tag):
            versioned.setdefault(tag[:-1].lower(), []).append(tag)
    definitions: dict[str, str] = {}
    plural_hits: list[tuple[str, str]] = []
    versioned_hits: list[tuple[str, str]] = []
    for term, explanation in zip(sheet.Term, sheet.Explanation):
        term, explanation = " ".join(str(term).split()), " ".join(str(explanation).split())
        key = squash(term_words(term))
        if key in exact:
            definitions.setdefault(exact[key], explanation)
        elif len(plural.get(depluralize(term_words(term)), [])) == 1:
            plural_hits.append((plural[depluralize(term_words(term))][0], explanation))
        elif len(versioned.get(key, [])) == 1:
            versioned_hits.append((versioned[key][0], explanation))
    for tag, explanation in plural_hits + versioned_hits:  # exact > plural > versioned
        definitions.setdefault(tag, explanation)
    return set(definitions), definitions


@pytest.mark.data
def test_us_gaap_2024_real_inventory(data_dir):
    clear_taxonomy_cache()
    taxonomy = load_taxonomy("us-gaap-2024", data_dir)
    inventory = data_dir / "fintagging" / "us_gaap_2024_BM25.jsonl"
    rows = [json.loads(line) for line in inventory.open() if line.strip()]
    assert len(taxonomy) == len(rows) == 17388
    assert {c.datatype for c in taxonomy} == {row["entity_type"] for row in rows}
    assert {"monetaryItemType", "sharesItemType", "perShareItemType", "percentItemType"} <= set(taxonomy.datatypes())
    assert all(c.label == row["text"] for c, row in zip(taxonomy, rows))

    defined = {c.id for c in taxonomy if c.definition}
    expected, expected_text = independent_definition_count(
        inventory, data_dir / "xbrl-terminology" / "XBRL_Terminology.xlsx")
    assert len(defined) > 0
    assert defined == expected
    assert all(taxonomy[tag].definition == text for tag, text in expected_text.items())
    assert all(("fasb_label" in c.metadata) == bool(c.definition) for c in taxonomy)
    assert taxonomy["Assets"].metadata["kind"] == "item"

    fasb = load_taxonomy("us-gaap-2024", data_dir, label_source="fasb")
    assert {c.id for c in fasb if c.label != taxonomy[c.id].label} <= defined
    clear_taxonomy_cache()


def package_leaves() -> set[str]:
    """Billable codes by walking the package's tree top-down with get_children (not get_all_codes)."""
    import simple_icd_10_cm as icd

    leaves: set[str] = set()
    # Depth 0 = chapter, 1 = block, 2+ = diagnosis codes.
    stack = [(code, 0) for code in icd.get_all_codes() if icd.is_chapter(code)]
    while stack:
        code, depth = stack.pop()
        # A block may share its name with its only category (B99): ask for the block's own children.
        children = icd.get_children(code, prioritize_blocks=depth <= 1)
        if not children and depth >= 2:
            leaves.add(code)
        stack.extend((child, depth + 1) for child in children)
    return leaves


@pytest.mark.data
@pytest.mark.slow
def test_icd10cm_billable_codes_cache_and_known_codes(tmp_path, monkeypatch):
    monkeypatch.setenv("FHS_CACHE", str(tmp_path))
    clear_taxonomy_cache()
    built = load_taxonomy("icd-10-cm")
    cache_files = list((tmp_path / "taxonomies").glob("icd-10-cm--*.jsonl"))
    assert len(cache_files) == 1
    clear_taxonomy_cache()
    cached = load_taxonomy("icd-10-cm")
    assert cached is not built and cached == built

    assert {c.id for c in built} == package_leaves()
    assert set(built.datatypes()) == {"diagnosis"}
    nausea = built["R11.0"]
    assert (nausea.label, nausea.metadata["chapter"], nausea.metadata["role"]) == (
        "Nausea", "18", "symptom/sign/abnormal-finding")
    assert nausea.definition.startswith("Nausea NOS. Nausea without vomiting. ")
    assert nausea.definition.endswith(
        f"{nausea.metadata['chapter_description']} > {nausea.metadata['block_description']} > Nausea and vomiting")
    ribs = built["S22.49XA"]
    assert (ribs.metadata["chapter"], ribs.metadata["role"], ribs.metadata["category"]) == ("19", "injury/poisoning", "S22")
    assert (ribs.metadata["code_length"], ribs.metadata["seventh_character"]) == (
        "7", "initial encounter for closed fracture")
    assert built["C50.911"].metadata["role"] == "neoplasm" and built["C50.911"].metadata["chapter"] == "2"
    assert built["O80"].metadata["role"] == "pregnancy-related" and built["O80"].metadata["chapter"] == "15"
    assert built["Z79.4"].metadata["role"] == "health-status factor" and built["Z79.4"].metadata["chapter"] == "21"
    # B99 is both a block and its only category; the block description must come from the block.
    assert built["B99.8"].metadata["block_description"].startswith("Other infectious diseases")
    assert all(c.metadata["role"] == icd_role(c.id) for c in built)
    clear_taxonomy_cache()


@pytest.mark.data
def test_codiesp_gold_codes_normalise_to_inventory_ids(data_dir):
    path = data_dir / "codiesp" / "test" / "testX.tsv"
    with path.open(encoding="utf-8") as handle:
        raw = [row[2] for row in csv.reader(handle, delimiter="\t") if row[1] == "DIAGNOSTICO"]
    assert raw
    # CodiEsp writes dotted lower-case codes: the inventory id is the upper-case form.
    assert all(normalize_icd_code(code) == code.strip().upper() for code in raw)
