"""Shared by the server-run tests: a small concept file and facts, ``fhs run`` in process, and comparisons.

Not collected by pytest (no ``test_`` prefix).
"""

from __future__ import annotations

import json
from pathlib import Path

from fhs.cli import main

CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized from goods sold and services rendered.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold and services rendered.,monetaryItemType\n"
            "OperatingExpenses,Operating Expenses,Expenses of the entity's normal operations.,monetaryItemType\n"
            "NetIncomeLoss,Net Income Loss,Profit or loss for the period.,monetaryItemType\n"
            "IncomeTaxExpenseBenefit,Income Tax Expense Benefit,Current and deferred income tax.,monetaryItemType\n"
            "Assets,Assets,Probable future economic benefits controlled by the entity.,monetaryItemType\n"
            "Liabilities,Liabilities,Probable future sacrifices of economic benefits.,monetaryItemType\n"
            "StockholdersEquity,Stockholders Equity,Total equity attributable to the parent.,monetaryItemType\n")
ROWS = [("Total revenues", "Revenues"), ("Cost of revenue", "CostOfRevenue"), ("Operating expenses", "OperatingExpenses"),
        ("Net income", "NetIncomeLoss"), ("Income tax expense", "IncomeTaxExpenseBenefit"), ("Total assets", "Assets")]
TIMING = {"wall_seconds", "seconds"}  # what differs between two runs of the same work
INVOCATION = {"llm_calls", "cache_hits", "model_seconds", "wall_seconds", "n_new"}  # what this invocation did


def write_inputs(folder: Path, n: int = len(ROWS)) -> tuple[Path, Path]:
    concepts = folder / "concepts.csv"
    concepts.write_text(CONCEPTS)
    facts = folder / "facts.jsonl"
    lines = []
    for i, (row, gold) in enumerate(ROWS[:n]):
        context = "; ".join(f"{r} {100 + j}" for j, (r, _) in enumerate(ROWS))
        lines.append(json.dumps({"id": f"f{i}", "context_id": f"c{i}", "modality": "table", "value": str(100 + i),
                                 "datatype": "monetaryItemType", "context": f"Statement of operations: {context}",
                                 "gold": [gold], "row_header": row}))
    facts.write_text("\n".join(lines) + "\n")
    return facts, concepts


def fhs_run(capsys, facts: Path, concepts: Path, out: Path, *extra: str, method: str = "fhs") -> tuple[int, dict | None, str]:
    """``fhs run`` on the files (domain us-gaap); exit status, printed metrics, stderr."""
    code = main(["run", "--facts", str(facts), "--taxonomy", str(concepts), "--domain", "us-gaap",
                 "--method", method, "--out", str(out), "--quiet", *extra])
    printed, err = capsys.readouterr()
    return code, (json.loads(printed) if code == 0 else None), err


def records_of(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in (json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()
                                 if line.strip())}


def without(value, names: set[str]):
    """``value`` with every key in ``names`` dropped, at any depth."""
    if isinstance(value, dict):
        return {k: without(v, names) for k, v in value.items() if k not in names}
    if isinstance(value, list):
        return [without(v, names) for v in value]
    return value
