"""One fact of an FHS run as tables: its hypotheses, rendered queries, the verifier's window and ranks.

Chapters 02 and 04 show one fact stage by stage. Which fact is a rule fixed in
advance (:func:`telling_fact`), never an outcome picked after looking; the
tables only lay out what the record holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

SYMBOL = {"support": "+", "contradict": "-", "abstain": "."}


def verdict_string(entry: Mapping[str, str] | None) -> str:
    """F+ R+ E- Q. S. T. : one symbol per dimension (support, contradict, abstain)."""
    return " ".join(f"{dim[0]}{SYMBOL.get(value, '?')}" for dim, value in entry.items()) if entry else "not judged"


def telling_fact(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """Prefer a table fact whose gold concept reached the verifier's window, then one in the fused pool."""

    def interest(record):
        window = record["verifier"]["window"]["ids"] if record.get("verifier") else []
        in_pool = any(g in record["pool"]["ids"] for g in record["gold"])
        return (any(g in window for g in record["gold"]), in_pool, record["modality"] == "table")

    return max(records, key=interest)


def fact_tables(record: Mapping[str, Any]) -> list[tuple[pd.DataFrame, str]]:
    """(table, caption) pairs: the hypotheses, the rendered queries and, when it ran, the verifier's window."""
    dims = pd.DataFrame(
        [
            {**h["dimensions"], "retrieval_query": h["retrieval_query"], "source": h["source"]}
            for h in record["hypotheses"]
        ]
    )
    tables = [
        (dims, f"Hypotheses for fact {record['id']} (gold: {', '.join(record['gold'])})"),
        (pd.DataFrame(record["queries"]), "Rendered queries (each retrieved to depth 200)"),
    ]
    verifier = record.get("verifier")
    if verifier:
        window = []
        for cid in verifier["window"]["ids"]:
            row = {
                "candidate": cid,
                "gold": "yes" if cid in record["gold"] else "",
                "pool rank": record["pool"]["ids"].index(cid) + 1,
                "final rank": record["ranking"].index(cid) + 1 if cid in record["ranking"] else None,
            }
            for j, verdicts in enumerate(verifier["verdicts"], start=1):
                row[f"h{j}"] = verdict_string(verdicts["entries"].get(cid)) if verdicts["asked"] else "not asked"
            row["v̄"] = verifier["vbar"].get(cid)
            window.append(row)
        tables.append((pd.DataFrame(window), "Verifier window: verdicts per dimension, consensus support, ranks"))
    return tables


def rank_line(record: Mapping[str, Any]) -> str:
    """Where the gold concept is after fusion and after the verifier, and what the selector chose."""
    fused = next((i + 1 for i, c in enumerate(record["pool"]["ids"]) if c in record["gold"]), None)
    return (
        f"gold rank after fusion: {fused} | after the verifier: {record['rank']} | selector chose: "
        f"{record.get('selected')} {'(correct)' if record.get('correct') else ''}"
    )


def verifier_example(records: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
    """A fact whose gold reached the judged window, else one whose gold was ranked at all (Tables 26-28)."""

    def interest(record):
        window = record["verifier"]["window"]["ids"] if record.get("verifier") else []
        return (any(g in window for g in record["gold"]), record["rank"] is not None)

    return max(records, key=interest)


def window_with_and_without(example: Mapping[str, Any], arm: Mapping[str, Any]) -> pd.DataFrame:
    """Tables 26-28: the window in fused order, each candidate's v̄, its rank with the verifier and in ``arm``."""
    rows = []
    for cid in example["verifier"]["window"]["ids"]:
        rows.append(
            {
                "candidate": cid,
                "gold": "yes" if cid in example["gold"] else "",
                "fused rank": example["pool"]["ids"].index(cid) + 1,
                "v̄": example["verifier"]["vbar"][cid],
                "rank with verifier": example["ranking"].index(cid) + 1,
                "rank − verifier arm": arm["ranking"].index(cid) + 1 if cid in arm["ranking"] else None,
            }
        )
    return pd.DataFrame(rows)
