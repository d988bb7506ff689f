"""Tables, filings and archives from someone else: each bad one is one line naming the file, never a
swallowed row, a traceback or gigabytes held (issue 53's table and archive cases, issue 55's small ones).

Bombs are built small here and met with a lowered limit (``ReadLimits``): the bound is shown by the
limit being hit, not by measuring memory.
"""

from __future__ import annotations

import gzip
import json

import pytest

from fhs.cli import main
from fhs.core.errors import InputError
from fhs.core.untrusted import ReadLimits, TooLarge, gunzip
from fhs.data.datasets import ixbrl
from fhs.data.datasets.table_file import facts_from_table

HEADER = "Metric,2024,2023,gold\n"
ROWS = ["Scope 1,1250,1100,ghg:Scope1\n", "Scope 2,830,905,ghg:Scope2\n", "Scope 3,99,98,ghg:Scope3\n"]
ZEROS = 50 << 20  # what a bomb expands to: 50 MB of zeros, about 50 KB gzipped


def one_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("fhs: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def from_table(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["facts", "from-table", *args])
    out, err = capsys.readouterr()
    return code, out, err


def bomb() -> bytes:
    return gzip.compress(bytes(ZEROS), compresslevel=1)


# ---- CSV: quotes, encodings, cells ---------------------------------------------------------------

def test_case7_an_unterminated_quote_is_refused_at_the_line_it_opens_and_nothing_is_written(tmp_path, capsys):
    table = tmp_path / "t.csv"
    # line 3's quote never closes: read loosely, rows 3 to 5 became one cell and 1 fact came out of 4
    table.write_text(HEADER + ROWS[0] + 'Scope 2,"99,905,ghg:Scope2\n' + ROWS[2] + "Scope 4,7,8,ghg:Scope4\n",
                     encoding="utf-8")
    out = tmp_path / "facts.jsonl"
    code, _, err = from_table(capsys, str(table), "--out", str(out))
    line = one_error(err)
    assert code == 2 and f"{table}:3:" in line and "never closes" in line, line
    assert not out.exists()


def test_a_broken_quote_on_the_first_data_row_names_the_quote_not_missing_gold(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(HEADER + 'Scope 1,"1250,1100,ghg:Scope1\n' + "".join(ROWS[1:]), encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.csv:2: a quoted cell opens here and never closes") as error:
        facts_from_table(table)
    assert "no tagged value cells" not in str(error.value)


def test_a_quote_opened_after_a_closed_multiline_cell_is_found_on_its_own_line(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(HEADER + '"Scope\n1",1250,1100,ghg:Scope1\n' + 'Scope 2,830,"905,ghg:Scope2\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.csv:4: a quoted cell opens here"):
        facts_from_table(table)


def test_well_formed_quotes_still_read_as_before(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(HEADER + 'Scope 1,"1,250","1,100",ghg:Scope1\n' + '"Scope ""2""",830,905,ghg:Scope2\n',
                     encoding="utf-8")
    facts = facts_from_table(table)
    assert [f.value for f in facts] == ["1,250", "1,100", "830", "905"]
    assert facts[2].row_header == 'Scope "2"'


def test_text_after_a_closing_quote_is_malformed_quoting_naming_the_line(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text(HEADER + ROWS[0] + 'Scope 2,"830"x,905,ghg:Scope2\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.csv:3: malformed quoting"):
        facts_from_table(table)


def test_a_latin1_csv_is_one_line_naming_the_file_line_and_utf8(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_bytes((HEADER + ROWS[0] + "Émissions,830,905,ghg:Scope2\n").encode("latin-1"))
    code, _, err = from_table(capsys, str(table), "--out", str(tmp_path / "facts.jsonl"))
    line = one_error(err)
    assert code == 2 and f"{table}:3:" in line and "not UTF-8" in line and "save the file as UTF-8" in line, line


def test_a_utf16_csv_with_its_byte_order_mark_reads_as_its_utf8_twin(tmp_path):
    text = HEADER + "".join(ROWS) + "Émissions totales,2179,2103,ghg:Total\n"
    (tmp_path / "u8.csv").write_text(text, encoding="utf-8")
    (tmp_path / "u16.csv").write_bytes(text.encode("utf-16"))  # with its byte order mark, as spreadsheets save it
    def read(name):
        return [{**f.to_dict(), "metadata": {}} for f in facts_from_table(tmp_path / name, stem="t")]

    assert read("u16.csv") == read("u8.csv")


def test_a_cell_over_the_csv_field_limit_is_refused_naming_its_line(tmp_path, capsys):
    table = tmp_path / "t.csv"
    table.write_text(HEADER + ROWS[0] + f"Scope 2,\"{'9' * 140_000}\",905,ghg:Scope2\n", encoding="utf-8")
    code, _, err = from_table(capsys, str(table), "--out", str(tmp_path / "facts.jsonl"))
    line = one_error(err)
    assert code == 2 and f"{table}:3:" in line and "more than 131,072 characters" in line, line


def test_a_tables_cell_limit_holds_after_a_loader_raised_the_process_wide_one(tmp_path, capsys):
    """The FinCL and taxonomy loaders raise the csv module's one process-wide limit; a table keeps its own."""
    import csv

    before = csv.field_size_limit(2**31 - 1)
    try:
        test_a_cell_over_the_csv_field_limit_is_refused_naming_its_line(tmp_path, capsys)
        assert csv.field_size_limit() == 2**31 - 1  # and the loaders' setting is put back
    finally:
        csv.field_size_limit(before)


def test_a_cell_map_is_read_as_strictly(tmp_path):
    table = tmp_path / "t.csv"
    table.write_text("Metric,2024\nScope 1,1250\n", encoding="utf-8")
    cells = tmp_path / "cells.csv"
    cells.write_text('row,column,gold\n2,2,"ghg:Scope1\n', encoding="utf-8")
    with pytest.raises(InputError, match=r"cells\.csv:2: a quoted cell opens here"):
        facts_from_table(table, cell_map=cells)


# ---- HTML tables: spans, empty files, nesting -----------------------------------------------------

def span_bomb(path, rows: int = 400, cells: int = 40):
    """Case 19's table, which took 2.6 GB: every cell spans a thousand columns."""
    row = "<tr>" + "<td colspan=1000>1</td>" * cells + "</tr>"
    path.write_text(f"<html><body><table>{row * rows}</table></body></html>", encoding="utf-8")
    return path


def test_case19_a_table_whose_spans_expand_past_the_cell_limit_is_refused_naming_file_and_limit(tmp_path):
    page = span_bomb(tmp_path / "t.html")
    with pytest.raises(InputError, match=r"t\.html:1: a table expands to more than 10,000 cells"):
        facts_from_table(page, limits=ReadLimits(table_cells=10_000))


def test_case19_through_the_command_with_its_own_limit(tmp_path, capsys):
    page = span_bomb(tmp_path / "t.html", rows=30)  # 1.2 million cells: past the default limit, quickly
    code, _, err = from_table(capsys, str(page), "--out", str(tmp_path / "facts.jsonl"))
    line = one_error(err)
    assert code == 2 and str(page) in line and "more than 1,000,000 cells" in line, line


def test_a_tall_cell_far_right_cannot_widen_every_row_below_it(tmp_path):
    # few cells are placed, but every row below would be a thousand slots wide
    page = tmp_path / "t.html"
    page.write_text("<table><tr><td colspan=999>a</td><td rowspan=60000>1</td></tr>" + "<tr><td>2</td></tr>" * 100
                    + "</table>", encoding="utf-8")
    with pytest.raises(InputError, match="more than 50,000 cells"):
        facts_from_table(page, limits=ReadLimits(table_cells=50_000))


def test_a_filings_table_is_bounded_too(tmp_path):
    row = "<tr>" + '<td colspan="1000">x</td>' * 20 + "</tr>"
    filing = tmp_path / "f.htm"
    filing.write_text('<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL" '
                      'xmlns:gaap="http://fasb.org/us-gaap/2024"><body>\n<table>' + row * 5 +
                      '<tr><td><ix:nonFraction name="gaap:Revenues" contextRef="c" unitRef="u" id="f1">5'
                      '</ix:nonFraction></td></tr></table></body></html>', encoding="utf-8")
    with pytest.raises(InputError, match=r"f\.htm:2: a table expands to more than 10,000 cells"):
        ixbrl.extract_filing(filing, cache_dir=tmp_path / "cache", limits=ReadLimits(table_cells=10_000))


@pytest.mark.parametrize("content", ["", "  \n\n"])
def test_an_empty_html_file_is_one_line(content, tmp_path, capsys):
    page = tmp_path / "t.html"
    page.write_text(content, encoding="utf-8")
    code, _, err = from_table(capsys, str(page), "--out", str(tmp_path / "facts.jsonl"))
    line = one_error(err)
    assert code == 2 and str(page) in line and "no <table> in this file" in line, line


def test_a_table_nested_past_the_parsers_depth_says_so(tmp_path):
    page = tmp_path / "t.html"
    page.write_text("<html><body>" + "<div>" * 300 + "<table><tr><td>1</td></tr></table>" + "</div>" * 300,
                    encoding="utf-8")
    with pytest.raises(InputError, match=r"t\.html:1: elements nest deeper than the parser's limit of 256 levels") \
            as error:
        facts_from_table(page)
    assert "no <table>" not in str(error.value)


def test_a_filing_nested_past_the_parsers_depth_is_refused_not_read_in_part(tmp_path):
    # recovering, the parser dropped everything below the limit: 0 facts, exit 0
    filing = tmp_path / "f.htm"
    filing.write_text('<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL" '
                      'xmlns:gaap="http://fasb.org/us-gaap/2024"><body>\n' + "<div>" * 3000 + "</div>" * 3000 +
                      '<p>Revenue <ix:nonFraction name="gaap:Revenues" contextRef="c" unitRef="u" id="f1">5'
                      '</ix:nonFraction></p></body></html>', encoding="utf-8")
    with pytest.raises(InputError, match=r"f\.htm: cannot parse as \(X\)HTML: elements nest deeper than the "
                                         r"parser's limit of 2048 levels"):
        ixbrl.extract_filing(filing, cache_dir=tmp_path / "cache")


# ---- gzip: filings and archives -------------------------------------------------------------------

def test_gunzip_stops_at_its_limit_and_reads_every_member_within_it():
    assert gunzip(gzip.compress(b"ab") + gzip.compress(b"cd"), limit=4) == b"abcd"
    with pytest.raises(TooLarge, match="more than 1 MiB"):
        gunzip(bomb(), limit=1 << 20)
    with pytest.raises(ValueError):
        gunzip(gzip.compress(b"abc" * 1000)[:-20], limit=1 << 20)  # cut off
    with pytest.raises(ValueError):
        gunzip(b"not gzip", limit=1 << 20)


def test_case20_a_gzip_filing_that_expands_past_the_limit_is_refused(tmp_path, capsys):
    filing = tmp_path / "bomb.htm.gz"
    filing.write_bytes(bomb())
    with pytest.raises(InputError, match=r"bomb\.htm\.gz: expands to more than 1 MiB, the limit on a filing"):
        ixbrl.extract_filing(filing, cache_dir=tmp_path / "cache", limits=ReadLimits(filing_bytes=1 << 20))
    plain = tmp_path / "big.htm"
    plain.write_bytes(b" " * (2 << 20))
    with pytest.raises(InputError, match=r"big\.htm: is larger than 1 MiB, the limit on a filing"):
        ixbrl.extract_filing(plain, cache_dir=tmp_path / "cache", limits=ReadLimits(filing_bytes=1 << 20))


def test_a_damaged_gzip_filing_is_still_named_as_damaged(tmp_path, capsys):
    filing = tmp_path / "cut.htm.gz"
    filing.write_bytes(gzip.compress(b"<html>" + b"x" * 5000)[:-30])
    code = main(["facts", "from-ixbrl", str(filing), "--out", str(tmp_path / "f.jsonl"), "--taxonomy", "none"])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and "cut.htm.gz" in line and "truncated or damaged gzip file" in line, line


def test_case20_an_archived_runs_records_that_expand_past_the_limit_are_refused(tmp_path, capsys):
    from fhs.plan.sim_server import running
    from fhs.run.archive import archived_runs
    from llama_server import free_port
    from server_runs import fhs_run, write_inputs
    from test_archive import tampered

    facts, concepts = write_inputs(tmp_path)
    cache = tmp_path / "cache" / "responses.sqlite"
    with running(free_port(), "--fixed-latency", "0.02") as url:
        code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--base-url", url,
                               "--cache", str(cache))
    assert code == 0, err
    assert main(["archive", str(tmp_path / "run"), "--cache", str(cache), "--out", str(tmp_path / "a.fhsa")]) == 0
    assert len(archived_runs(tmp_path / "a.fhsa", limits=ReadLimits(records_bytes=1 << 20))[0].records) == 6
    bad = tampered(tmp_path / "a.fhsa", tmp_path / "bad.fhsa",  # its digest made to fit, as an attacker would
                   lambda db: db.execute("UPDATE runs SET records = ?", (bomb(),)))
    with pytest.raises(InputError, match=r"bad\.fhsa: .*records of run .* expand to more than 1 MiB"):
        archived_runs(bad, limits=ReadLimits(records_bytes=1 << 20))
    # a replay decompresses only the runs of its own settings
    assert archived_runs(bad, limits=ReadLimits(records_bytes=1 << 20), where=lambda config: False) == []


def test_case20_data_check_finds_a_gzip_bomb_different_without_expanding_it(tmp_path):
    import hashlib

    from fhs.data.download.check import check
    from fhs.data.download.digest import digest
    from fhs.data.download.lock import Lock, LockedFile, LockedSource

    page = b"<html><body><p>a filing</p></body></html>"
    (tmp_path / "pub").mkdir()
    (tmp_path / "pub" / "page.htm.gz").write_bytes(bomb())
    with pytest.raises(TooLarge, match="more than 1 MiB"):
        digest(tmp_path / "pub" / "page.htm.gz", gunzip=True, limit=1 << 20)
    lock = Lock((LockedSource("pub", "a publisher", "CC0", "https://example.org", "example.org", (
        LockedFile("pub/page.htm.gz", len(page), hashlib.sha256(page).hexdigest(), url="https://example.org/p.htm",
                   gzip=True),)),))
    result = check(lock, tmp_path)
    assert result.different == [("pub/page.htm.gz", f"more than {len(page)} bytes, the lock pins {len(page)}")]


# ---- issue 55: gold ids and field names -----------------------------------------------------------

def test_a_misspelled_gold_id_is_named_by_from_table(tmp_path, capsys):
    concepts = tmp_path / "concepts.csv"
    concepts.write_text("id,label,definition,datatype\nghg:Scope1,Scope 1,Direct emissions,emissions\n"
                        "ghg:Scope2,Scope 2,Indirect emissions,emissions\n", encoding="utf-8")
    table = tmp_path / "t.csv"
    table.write_text(HEADER + ROWS[0] + "Scope 2,830,905,ghg:Scope2Typo\n", encoding="utf-8")
    out = tmp_path / "facts.jsonl"
    code, stdout, err = from_table(capsys, str(table), "--taxonomy", str(concepts), "--out", str(out))
    assert code == 0 and "'ghg:Scope2Typo'" in err and "not in taxonomy" in err, err
    table.write_text(HEADER + "Scope 2,830,905,ghg:Scope2Typo\n", encoding="utf-8")
    code, _, err = from_table(capsys, str(table), "--taxonomy", str(concepts), "--out", str(out))
    line = one_error(err)
    assert code == 2 and "'ghg:Scope2Typo'" in line and "'ghg:Scope1'" in line, line


def test_a_clinical_mention_field_is_pointed_at_value_not_sentence(tmp_path, capsys):
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"id": "f1", "context_id": "d1", "modality": "text", "mention": "dolor abdominal",
                                 "value": "dolor", "datatype": "", "context": "Refiere dolor abdominal.",
                                 "gold": ["R10.9"]}) + "\n", encoding="utf-8")
    from fhs.data.facts import read_facts

    with pytest.raises(InputError, match="field 'mention': unknown field \\(did you mean 'value'\\?") as error:
        read_facts(facts)
    assert "'sentence'?" not in str(error.value)


def test_reading_fincl_leaves_the_process_wide_cell_limit_and_a_concept_file_keeps_its_own(tmp_path):
    """FinCL's reader lifts the csv module's limit for its long contexts only while it reads; a concept file is
    read under its own 16 MiB limit whatever the process's setting, so an unclosed quote is still refused."""
    import csv

    from fhs.core.errors import InputError
    from fhs.data.datasets.fincl import COLUMNS, read_rows
    from fhs.data.taxonomies.generic import load_generic

    fincl = tmp_path / "fincl.csv"
    fincl.write_text(",".join(COLUMNS) + "\n", encoding="utf-8")
    concepts = tmp_path / "concepts.csv"
    concepts.write_text("id,label\nA,Assets\nBig,\"" + "x" * (17 * 1024 * 1024) + "\"\n", encoding="utf-8")
    before = csv.field_size_limit()
    try:
        read_rows(fincl)
        assert csv.field_size_limit() == before
        csv.field_size_limit(2**31 - 1)  # as a reader that never put it back would leave it
        with pytest.raises(InputError, match="MiB"):
            load_generic(concepts)
        assert csv.field_size_limit() == 2**31 - 1
    finally:
        csv.field_size_limit(before)
