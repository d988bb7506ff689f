"""``Fact.to_dict`` is what fingerprints, stamps and facts files are made of: it must stay the
dataclass's own field-by-field dict (gold as a list, the metadata a copy of its own)."""

from __future__ import annotations

from dataclasses import asdict

from fhs.data.facts import Fact, fact_from_dict


def _fact() -> Fact:
    return Fact(id="f1", context_id="c1", modality="table", value="1,234", datatype="monetary",
                context="Revenue | 2024", gold=("us-gaap:Revenues",), row_header="Revenue",
                column_header="2024", metadata={"number": 1234.0, "span": [3, 9], "nested": {"a": 1}})


def test_to_dict_is_asdict_with_gold_as_a_list_in_field_order():
    fact = _fact()
    expected = asdict(fact)
    expected["gold"] = list(fact.gold)
    assert fact.to_dict() == expected
    assert list(fact.to_dict()) == list(expected)  # same key order: the digests hash the JSON


def test_to_dict_reads_back_and_owns_its_metadata_dict():
    fact = _fact()
    record = fact.to_dict()
    assert fact_from_dict(record) == fact
    record["metadata"]["number"] = 0
    assert fact.metadata["number"] == 1234.0
