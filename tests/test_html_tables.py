"""Visible text, numbers, table grids and cell headers on small hand-written HTML."""

from decimal import Decimal

import pytest

from fhs.data.datasets.html_tables import (
    cell_kind, collapse_repeats, column_header, find_value_cells, find_value_in_labels, header_rows, row_header,
    table_grid, table_text,
)
from fhs.data.datasets.html_page import visible_text, visible_text_with_offsets
from fhs.data.datasets.html_text import parse_fragment, sentence_at, sentence_spans
from fhs.data.datasets.numbers import mention_offsets, parse_number, values_match


def grid_of(markup: str, **options):
    return table_grid(parse_fragment(markup).find(".//table"), **options)


def cell_with(grid, text: str):
    return next(cell for row in grid.rows for cell in row if cell.text == text)


# --- numbers -------------------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("1,234", Decimal("1234")),
    ("$ (1,234.5)", Decimal("-1234.5")),
    ("( 25 )", Decimal("-25")),
    ("(25", Decimal("-25")),          # the ")" sits in the next cell in SEC tables
    ("12.5 %", Decimal("12.5")),
    ("−7", Decimal("-7")),           # minus sign
    ("—", Decimal(0)),                # a dash shows a nil amount
    ("$—", Decimal(0)),
    ("-", Decimal(0)),
    (".5", Decimal("0.5")),
    ("2,540\u200b", Decimal("2540")),  # zero-width space
    ("12,34", None),                  # not a thousands grouping
    ("Total", None),
    ("", None),
    ("$", None),
])
def test_parse_number(text, expected):
    assert parse_number(text) == expected


def test_values_match_ignores_sign_and_format_but_not_magnitude():
    assert values_match("$ (1,513.1)", "1513.1")
    assert values_match("447", "447.0")
    assert values_match("—", "—")
    assert not values_match("1,513", "1513.1")
    assert values_match("None", "none")       # words compare as text
    assert not values_match("25", "two")


def test_mention_offsets_finds_numbers_by_magnitude_and_words_by_text():
    text = "We sold 6,723,473 shares at $ 34.00 each, and two more."
    assert mention_offsets(text, "6723473") == [text.index("6,723,473")]
    assert mention_offsets(text, "34") == [text.index("34.00")]
    assert mention_offsets(text, "two") == [text.index("two")]
    assert mention_offsets(text, "72") == []


# --- visible text --------------------------------------------------------------------------

def test_visible_text_collapses_whitespace_and_separates_blocks_and_cells():
    markup = """<div><p>First   line<br/>continues</p><p>Second\u00a0para\u200b.</p>
      <table><tr><td>Net income</td><td>$</td><td>211</td><td>(</td><td>25</td><td>)</td></tr>
             <tr><td></td><td></td></tr></table>
      <script>var hidden = 1;</script><div style="display: none">secret</div>tail</div>"""
    text = visible_text(markup)
    assert text == "First line continues\nSecond para.\nNet income | $211 | (25)\ntail"


def test_offsets_mark_where_an_element_starts():
    block = parse_fragment("<p>Rate was <b id='x'>21.5</b>% in 2024.  Next <i id='y'>3</i>.</p>")
    marks = [block.find(".//b"), block.find(".//i")]
    text, offsets = visible_text_with_offsets(block, marks)
    assert text == "Rate was 21.5% in 2024. Next 3."
    assert text[offsets[marks[0]]:].startswith("21.5")
    assert text[offsets[marks[1]]:].startswith("3.")


def test_sentences_do_not_split_decimals_or_abbreviations():
    text = "The U.S. rate was 21.5% in 2024. We paid $ 34.00 per share. Inc. Corp. grew. Done"
    assert [text[s.start:s.end] for s in sentence_spans(text)] == [
        "The U.S. rate was 21.5% in 2024.", "We paid $ 34.00 per share.", "Inc. Corp. grew.", "Done"]
    assert sentence_at(text, text.index("34.00")) == "We paid $ 34.00 per share."


# --- grids ---------------------------------------------------------------------------------

def test_colspan_and_rowspan_are_expanded():
    grid = grid_of("""<table>
        <tr><td rowspan="2">Item</td><td colspan="2">Year ended</td></tr>
        <tr><td>2024</td><td>2023</td></tr>
        <tr><td>Sales</td><td>10</td><td>9</td></tr></table>""")
    assert [[c.text if c else None for c in row] for row in grid.slots] == [
        ["Item", "Year ended", "Year ended"], ["Item", "2024", "2023"], ["Sales", "10", "9"]]
    assert grid.aligned
    assert grid.row_kinds == ("header", "header", "data")


def test_cell_kinds():
    assert [cell_kind(t) for t in ("", "$", ")", "2024", "1,200", "—", "N/A", "Revenue")] == [
        "empty", "symbol", "symbol", "period", "value", "value", "value", "label"]


def test_collapse_repeats():
    assert collapse_repeats("993 993") == "993"
    assert collapse_repeats("( 12 ( 12") == "( 12"
    assert collapse_repeats("Net income Net income") == "Net income"
    assert collapse_repeats("Total other income") == "Total other income"


ALIGNED = """<table>
  <tr><td></td><td colspan="2">Year ended</td></tr>
  <tr><td>(in millions)</td><td>2024</td><td>2023</td></tr>
  <tr><td>Current assets:</td><td></td><td></td></tr>
  <tr><td>Cash</td><td>10</td><td>8</td></tr>
  <tr><td>Total current assets</td><td>30</td><td>25</td></tr>
  <tr><td>Noncurrent assets:</td><td></td><td></td></tr>
  <tr><td>Property</td><td>50</td><td>45</td></tr>
</table>"""


def test_headers_of_an_aligned_table():
    grid = grid_of(ALIGNED)
    property_2023 = cell_with(grid, "45")
    # "Current assets:" is closed by its "Total" row, so it does not head Property.
    assert row_header(grid, property_2023) == "Noncurrent assets: | Property"
    assert column_header(grid, property_2023) == "Year ended | 2023"
    assert row_header(grid, cell_with(grid, "10")) == "Current assets: | Cash"


def test_indentation_decides_which_sections_enclose_a_row():
    grid = grid_of("""<table>
      <tr><td></td><td>2024</td></tr>
      <tr><td>ASSETS:</td><td></td></tr>
      <tr><td style="padding:0 0 0 5pt">Current assets:</td><td></td></tr>
      <tr><td style="padding-left:10pt">Cash</td><td>10</td></tr>
      <tr><td style="padding:0 0 0 5pt">Noncurrent assets:</td><td></td></tr>
      <tr><td style="padding-left:10pt">Property</td><td>50</td></tr>
      <tr><td>Goodwill</td><td>7</td></tr>
    </table>""")
    assert grid.indented
    assert row_header(grid, cell_with(grid, "50")) == "ASSETS: | Noncurrent assets: | Property"
    # Goodwill sits at the level of ASSETS:, after deeper rows: no section encloses it.
    assert row_header(grid, cell_with(grid, "7")) == "Goodwill"


def test_ragged_table_aligns_values_with_headers_by_order():
    # FinTagging's fragments: colspans dropped, so "2024" no longer sits above its value.
    grid = grid_of("""<table>
      <tr><td></td><td>2024</td><td></td><td>2023</td><td></td><td>2022</td></tr>
      <tr><td></td><td>(In millions)</td></tr>
      <tr><td>Electric — Other revenues</td><td>$</td><td>25 </td><td></td><td></td><td>$</td><td>22</td>
          <td></td><td></td><td>$</td><td>19</td><td></td></tr></table>""")
    assert not grid.aligned
    assert column_header(grid, cell_with(grid, "19")) == "2022 | (In millions)"
    assert column_header(grid, cell_with(grid, "25")) == "2024 | (In millions)"
    assert row_header(grid, cell_with(grid, "22")) == "Electric — Other revenues"


def test_ragged_group_headers_span_their_values_evenly():
    grid = grid_of("""<table>
      <tr><td></td><td>PPL</td><td></td><td>LG&amp;E</td></tr>
      <tr><td></td><td>2024</td><td></td><td>2023</td><td></td><td>2024</td><td></td><td>2023</td></tr>
      <tr><td>Other</td><td>20</td><td>26</td><td>4</td><td>7</td></tr></table>""")
    # 4 values under 2 group headers: values 0-1 -> PPL, 2-3 -> LG&E.
    assert column_header(grid, cell_with(grid, "4")) == "LG&E | 2024"
    assert column_header(grid, cell_with(grid, "26")) == "PPL | 2023"


def test_banner_rows_head_a_repeated_sub_table():
    grid = grid_of("""<table>
      <tr><td>(in millions)</td><td>North</td><td>South</td></tr>
      <tr><td>2023</td><td></td><td></td></tr>
      <tr><td>Sales</td><td>1</td><td>2</td></tr>
      <tr><td>2022</td><td></td><td></td></tr>
      <tr><td>Sales</td><td>3</td><td>4</td></tr></table>""")
    south_2022 = cell_with(grid, "4")
    assert header_rows(grid, south_2022.row) == [0, 3]
    assert column_header(grid, south_2022) == "South | 2022"


def test_text_between_label_and_value_keeps_both_labels():
    grid = grid_of("""<table><tr><td></td><td>Level</td><td>2024</td></tr>
      <tr><td>U.S. treasury securities</td><td>Level 1</td><td>5,979</td></tr></table>""")
    assert row_header(grid, cell_with(grid, "5,979")) == "U.S. treasury securities | Level 1"


def test_find_value_cells_and_labels():
    grid = grid_of("""<table><tr><td></td><td>2024</td><td>2023</td></tr>
      <tr><td>8.875 % notes due 2031</td><td>550</td><td>2024</td></tr>
      <tr><td>Other</td><td>( 550 )</td><td>—</td></tr></table>""")
    assert [c.text for c in find_value_cells(grid, "550")] == ["550", "( 550 )"]
    assert find_value_cells(grid, "8.875") == []
    assert [c.text for c in find_value_in_labels(grid, "8.875")] == ["8.875 % notes due 2031"]
    # a period cell in a header row is not a value, the same text in a data row is
    assert [c.row for c in find_value_cells(grid, "2024")] == [1]
    label_cell = find_value_in_labels(grid, "8.875")[0]
    assert row_header(grid, label_cell) == "8.875 % notes due 2031"


def test_table_text_is_one_line_per_row():
    grid = grid_of(ALIGNED)
    lines = table_text(grid).split("\n")
    assert lines[0] == "Year ended"
    assert lines[3] == "Cash | 10 | 8"
    assert len(lines) == 7


def test_hidden_rows_are_not_part_of_the_grid():
    grid = grid_of("""<table><tr><td>Shown</td><td>1</td></tr>
      <tr style="display:none"><td>Ghost</td><td>2</td></tr></table>""")
    assert table_text(grid) == "Shown | 1"
