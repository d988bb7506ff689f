"""FinCL loader: hand-written CSV rows, error cases, and the real 500-fact subset."""

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from fhs.core.errors import InputError
from fhs.data.datasets import fincl
from fhs.data.datasets.numbers import mention_offsets, values_match
from gaap_taxonomy import bm25_taxonomy, data_dir, tiny_taxonomy

HEADER = ["context", "category", "entity", "entity_type", "query", "answer"]

REVENUE_TABLE = (
    "<table><tr><td></td><td></td><td></td></tr>"
    "<tr><td></td><td>2024</td><td></td><td>2023</td><td></td><td>2022</td></tr>"
    "<tr><td></td><td>(In millions)</td></tr>"
    "<tr><td>Electric — Other revenues</td><td>$</td><td>25 </td><td></td><td></td><td>$</td><td>22</td>"
    "<td></td><td></td><td>$</td><td>19</td><td></td></tr>"
    "<tr><td>Gas — Other revenues</td><td>$</td><td>19 </td><td></td><td></td><td>$</td><td>8</td>"
    "<td></td><td></td><td>$</td><td>7</td><td></td></tr>"
    "<tr><td>Interest income Interest income</td><td>$ $</td><td>993 993</td></tr>"
    "<tr><td>8.875 % senior notes due 2031</td><td>550</td></tr></table>"
)
PARAGRAPH = ("On March 25, 2024, we completed our IPO in which we issued 18,576,527 shares. "
             "We received net proceeds of $ 600.0 million.")


def query(category: str, entity: str, datatype: str, quoted: str) -> str:
    return (f"{category}: <entity> {entity} </entity> <entity type> {datatype} </entity type> "
            f"<context> {quoted} </context>")


ROWS = [
    # 19 occurs twice; the quoted row picks the one in "Electric — Other revenues"
    [REVENUE_TABLE, "table", "19", "monetaryItemType",
     query("table", "19", "monetaryItemType", "Electric — Other revenues | $ | 25 | $ | 22 | $ | 19"),
     "us-gaap:RevenueNotFromContractWithCustomerOther"],
    # no quoted row and two cells show 19
    [REVENUE_TABLE, "table", "19", "monetaryItemType", query("table", "19", "monetaryItemType", "None"),
     "us-gaap:RevenueNotFromContractWithCustomerOther"],
    # cell text doubled by FinTagging's extraction
    [REVENUE_TABLE, "table", "993", "monetaryItemType", query("table", "993", "monetaryItemType", "None"),
     "us-gaap:InvestmentIncomeInterest"],
    # the value is written inside a label
    [REVENUE_TABLE, "table", "8.875", "percentItemType", query("table", "8.875", "percentItemType", "None"),
     "us-gaap:DebtInstrumentInterestRateStatedPercentage"],
    # nowhere in the table
    [REVENUE_TABLE, "table", "31415", "monetaryItemType", query("table", "31415", "monetaryItemType", "None"),
     "us-gaap:Revenues"],
    [PARAGRAPH, "text", "18576527", "sharesItemType", query("text", "18576527", "sharesItemType", PARAGRAPH),
     "us-gaap:SaleOfStockNumberOfSharesIssuedInTransaction"],
]


def write_csv(path: Path, rows, header=HEADER) -> Path:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)
    return path


@pytest.fixture
def small_csv(tmp_path):
    return write_csv(tmp_path / "fincl.csv", ROWS)


def test_table_facts_are_located_in_their_cells(small_csv):
    facts = fincl.load_file(small_csv, tiny_taxonomy())
    quoted, unquoted, doubled, in_label, missing, text = facts
    assert quoted.metadata["match_status"] == "exact_cell"
    assert quoted.metadata["query_row_found"] is True
    assert quoted.row_header == "Electric — Other revenues"
    assert quoted.column_header == "2022 | (In millions)"
    assert unquoted.metadata["match_status"] == "ambiguous"
    assert unquoted.metadata["n_candidates"] == 2
    assert unquoted.row_header == "Electric — Other revenues"   # the first in reading order
    assert doubled.metadata["match_status"] == "exact_cell"
    assert doubled.metadata["cell_text"] == "993"
    assert doubled.row_header == "Interest income"
    assert in_label.metadata["match_status"] == "exact_cell"
    assert in_label.row_header == "8.875 % senior notes due 2031"
    assert missing.metadata["match_status"] == "unmatched"
    assert (missing.row_header, missing.column_header) == ("", "")


def test_text_fact_gets_its_sentence(small_csv):
    text = fincl.load_file(small_csv)[-1]
    assert text.modality == "text"
    assert text.metadata["match_status"] == "exact_sentence"
    assert text.sentence == "On March 25, 2024, we completed our IPO in which we issued 18,576,527 shares."
    assert text.context == PARAGRAPH


def test_fact_fields_ids_and_contexts(small_csv):
    facts = fincl.load_file(small_csv, tiny_taxonomy())
    assert [f.id for f in facts] == [f"fincl-{i:04d}" for i in range(len(ROWS))]
    assert len({f.context_id for f in facts}) == 2                 # one table, one paragraph
    assert facts[0].context_id == fincl.context_id(REVENUE_TABLE)  # stable: a hash of the HTML
    assert facts[0].gold == ("RevenueNotFromContractWithCustomerOther",)
    assert facts[0].value == "19" and facts[0].datatype == "monetaryItemType"
    assert facts[0].metadata["gold_in_inventory"] is True
    assert facts[2].metadata["gold_in_inventory"] is False          # not in the tiny taxonomy
    table_context = facts[0].context
    assert "<td" not in table_context and "Electric — Other revenues | $25 | $22 | $19" in table_context.split("\n")


def test_csv_lines_are_reported_for_multiline_records(tmp_path):
    rows = [ROWS[5], [REVENUE_TABLE.replace("<tr>", "\n<tr>"), *ROWS[0][1:]], ROWS[5]]
    path = write_csv(tmp_path / "lines.csv", rows)
    facts = fincl.load_file(path)
    # record 2 starts on line 3 and holds one newline per <tr>; record 3 starts on the line after it
    assert [f.metadata["line"] for f in facts] == [2, 3, 3 + REVENUE_TABLE.count("<tr>") + 1]


def test_malformed_row_names_line_and_field(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text(",".join(HEADER) + "\n<p>x 1</p>,text,1,monetaryItemType\n", encoding="utf-8")
    with pytest.raises(InputError) as error:
        fincl.read_rows(path)
    assert error.value.line == 2
    assert error.value.field == "query"
    assert "expected 6 fields, got 4" in str(error.value)


@pytest.mark.parametrize("column, bad, message", [
    ("category", "figure", "expected one of"),
    ("answer", "RevenueWithoutPrefix", "prefixed concept"),
    ("entity", "  ", "empty value"),
])
def test_bad_values_name_line_and_field(tmp_path, column, bad, message):
    row = list(ROWS[5])
    row[HEADER.index(column)] = bad
    path = write_csv(tmp_path / "bad.csv", [ROWS[5], row])
    with pytest.raises(InputError) as error:
        fincl.read_rows(path)
    assert (error.value.line, error.value.field) == (3, column)
    assert message in str(error.value)


def test_missing_column_and_missing_file(tmp_path):
    path = write_csv(tmp_path / "cols.csv", [], header=["context", "category", "entity"])
    with pytest.raises(InputError) as error:
        fincl.read_rows(path)
    assert (error.value.line, error.value.field) == (1, "entity_type")
    with pytest.raises(InputError, match="no such FinCL file"):
        fincl.read_rows(tmp_path / "absent.csv")


# --- the real subset -----------------------------------------------------------------------

CSV_PATH = data_dir() / "fintagging" / fincl.FILE_NAME


@pytest.fixture(scope="module")
def real_facts():
    if not CSV_PATH.is_file():
        pytest.fail(f"{CSV_PATH} is missing: set FHS_DATA to the shared data folder")
    return fincl.load(data_dir(), bm25_taxonomy())


@pytest.fixture(scope="module")
def frame():
    return pd.read_csv(CSV_PATH, dtype=str, keep_default_na=False)


@pytest.mark.data
def test_real_subset_counts_match_an_independent_read(real_facts, frame):
    assert len(real_facts) == len(frame) == 500
    assert len({f.context_id for f in real_facts}) == frame["context"].nunique()
    counts = frame["category"].value_counts().to_dict()
    assert {m: sum(f.modality == m for f in real_facts) for m in counts} == counts
    assert [f.value for f in real_facts] == [v.strip() for v in frame["entity"]]
    assert [f.gold[0] for f in real_facts] == [a.split(":", 1)[1] for a in frame["answer"]]


@pytest.mark.data
def test_real_subset_gold_inventory_check(real_facts, frame):
    with (data_dir() / "fintagging" / "us_gaap_2024_BM25.jsonl").open(encoding="utf-8") as handle:
        inventory = {json.loads(line)["us_gaap_tag"] for line in handle}
    outside = sum(a.split(":", 1)[1] not in inventory for a in frame["answer"])
    assert sum(not f.metadata["gold_in_inventory"] for f in real_facts) == outside


@pytest.mark.data
def test_real_subset_locations_are_sound(real_facts):
    statuses = {"exact_cell", "exact_sentence", "ambiguous", "unmatched"}
    assert {f.metadata["match_status"] for f in real_facts} <= statuses
    for fact in real_facts:
        assert "<td" not in fact.context and "<tr" not in fact.context
        if fact.modality == "table" and fact.metadata["match_status"] != "unmatched":
            cell = fact.metadata["cell_text"]
            assert values_match(cell, fact.value) or mention_offsets(cell, fact.value), fact.id
            assert cell in fact.context
        if fact.modality == "text" and fact.metadata["match_status"] != "unmatched":
            assert fact.sentence and fact.sentence in fact.context
    assert len({f.id for f in real_facts}) == 500
