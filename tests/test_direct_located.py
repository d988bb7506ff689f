"""``direct-located``: direct retrieval with the value's headers or sentence as the query, end to end."""

from __future__ import annotations

import json
import pytest

from fhs.cli import main
from fhs.method.registry import LLM_METHODS, METHODS, MODEL_FREE

TABLE = "Income statement | Revenues | 10 | 9 | Cost of revenue | 4 | 3 | Operating expenses | 2 | 2"


@pytest.fixture
def one_table(tmp_path):
    """Three cells of one table: the same visible context, each with its own row header."""
    taxonomy = tmp_path / "concepts.csv"
    taxonomy.write_text("id,label,definition,datatype\n"
                        "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
                        "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n"
                        "OperatingExpenses,Operating Expenses,Expenses of operations.,monetaryItemType\n")
    cells = [("f1", "10", "Revenues", "Revenues"), ("f2", "4", "Cost of revenue", "CostOfRevenue"),
             ("f3", "2", "Operating expenses", "OperatingExpenses")]
    facts = tmp_path / "facts.jsonl"
    facts.write_text("".join(json.dumps({
        "id": fid, "context_id": "t1", "modality": "table", "value": value, "datatype": "monetaryItemType",
        "context": TABLE, "gold": [gold], "row_header": row, "column_header": "2024"}) + "\n"
        for fid, value, row, gold in cells))
    return facts, taxonomy


def run(method, facts, taxonomy, out):
    assert main(["run", "--facts", str(facts), "--taxonomy", str(taxonomy), "--method", method,
                 "--out", str(out), "--quiet"]) == 0
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return json.loads((out / "metrics.json").read_text()), records


def test_it_is_a_named_model_free_variant_and_direct_is_unchanged():
    assert "direct-located" in METHODS and "direct-located" in MODEL_FREE and "direct-located" not in LLM_METHODS
    assert METHODS["direct"].__name__ == "direct"


def test_the_cells_of_one_table_get_their_own_rankings(tmp_path, one_table):
    facts, taxonomy = one_table
    direct, direct_records = run("direct", facts, taxonomy, tmp_path / "direct")
    located, records = run("direct-located", facts, taxonomy, tmp_path / "located")
    assert len({tuple(r["ranking"]) for r in direct_records}) == 1  # the whole table: one ranking for all
    assert direct["recall@1"] < 0.5
    assert located["method"] == "direct-located" and located["n_facts"] == 3
    assert located["recall@1"] == 1.0 and located["mrr"] == 1.0
    assert records[1]["queries"] == ["4 monetaryItemType Cost of revenue 2024"] and records[1]["located"] is True


def test_a_fact_the_loader_did_not_locate_issues_the_direct_query(tmp_path, one_table):
    facts, taxonomy = one_table
    lines = facts.read_text().splitlines()
    bare = {**json.loads(lines[0]), "row_header": "", "column_header": ""}
    facts.write_text(json.dumps(bare) + "\n")
    _, records = run("direct-located", facts, taxonomy, tmp_path / "bare")
    assert records[0]["queries"] == [f"10 monetaryItemType {TABLE}"] and records[0]["located"] is False


@pytest.mark.data
@pytest.mark.slow
def test_fincl_runs_with_the_located_query(tmp_path):
    out = tmp_path / "fincl"
    assert main(["run", "--dataset", "fincl", "--method", "direct-located", "--limit", "40", "--out", str(out),
                 "--quiet"]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["n_facts"] == 40 and 0.0 <= metrics["recall@1"] <= metrics["recall@10"] <= 1.0
    assert metrics["mrr"] > 0
