"""Hierarchical gold ids: a gold that is a prefix of taxonomy codes (CodiEsp-P's 4-character golds)."""

from __future__ import annotations

import json

import pytest

from fhs.core.errors import InputError
from fhs.data.facts import Fact, matches_gold, read_facts
from fhs.data.taxonomies.ids import check_gold, unknown_gold
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.method.context import MethodContext
from fhs.method.gold_query import oracle, prefix_text
from fhs.retrieval.bm25 import RetrievalConfig, Retriever
from fhs.run.evaluate import gold_rank
from fhs.run.records import read_records
from fhs.run.runner import run_method

TAXONOMY = Taxonomy.from_concepts("pcs-tiny", [
    Concept("0DT60ZZ", "Resection of Stomach, Open Approach",
            "Section: Medical and Surgical. Body part: Stomach. Approach: Open.", "procedure"),
    Concept("0DT64ZZ", "Resection of Stomach, Percutaneous Endoscopic Approach",
            "Section: Medical and Surgical. Body part: Stomach. Approach: Percutaneous Endoscopic.", "procedure"),
    Concept("0DTJ4ZZ", "Resection of Appendix, Percutaneous Endoscopic Approach",
            "Section: Medical and Surgical. Body part: Appendix. Approach: Percutaneous Endoscopic.", "procedure"),
    Concept("0DB60ZZ", "Excision of Stomach, Open Approach",
            "Section: Medical and Surgical. Body part: Stomach. Approach: Open.", "procedure"),
])


def fact(gold, match=None, value="gastrectomy") -> Fact:
    metadata = {"gold_match": match} if match else {}
    return Fact(id=f"f-{'-'.join(gold)}", context_id="d1", modality="text", value=value, datatype="procedure",
                context="A total gastrectomy was performed.", gold=tuple(gold), metadata=metadata)


def test_under_lists_the_codes_below_a_prefix_in_id_order():
    assert [c.id for c in TAXONOMY.under("0DT6")] == ["0DT60ZZ", "0DT64ZZ"]
    assert [c.id for c in TAXONOMY.under("0DT")] == ["0DT60ZZ", "0DT64ZZ", "0DTJ4ZZ"]
    assert TAXONOMY.under("0DX") == ()
    assert len(TAXONOMY.under("")) == len(TAXONOMY)


def test_prefix_rule_counts_any_code_under_the_gold():
    ranking = ["0DB60ZZ", "0DT64ZZ", "0DT60ZZ"]
    assert gold_rank(ranking, ["0DT6"]) is None  # exact: a prefix is never an id
    assert gold_rank(ranking, ["0DT6"], "prefix") == 2
    assert gold_rank(ranking, ["0DT60ZZ"], "prefix") == 3  # a full code still needs itself
    assert matches_gold("0DT64ZZ", ["0DT6"], "prefix") and not matches_gold("0DT64ZZ", ["0DT6"])
    with pytest.raises(ValueError):
        matches_gold("0DT64ZZ", ["0DT6"], "nearest")


def test_facts_file_checks_the_gold_match_flag(tmp_path):
    row = fact(["0DT6"], "prefix").to_dict()
    path = tmp_path / "facts.jsonl"
    path.write_text(json.dumps(row) + "\n" + json.dumps(dict(row, id="x", metadata={"gold_match": "fuzzy"})) + "\n")
    with pytest.raises(InputError, match=r"facts.jsonl:2, field 'metadata.gold_match'"):
        read_facts(path)


def test_a_prefix_gold_with_codes_under_it_is_known():
    facts = [fact(["0DT6"], "prefix"), fact(["0DT6"])]
    assert unknown_gold(facts[:1], TAXONOMY) == []
    assert unknown_gold(facts[1:], TAXONOMY) == ["0DT6"]
    with pytest.raises(InputError, match="none of the gold ids"):
        check_gold([fact(["0ZZ9"], "prefix")], TAXONOMY, "facts.jsonl")


def test_oracle_query_of_a_prefix_is_what_the_codes_under_it_share():
    assert prefix_text(TAXONOMY.under("0DT6")) == (
        "Resection of Stomach, Approach Section: Medical and Surgical. Body part: Stomach. Approach:")
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()))
    out = oracle(fact(["0DT6"], "prefix"), ctx)
    assert "Resection of Stomach" in out["queries"][0] and "Open" not in out["queries"][0]
    assert out["ranking"][0].startswith("0DT6")
    assert oracle(fact(["0DT6"]), ctx)["ranking"] == []  # exact rule: nothing to quote
    with_id = oracle(fact(["0DT6"], "prefix"), MethodContext(taxonomy=TAXONOMY, retriever=ctx.retriever,
                                                            options={"oracle_with_id": True}))
    assert "0DT6." in with_id["queries"][0]


def test_runner_scores_and_records_the_prefix_rule(tmp_path):
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()))
    facts = [fact(["0DT6"], "prefix", "resection of stomach"), fact(["0DT6"], value="resection of stomach")]
    facts[1] = Fact(**{**facts[1].__dict__, "id": "exact"})
    result = run_method(facts, "direct", ctx, tmp_path, progress=False)
    records = {r["id"]: r for r in read_records(tmp_path / "records.jsonl")}
    assert records["f-0DT6"]["rank"] == 1 and records["f-0DT6"]["gold_match"] == "prefix"
    assert records["exact"]["rank"] is None and "gold_match" not in records["exact"]
    assert result["recall@1"] == 0.5
