"""The CodiEsp-D loader: rows to facts, relocation, inventory filter, leakage (fhs.data.datasets.codiesp)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path

import pytest

from fhs.core.errors import InputError
from fhs.data.datasets import load_facts
from fhs.data.datasets.codiesp import load, load_split, read_mentions
from fhs.data.relocate.contract import Relocation, RelocationTask
from fhs.data.relocate.deterministic import DeterministicRelocator
from fhs.data.relocate.sentences import normalize_whitespace
from fhs.data.taxonomy import Concept, Taxonomy

FIXTURE = Path(__file__).parent / "fixtures" / "codiesp"
TSV = FIXTURE / "test" / "testX.tsv"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    """Every test writes its relocation cache under its own temporary folder."""
    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))


def fixture_rows() -> list[list[str]]:
    return [line.rstrip("\n").split("\t") for line in TSV.read_text(encoding="utf-8").splitlines()]


def taxonomy_of(codes) -> Taxonomy:
    return Taxonomy.from_concepts("tiny", [Concept(id=code, label=code) for code in sorted(set(codes))])


# --- the fixture itself ----------------------------------------------------------------------


def test_fixture_offsets_point_at_the_mentions():
    for document, _, _, reference, offsets in fixture_rows():
        text = (FIXTURE / "test" / "text_files" / f"{document}.txt").read_text(encoding="utf-8")
        parts = [text[int(a):int(b)] for a, b in (part.split() for part in offsets.split(";"))]
        assert " ".join(parts) == reference


# --- reading and checking the .tsv -----------------------------------------------------------


def test_read_mentions_normalises_diagnosis_codes():
    mentions = read_mentions(TSV)
    assert len(mentions) == len(fixture_rows())
    diagnosis = [m for m in mentions if m.label == "DIAGNOSTICO"]
    assert {m.code for m in diagnosis} == {row[2].upper() for row in fixture_rows() if row[1] == "DIAGNOSTICO"}
    discontinuous = next(m for m in mentions if ";" in m.offsets)
    assert len(discontinuous.spans) == 2 and discontinuous.line == 7


@pytest.mark.parametrize("row, line, field", [
    ("S0001-1\tDIAGNOSTICO\tr10.9\tdolor abdominal", 2, "offsets"),
    ("S0001-1\tDIAGNOSTICO\tr10.9\tdolor abdominal\t24 x", 2, "offsets"),
    ("S0001-1\tDIAGNOSTICO\tr10.9\tdolor abdominal\t39 24", 2, "offsets"),
    ("S0001-1\tDIAGNOSIS\tr10.9\tdolor abdominal\t24 39", 2, "label"),
    ("S0001-1\tDIAGNOSTICO\t10.9!\tdolor abdominal\t24 39", 2, "code"),
    ("S0001-1\tDIAGNOSTICO\tr10.9\t\t24 39", 2, "reference"),
])
def test_malformed_rows_name_file_line_and_field(tmp_path, row, line, field):
    path = tmp_path / "testX.tsv"
    path.write_text("S0001-1\tDIAGNOSTICO\tr50.9\tfiebre\t42 48\n" + row + "\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        read_mentions(path)
    message = str(caught.value)
    assert f"{path}:{line}" in message and f"field '{field}'" in message


def test_empty_span_parts_are_skipped(tmp_path):
    path = tmp_path / "testX.tsv"
    path.write_text("S0001-1\tDIAGNOSTICO\tr10.9\tdolor abdominal\t24 29;30 30;30 39\n", encoding="utf-8")
    assert read_mentions(path)[0].spans == ((24, 29), (30, 39))


def copy_fixture(tmp_path) -> Path:
    root = tmp_path / "data"
    shutil.copytree(FIXTURE, root / "codiesp")
    return root


def test_offsets_beyond_the_text_name_the_row(tmp_path):
    root = copy_fixture(tmp_path)
    tsv = root / "codiesp" / "test" / "testX.tsv"
    tsv.write_text(tsv.read_text(encoding="utf-8") + "S0002-1\tDIAGNOSTICO\tr69\tx\t900 905\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        load(root, None, cache=False)
    assert f"{tsv}:{len(fixture_rows()) + 1}" in str(caught.value) and "offsets" in str(caught.value)


def test_missing_split_or_text_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="devX.tsv"):
        load(FIXTURE, None, split="dev", cache=False)
    with pytest.raises(InputError, match="split"):
        load(FIXTURE, None, split="validation", cache=False)
    root = copy_fixture(tmp_path)
    (root / "codiesp" / "test" / "text_files_en" / "S0002-1.txt").unlink()
    with pytest.raises(InputError, match="S0002-1.txt"):
        load(root, None, cache=False)


# --- facts -----------------------------------------------------------------------------------


def expected_keys(taxonomy=None) -> list[tuple[str, str, str]]:
    """DIAGNOSTICO rows, inventory-filtered and deduplicated, computed here from the raw file."""
    keys = []
    for document, label, code, _, offsets in fixture_rows():
        key = (document, offsets, code.upper())
        if label == "DIAGNOSTICO" and key not in keys and (taxonomy is None or key[2] in taxonomy):
            keys.append(key)
    return keys


def test_load_keeps_diagnoses_deduplicated_on_document_position_and_code():
    facts = load(FIXTURE, None, keep="all", cache=False)
    assert [(f.context_id, f.metadata["spanish_offsets"], f.gold[0]) for f in facts] == expected_keys()
    assert len({f.id for f in facts}) == len(facts)
    # the same mention with a second code is a second fact with an id of its own
    same_place = [f for f in facts if f.metadata["spanish_offsets"] == "71 114"]
    assert [f.gold for f in same_place] == [("N28.1",), ("Q61.00",)]
    assert same_place[0].id != same_place[1].id


def test_taxonomy_filters_gold_codes():
    taxonomy = taxonomy_of(["R10.9", "N28.1", "C18.9", "R42"])
    facts = load(FIXTURE, taxonomy, keep="all", cache=False)
    assert [(f.context_id, f.metadata["spanish_offsets"], f.gold[0]) for f in facts] == expected_keys(taxonomy)
    assert load_facts("codiesp", FIXTURE, taxonomy) == load(FIXTURE, taxonomy)  # the registry's entry point


def test_fact_fields_come_from_the_english_text():
    result = load_split(FIXTURE, None, cache=False)
    english = {path.stem: normalize_whitespace(path.read_text(encoding="utf-8"))
               for path in (FIXTURE / "test" / "text_files_en").glob("*.txt")}
    assert result.facts, "the fixture has relocatable mentions"
    for fact in result.facts:
        assert fact.modality == "text" and fact.datatype == "diagnosis"
        assert fact.context == fact.sentence and fact.value in fact.context
        start, end = fact.metadata["span"]
        assert fact.context[start:end] == fact.value
        assert fact.context in english[fact.context_id]
        assert fact.metadata["document_context"] in english[fact.context_id].replace(" 1. ", " ")
        assert fact.metadata["relocation_status"] == "exact" and fact.metadata["relocated"] is True
        assert fact.metadata["document_id"] == fact.context_id
    by_mention = {f.metadata["spanish_mention"]: f.value for f in result.facts}
    assert by_mention["quistes corticales simples en riñón derecho"] == "simple cortical cysts in the right kidney"
    assert by_mention["adenocarcinoma de colon"] == "Colon adenocarcinoma"


def test_unrelocated_facts_carry_the_spanish_mention_and_are_kept_apart():
    result = load_split(FIXTURE, None, cache=False)
    assert [f.metadata["spanish_mention"] for f in result.unrelocated] == ["mareo"]  # not in the translation
    [fact] = result.unrelocated
    assert fact.value == "mareo" and fact.metadata["relocated"] is False
    assert fact.metadata["relocation_status"] == "fallback-sentence"
    exact_only = load(FIXTURE, None, cache=False)
    everything = load(FIXTURE, None, keep="all", cache=False)
    assert len(everything) == len(exact_only) + 1 and fact in everything and fact not in exact_only
    with pytest.raises(InputError, match="keep"):
        load(FIXTURE, None, keep="some", cache=False)


def code_spellings(code: str) -> set[str]:
    return {code, code.lower(), code.replace(".", ""), code.lower().replace(".", "")}


def assert_no_leak(facts, english_documents: dict[str, str]) -> None:
    """No gold code, in any spelling, reaches what a method reads, unless the English text has it."""
    for fact in facts:
        visible = " ".join([fact.id, fact.value, fact.context, fact.sentence, fact.row_header,
                            fact.column_header, json.dumps(dict(fact.metadata), ensure_ascii=False)])
        for spelling in code_spellings(fact.gold[0]):
            pattern = re.compile(rf"(?<![\w.]){re.escape(spelling)}(?![\w])", re.IGNORECASE)
            if pattern.search(visible):
                assert pattern.search(english_documents[fact.context_id]), (fact.id, spelling)


def test_no_gold_code_reaches_value_context_or_metadata():
    facts = load(FIXTURE, None, keep="all", cache=False)
    folder = FIXTURE / "test" / "text_files_en"
    english = {path.stem: path.read_text(encoding="utf-8") for path in folder.glob("*.txt")}
    assert_no_leak(facts, english)


def test_leak_check_would_notice_a_code(tmp_path):
    """The leakage check is not vacuous: a mention whose text is its own code is caught."""
    root = copy_fixture(tmp_path)
    tsv = root / "codiesp" / "test" / "testX.tsv"
    tsv.write_text(tsv.read_text(encoding="utf-8").replace("\tmareo\t", "\tr42\t"), encoding="utf-8")
    facts = load(root, None, keep="all", cache=False)
    english = {path.stem: path.read_text(encoding="utf-8")
               for path in (root / "codiesp" / "test" / "text_files_en").glob("*.txt")}
    with pytest.raises(AssertionError):
        assert_no_leak(facts, english)


class CountingRelocator:
    name = "counting-fixture"
    method = "deterministic"

    def __init__(self) -> None:
        self.calls = 0
        self.inner = DeterministicRelocator()

    def relocate(self, tasks: Sequence[RelocationTask]) -> list[Relocation]:
        self.calls += len(tasks)
        return self.inner.relocate(tasks)


def test_relocations_are_cached_per_split_and_relocator(tmp_path):
    relocator = CountingRelocator()
    first = load(FIXTURE, None, relocator=relocator)
    calls = relocator.calls
    # one relocation per distinct mention: a second code on the same mention reuses it
    assert calls == len({(document, offsets) for document, offsets, _ in expected_keys()})
    assert load(FIXTURE, None, relocator=relocator) == first and relocator.calls == calls
    files = list((Path(os.environ["FHS_CACHE"]) / "relocation").glob("*.jsonl"))
    assert [f.name for f in files] == ["codiesp-test-dp--counting-fixture.jsonl"]


# --- the real test split ---------------------------------------------------------------------


def real_codiesp() -> Path:
    root = os.environ.get("FHS_DATA")
    if not root or not (Path(root) / "codiesp" / "test" / "testX.tsv").is_file():
        pytest.fail("FHS_DATA must point at the data directory holding codiesp/ for @pytest.mark.data tests")
    return Path(root)


def raw_diagnosis_rows(path: Path) -> list[tuple[str, str, str]]:
    """An independent count: split each line by tabs, keep DIAGNOSTICO, key by (doc, offsets, CODE)."""
    rows = []
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            fields = line.rstrip("\n").split("\t")
            if fields[1] == "DIAGNOSTICO":
                rows.append((fields[0], fields[4], fields[2].upper()))
    return rows


@pytest.mark.data
def test_real_test_split_counts_and_relocation():
    root = real_codiesp()
    rows = raw_diagnosis_rows(root / "codiesp" / "test" / "testX.tsv")
    result = load_split(root, None, "test")
    assert result.stats["diagnosis_rows"] == len(rows)
    assert result.stats["facts"] == len(set(rows)) == len(result.all_facts)
    assert result.stats["documents"] == len({document for document, _, _ in rows})
    assert len(result.facts) + len(result.unrelocated) == len(result.all_facts)
    # a sanity floor, not an expected value: the deterministic relocator finds well over half
    assert len(result.facts) > 0.5 * len(result.all_facts)
    for fact in result.facts:
        start, end = fact.metadata["span"]
        assert fact.context[start:end] == fact.value
        assert fact.value in fact.metadata["document_context"]


@pytest.mark.data
def test_real_test_split_leaks_no_code():
    root = real_codiesp()
    folder = root / "codiesp" / "test" / "text_files_en"
    facts = load(root, None, keep="all")
    english = {fact.context_id: (folder / f"{fact.context_id}.txt").read_text(encoding="utf-8") for fact in facts}
    assert_no_leak(facts, english)


@pytest.mark.data
def test_real_split_with_a_tiny_inventory():
    root = real_codiesp()
    rows = raw_diagnosis_rows(root / "codiesp" / "test" / "testX.tsv")
    some_codes = sorted({code for _, _, code in rows})[::5]
    taxonomy = taxonomy_of(some_codes)
    facts = load(root, taxonomy, keep="all")
    assert len(facts) == len({row for row in rows if row[2] in taxonomy})
    assert all(fact.gold[0] in taxonomy for fact in facts)


def test_alignment_summary_counts_documents_whose_sentence_counts_agree():
    from fhs.data.datasets.codiesp import alignment_summary
    # S0001-1: 5 Spanish sentences + 1 paragraph break vs 6 English lines (one is "1.");
    # S0002-1: 3 Spanish sentences vs 2 English lines (the translation merged two).
    assert alignment_summary(FIXTURE) == {"documents": 2, "plain": 0, "with_paragraph_breaks": 1}


def test_command_line_prints_the_split_summary(capsys):
    from fhs.data.datasets.codiesp import main
    main(["--data", str(FIXTURE.parent), "--split", "test", "--no-cache"])
    report = json.loads(capsys.readouterr().out)
    assert report["facts"] == len(expected_keys()) and report["statuses"]["exact"] == report["exact"]
