"""Inline-XBRL loader: a hand-written filing, the cache, the manifest split, and one real filing."""

import gzip
import re
import shutil
from pathlib import Path

import pytest

from fhs.core.errors import InputError
from fhs.data.datasets import ixbrl
from fhs.data.facts import Fact
from gaap_taxonomy import bm25_taxonomy, data_dir, tiny_taxonomy

FIXTURE = Path(__file__).parent / "fixtures" / "ixbrl" / "tiny-20240101.htm"
STEM = "tiny-20240101"


@pytest.fixture
def tiny(tmp_path):
    facts, stats = ixbrl.extract_filing(FIXTURE, cache_dir=tmp_path)
    return {fact.id.split(":", 1)[1]: fact for fact in facts}, stats


def texts_a_method_sees(fact: Fact) -> list[str]:
    return [fact.context, fact.row_header, fact.column_header, fact.sentence, fact.value]


def assert_no_leak(facts: list[Fact]) -> None:
    """No concept name, prefix or inline-XBRL tag/attribute may reach what a method reads."""
    markup = re.compile(r"us-gaap|gaap:|nonFraction|ix:|contextRef|unitRef|xbrli|<[a-z]", re.IGNORECASE)
    for fact in facts:
        names = [g for g in fact.gold if sum(ch.isupper() for ch in g) >= 3]  # camel-case names, not words
        for text in texts_a_method_sees(fact):
            assert not markup.search(text), (fact.id, markup.search(text).group())
            for name in names:
                assert name not in text, (fact.id, name)


def test_every_visible_us_gaap_number_becomes_one_fact(tiny):
    facts, stats = tiny
    # f1-f5 in the table, f9-f10 in text; f6 is nested in f5; h1 hidden, f7 nil, f8 display:none,
    # d1 is dei, f11 uses the prefix "us-gaap" bound to a company namespace.
    assert sorted(facts) == ["f1", "f10", "f2", "f3", "f4", "f5", "f9"]
    assert (stats.us_gaap_elements, stats.hidden, stats.undisplayed, stats.empty, stats.facts, stats.merged) == (
        11, 1, 1, 1, 7, 1)
    assert stats.us_gaap_elements == stats.hidden + stats.undisplayed + stats.empty + stats.facts + stats.merged


def test_values_numbers_and_units(tiny):
    facts, _ = tiny
    assert (facts["f1"].value, facts["f1"].metadata["number"]) == ("1,250", str(1250 * 10**6))
    assert (facts["f2"].value, facts["f2"].metadata["number"]) == ("25.5", str(int(-25.5 * 10**6)))
    assert facts["f2"].metadata["negated"] is True
    assert (facts["f4"].value, facts["f4"].metadata["number"]) == ("—", "0")     # ixt:fixed-zero
    assert facts["f9"].metadata["number"] == "0.215"                               # 21.5 * 10**-2
    assert facts["f10"].metadata["number"] == "3"                                  # "three"
    assert facts["f5"].metadata["unit"] == "iso4217:USD/xbrli:shares"


def test_unit_datatypes_without_a_taxonomy(tiny):
    facts, _ = tiny
    assert facts["f1"].datatype == "monetaryItemType"
    assert facts["f5"].datatype == "perShareItemType"
    assert facts["f9"].datatype == "percentItemType"   # pure, displayed with "%"
    assert facts["f10"].datatype == "pureItemType"     # pure, no "%"


def test_nested_facts_keep_every_gold_concept(tiny):
    facts, _ = tiny
    assert facts["f5"].gold == ("CommonStockParOrStatedValuePerShare", "PreferredStockParOrStatedValuePerShare")
    assert facts["f5"].metadata["n_elements"] == 2


def test_table_facts_have_headers_and_one_table_as_context(tiny):
    facts, _ = tiny
    f1, f3 = facts["f1"], facts["f3"]
    assert (f1.modality, f1.context_id) == ("table", f"{STEM}#t0")
    assert (f1.row_header, f1.column_header) == ("Revenues: | Product", "Year ended | 2024")
    assert (f3.row_header, f3.column_header) == ("Revenues: | Net loss", "Year ended | 2023")
    assert facts["f5"].row_header == "Par value per share"
    assert f1.context.split("\n") == [
        "Year ended", "(in millions) | 2024 | 2023", "Revenues:", "Product | $ 1,250 | $ 1,100",
        "Net loss | (25.5) | (3)", "Other | — | 7", "Par value per share | 0.01", "Nil"]


def test_text_facts_have_their_block_and_sentence(tiny):
    facts, _ = tiny
    f9, f10 = facts["f9"], facts["f10"]
    # block elements before it: the hidden header div (0), the title div (1); it is the third.
    assert f9.context_id == f10.context_id == f"{STEM}#p2"
    assert f9.context == "The effective tax rate was 21.5% in 2024. We had three segments."
    assert f9.sentence == "The effective tax rate was 21.5% in 2024."
    assert f10.sentence == "We had three segments."


def test_nothing_of_the_markup_or_hidden_facts_leaks(tiny):
    facts, _ = tiny
    assert_no_leak(list(facts.values()))
    for fact in facts.values():
        assert "Ghost" not in fact.context and "1000" not in fact.context


def test_taxonomy_gives_datatypes_and_flags_unreachable_gold(tmp_path):
    facts = {f.id.split(":")[1]: f for f in ixbrl.load_filing(FIXTURE, tiny_taxonomy(), cache_dir=tmp_path)}
    assert facts["f10"].datatype == "integerItemType"
    assert facts["f10"].metadata["unit_datatype"] == "pureItemType"
    assert facts["f4"].metadata["in_inventory"] is False
    assert facts["f4"].datatype == "monetaryItemType"    # guessed from unit USD
    assert all(f.metadata["in_inventory"] for k, f in facts.items() if k != "f4")
    kept = ixbrl.load_filing(FIXTURE, tiny_taxonomy(), cache_dir=tmp_path, keep_unreachable=False)
    assert len(kept) == len(facts) - 1


def test_second_load_reads_the_cache(tmp_path, monkeypatch):
    first, _ = ixbrl.extract_filing(FIXTURE, cache_dir=tmp_path)
    cached = list((tmp_path / "ixbrl").glob(f"{STEM}.*.p{ixbrl.PARSER_VERSION}.jsonl"))
    assert len(cached) == 1 and not list((tmp_path / "ixbrl").glob("*.tmp"))

    def no_parsing(*args, **kwargs):
        raise AssertionError("parsed although cached")
    monkeypatch.setattr(ixbrl, "extract_facts", no_parsing)
    second, stats = ixbrl.extract_filing(FIXTURE, cache_dir=tmp_path)
    assert second == first and stats.facts == len(first)
    # a new parser version ignores the old entry
    monkeypatch.setattr(ixbrl, "PARSER_VERSION", ixbrl.PARSER_VERSION + 1)
    with pytest.raises(AssertionError, match="parsed although cached"):
        ixbrl.extract_filing(FIXTURE, cache_dir=tmp_path)


def test_changed_file_is_parsed_again(tmp_path):
    copy = tmp_path / "filings" / f"{STEM}.htm"
    copy.parent.mkdir()
    shutil.copy(FIXTURE, copy)
    before, _ = ixbrl.extract_filing(copy, cache_dir=tmp_path)
    copy.write_text(FIXTURE.read_text(encoding="utf-8").replace(">1,250<", ">1,260<"), encoding="utf-8")
    after, _ = ixbrl.extract_filing(copy, cache_dir=tmp_path)
    assert before[0].value == "1,250" and after[0].value == "1,260"


def test_gzipped_filing_gives_the_same_facts(tmp_path):
    packed = tmp_path / f"{STEM}.htm.gz"
    packed.write_bytes(gzip.compress(FIXTURE.read_bytes()))
    plain, _ = ixbrl.extract_filing(FIXTURE, use_cache=False)
    zipped, _ = ixbrl.extract_filing(packed, use_cache=False)
    assert plain == zipped


def test_missing_or_unparsable_file(tmp_path):
    with pytest.raises(InputError, match="no such inline-XBRL file"):
        ixbrl.extract_filing(tmp_path / "absent.htm")
    empty = tmp_path / "empty.htm"
    empty.write_bytes(b"  ")
    with pytest.raises(InputError, match="cannot parse"):
        ixbrl.extract_filing(empty, use_cache=False)


def make_data_dir(tmp_path: Path, manifest_rows: list[str]) -> Path:
    folder = tmp_path / "data" / "ixbrl"
    folder.mkdir(parents=True)
    shutil.copy(FIXTURE, folder / f"{STEM}.htm")
    (folder / "old-20230101.htm.gz").write_bytes(gzip.compress(FIXTURE.read_bytes()))
    (folder / "MANIFEST.tsv").write_text("file\tus_gaap_version\n" + "".join(r + "\n" for r in manifest_rows))
    return tmp_path / "data"


def test_manifest_splits_test_and_dev(tmp_path):
    root = make_data_dir(tmp_path, [f"{STEM}.htm\t2024", "old-20230101.htm\t2023"])
    options = dict(cache_dir=tmp_path / "cache", progress=False)
    test = ixbrl.load_test(root, tiny_taxonomy(), **options)
    dev = ixbrl.load_dev(root, tiny_taxonomy(), **options)
    assert {f.metadata["filing"] for f in test} == {STEM}
    assert {f.metadata["filing"] for f in dev} == {"old-20230101"}
    assert all(f.metadata["in_inventory"] for f in test + dev)        # unreachable f4 dropped by default
    kept = ixbrl.load_test(root, tiny_taxonomy(), keep_unreachable=True, **options)
    assert len(kept) == len(test) + 1


@pytest.mark.parametrize("row, field, problem", [
    ("absent-20240101.htm\t2024", "file", "is missing"),
    (f"{STEM}.htm\tlatest", "us_gaap_version", "expected a year"),
])
def test_manifest_errors_name_line_and_field(tmp_path, row, field, problem):
    root = make_data_dir(tmp_path, [f"{STEM}.htm\t2024", row])
    with pytest.raises(InputError) as error:
        ixbrl.load_test(root, tiny_taxonomy(), cache_dir=tmp_path / "cache", progress=False)
    assert (error.value.line, error.value.field) == (3, field)
    assert problem in str(error.value)


# --- one real filing -----------------------------------------------------------------------

REAL = "aapl-20240928.htm"


@pytest.mark.data
def test_real_filing_end_to_end(tmp_path):
    folder = data_dir() / "ixbrl"
    filing = next(f for f in ixbrl.read_manifest(folder) if f.file == REAL)
    facts, stats = ixbrl.extract_filing(filing.path, cache_dir=tmp_path)
    raw = gzip.decompress(filing.path.read_bytes()).decode("utf-8")
    # an independent tally: a regex over the raw text, and the counts MANIFEST.tsv records
    tagged = re.findall(r"<ix:nonFraction\b[^>]*\bname=\"us-gaap:", raw)
    assert stats.us_gaap_elements == len(tagged) == int(filing.row["n_nonfraction_us_gaap"])
    assert stats.hidden == int(filing.row["n_hidden"])
    visible = int(filing.row["n_in_tables"]) + int(filing.row["n_in_text"])
    assert stats.facts + stats.merged + stats.empty + stats.undisplayed == visible
    assert sum(f.metadata["n_elements"] for f in facts if f.modality == "text") == int(filing.row["n_in_text"])
    assert len({f.id for f in facts}) == len(facts) == stats.facts

    taxonomy = bm25_taxonomy()
    typed = ixbrl.apply_taxonomy(facts, taxonomy)
    assert all(f.datatype == taxonomy[f.gold[0]].datatype for f in typed if f.gold[0] in taxonomy)
    assert_no_leak(typed)
    tables = [f for f in typed if f.modality == "table"]
    assert all(f.context_id.startswith("aapl-20240928#t") for f in tables)
    assert sum(bool(f.column_header) for f in tables) > 0.9 * len(tables)
    assert sum(bool(f.row_header) for f in tables) > 0.9 * len(tables)
    for fact in typed:
        if fact.modality == "text":
            assert fact.sentence and fact.sentence in fact.context
        assert fact.value in fact.context


@pytest.mark.data
def test_real_manifest_split_is_by_us_gaap_version():
    filings = ixbrl.read_manifest(data_dir() / "ixbrl")
    versions = {f.us_gaap_version for f in filings}
    assert versions <= set(ixbrl.TEST_VERSIONS) | set(ixbrl.DEV_VERSIONS)
    assert set(ixbrl.TEST_VERSIONS).isdisjoint(ixbrl.DEV_VERSIONS)
