"""`fhs facts from-table`: one's own table becomes located facts exactly as the iXBRL extractor writes them."""

import csv
import html
import json

import pytest

from fhs.book.explorer import split_row, table_view
from fhs.cli import main
from fhs.core.errors import InputError
from fhs.data.datasets import ixbrl
from fhs.data.datasets.table_file import facts_from_table

# a header row, a section row ("Direct emissions:"), an empty cell (Scope 2's 2023)
ROWS = [
    ["Metric", "2024", "2023", "gold"],
    ["Direct emissions:", "", "", ""],
    ["Scope 1", "1,250", "1,100", "ghg:Scope1"],
    ["Scope 2 (location-based)", "830", "", "ghg:Scope2Location"],
]


def write_csv(path, rows=ROWS):
    with path.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return path


def ixbrl_twin(path, rows=ROWS):
    """The same table as an inline-XBRL filing whose value cells carry the gold as tags."""
    body = []
    for r, row in enumerate(rows):
        cells = []
        for c, cell in enumerate(row[:-1]):
            text = html.escape(cell)
            if r and c and cell and row[-1]:
                text = (f'<ix:nonFraction name="us-gaap:{row[-1].split(":")[1]}{c}" contextRef="c1" '
                        f'unitRef="t" decimals="0" id="r{r + 1}c{c + 1}">{text}</ix:nonFraction>')
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    path.write_text(
        '<html xmlns="http://www.w3.org/1999/xhtml" xmlns:ix="http://www.xbrl.org/2013/inlineXBRL" '
        'xmlns:xbrli="http://www.xbrl.org/2003/instance" xmlns:us-gaap="http://fasb.org/us-gaap/2024"><body><div style="display:none"><ix:header>'
        '<ix:resources><xbrli:unit id="t"><xbrli:measure>xbrli:pure</xbrli:measure></xbrli:unit>'
        '</ix:resources></ix:header></div><table>' + "".join(body) + "</table></body></html>", encoding="utf-8")
    return path


def test_csv_facts_match_the_ixbrl_extractor(tmp_path):
    facts = facts_from_table(write_csv(tmp_path / "report.csv"), stem="report", datatype="ghgItemType")
    extracted, _ = ixbrl.extract_filing(ixbrl_twin(tmp_path / "twin.htm"), cache_dir=tmp_path / "cache")
    assert [f.value for f in facts] == [f.value for f in extracted] == ["1,250", "1,100", "830"]
    for ours, theirs in zip(facts, extracted):
        assert ours.context == theirs.context
        assert (ours.row_header, ours.column_header) == (theirs.row_header, theirs.column_header)
    # the gold and datatype columns are not part of the table; the empty cell is dropped from its line
    assert facts[0].context == "Metric | 2024 | 2023\nDirect emissions:\nScope 1 | 1,250 | 1,100\n" \
                               "Scope 2 (location-based) | 830"
    assert facts[0].row_header == "Direct emissions: | Scope 1"  # the section row joins the row header
    assert [f.column_header for f in facts] == ["2024", "2023", "2024"]
    assert facts[2].gold == ("ghg:Scope2Location",) and facts[2].datatype == "ghgItemType"
    assert facts[0].id == "report:t0:r3c2" and facts[0].context_id == "report#t0"


def test_html_cells_and_a_cell_map_give_the_same_facts(tmp_path):
    table = "".join("<tr>" + "".join(
        f'<td data-gold="{row[-1]}">{html.escape(cell)}</td>' if r and c and cell and row[-1]
        else f"<td>{html.escape(cell)}</td>" for c, cell in enumerate(row[:-1])) + "</tr>"
        for r, row in enumerate(ROWS))
    page = tmp_path / "report.html"
    page.write_text(f"<html><body><p>Emissions</p><table>{table}</table></body></html>", encoding="utf-8")
    from_csv = facts_from_table(write_csv(tmp_path / "report.csv"), stem="report")
    from_html = facts_from_table(page, stem="report")
    cells = tmp_path / "cells.csv"
    cells.write_text("row,column,gold\n3,2,ghg:Scope1\n3,3,ghg:Scope1\n4,2,ghg:Scope2Location\n", encoding="utf-8")
    plain = write_csv(tmp_path / "plain.csv", [row[:-1] for row in ROWS])
    from_map = facts_from_table(plain, stem="report", cell_map=cells)
    def without_metadata(facts):
        return [{**f.to_dict(), "metadata": {}} for f in facts]

    assert without_metadata(from_html) == without_metadata(from_csv)
    assert [(f.id, f.context, f.row_header, f.column_header, f.gold) for f in from_map] == \
        [(f.id, f.context, f.row_header, f.column_header, f.gold) for f in from_csv]


def test_errors_name_the_file_and_the_fix(tmp_path):
    with pytest.raises(InputError, match="no tagged value cells"):
        facts_from_table(write_csv(tmp_path / "plain.csv", [row[:-1] for row in ROWS]))
    cells = tmp_path / "cells.csv"
    cells.write_text("row,column,gold\n4,3,ghg:Scope2Location\n", encoding="utf-8")
    with pytest.raises(InputError, match="row 4, cell 3 is tagged but empty"):
        facts_from_table(write_csv(tmp_path / "plain.csv", [row[:-1] for row in ROWS]), cell_map=cells)


def test_the_command_writes_facts_fhs_reads(tmp_path, capsys):
    out = tmp_path / "facts.jsonl"
    assert main(["facts", "from-table", str(write_csv(tmp_path / "report.csv")), "--out", str(out),
                 "--datatype", "ghgItemType"]) == 0
    assert "3 located facts from 1 table file(s)" in capsys.readouterr().out
    first = json.loads(out.read_text().splitlines()[0])
    assert first["id"] == "report:t0:r3c2" and first["row_header"] == "Direct emissions: | Scope 1"


def test_show_keeps_an_empty_cell_in_its_column(tmp_path):
    assert split_row("a | | b") == ["a", "", "b"]
    assert split_row("Scope 1 | 1,250 | 1,100") == ["Scope 1", "1,250", "1,100"]
    fact = facts_from_table(write_csv(tmp_path / "report.csv"), stem="report")[1]
    hand_written = fact.__class__(**{**fact.to_dict(), "gold": fact.gold,
                                     "context": "Metric | 2024 | 2023\nScope 1 | | 1,100"})
    view = table_view(hand_written)
    assert [cell["text"] for cell in view["rows"][1]] == ["Scope 1", "", "1,100"]
    assert [cell["marked"] for cell in view["rows"][1]] == [False, False, True]
