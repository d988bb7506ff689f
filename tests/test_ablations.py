"""Chapter 03's record-level tables: β chosen on development data (Table 12) and the window sweep (E.2)."""

import json
import re

import pytest

from fhs.core.text import camel_split
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.run.ledger import SqliteLedger
from fhs.run.evaluate import gold_rank
from fhs.run.records import read_records
from fhs.run.rescore import rescore
from fhs.run.runner import run_method
from fhs.run.tables.ablations import (BetaChoice, beta_sweep, choose_beta, choose_beta_on_dev, counts, final_rows,
                                      window_sensitivity)
from scripted_llm import OverlapRetriever, ScriptedLLM
from test_pipeline import DOMAIN, H1, H2, hypothesis_reply

LISTED = re.compile(r"^\[\d+\] (\S+) /", flags=re.M)


def record(fid, modality, ids, normalized, vbar, gold, failed=False):
    """A minimal FHS-shaped record: a fused pool, the verifier's v̄ over it, and the gold."""
    if failed:
        return {"id": fid, "context_id": fid, "modality": modality, "gold": [gold], "rank": None,
                "ranking": [], "failed": "refused"}
    pool = {"ids": ids, "scores": normalized, "normalized": normalized,
            "contributions": [[[0, i + 1]] for i in range(len(ids))], "union_size": len(ids)}
    return {"id": fid, "context_id": fid, "modality": modality, "gold": [gold], "pool": pool,
            "verifier": {"vbar": vbar, "vbar_outside": 0.0}, "ranking": ids, "rank": gold_rank(ids, [gold])}


def gold_behind(n, fid="t", modality="table", vbar_gold=1.0):
    """Gold at fused rank n + 1 just below n candidates; the verifier supports only the gold."""
    ids = [f"c{i}" for i in range(n)] + ["gold"]
    normalized = [1.0 - 0.01 * i for i in range(n + 1)]
    return record(fid, modality, ids, normalized, {"gold": vbar_gold}, "gold")


def test_counts_and_refused_facts_count_as_misses():
    records = [gold_behind(0, "a"), record("b", "table", [], [], {}, "gold", failed=True)]
    assert counts(records) == {"facts": 2, "refused": 1}
    sweep = beta_sweep(records, [0.0])
    assert sweep[0]["facts"] == 2 and sweep[0]["refused"] == 1 and sweep[0]["recall@1"] == 0.5


def test_beta_sweep_is_offline_rescoring_of_each_record():
    records = [gold_behind(12, "a"), gold_behind(3, "b", modality="text")]
    sweep = beta_sweep(records, [0.0, 0.05, 0.6])
    for row in sweep:
        rescored = [rescore(r, beta=row["beta"]) for r in records]
        assert row["recall@10"] == sum(r["rank"] <= 10 for r in rescored) / 2
        assert row["table_recall@10"] == float(rescored[0]["rank"] <= 10) and row["table_facts"] == 1
    # beta 0: the fused order (gold at 13); 0.05 lifts it by 5 places, 0.6 to the top
    assert [r["table_recall@10"] for r in sweep] == [0.0, 1.0, 1.0]
    assert sweep[-1]["table_mrr"] == 1.0 > sweep[1]["table_mrr"]


def row(beta, r10, mrr, table_facts=1):
    return {"beta": beta, "table_facts": table_facts, "table_recall@10": r10, "table_mrr": mrr,
            "recall@10": r10, "mrr": mrr}


def test_choose_beta_follows_the_authors_rule_then_the_paper_beta():
    assert choose_beta([row(0.0, 0.2, 0.1), row(0.2, 0.5, 0.1), row(0.4, 0.4, 0.9)]).beta == 0.2  # Recall@10 first
    assert choose_beta([row(0.1, 0.5, 0.1), row(0.2, 0.5, 0.3), row(0.4, 0.5, 0.2)]).beta == 0.2  # then MRR
    assert choose_beta([row(0.0, 0.5, 0.3), row(0.4, 0.5, 0.3), row(1.0, 0.5, 0.3)]).beta == 0.4  # nearest 0.6
    choice = choose_beta([row(0.0, 0.1, 0.1, table_facts=0), row(0.6, 0.2, 0.1, table_facts=0)])
    assert choice.basis == "all facts" and choice.beta == 0.6 and "all facts" in choice.rule
    with pytest.raises(ValueError):
        choose_beta([])


def overtaken(fid):
    """Gold second in the fused order; twelve candidates the verifier supports more sit just below it."""
    ids = ["c0", "gold"] + [f"d{i}" for i in range(1, 13)]
    normalized = [1.0, 0.99] + [0.95 - 0.001 * i for i in range(1, 13)]
    return record(fid, "table", ids, normalized, {"gold": 0.3, **{f"d{i}": 1.0 for i in range(1, 13)}}, "gold")


def test_beta_is_chosen_on_dev_and_test_only_gives_the_final_rows():
    dev = [overtaken("d1"), overtaken("d2")]  # a small beta lifts the gold; a large one lets twelve pass it
    choice = choose_beta_on_dev(dev, [0.0, 0.05, 0.1, 0.6])
    assert isinstance(choice, BetaChoice) and choice.basis == "table facts"
    by_beta = {r["beta"]: r for r in choice.sweep}
    assert by_beta[0.6]["table_recall@10"] == 0.0 and by_beta[0.0]["table_mrr"] == 0.5
    assert choice.beta == 0.05 and by_beta[0.05]["table_mrr"] == 1.0
    test = [gold_behind(5, "t1"), gold_behind(50, "t2")]
    rows = final_rows(test, choice)
    assert [(r["beta"], r["chosen_on"]) for r in rows] == [(0.05, "development"), (0.6, "paper")]
    for r in rows:
        assert r["mrr"] == pytest.approx(sum(1 / rescore(t, beta=r["beta"])["rank"] for t in test) / 2)
        assert r["facts"] == 2 and r["refused"] == 0
    assert json.dumps(choice.to_dict())
    same = final_rows(test, BetaChoice(beta=0.6, sweep=(), basis="table facts", rule=""))
    assert [r["chosen_on"] for r in same] == ["development"]


# ---- Appendix E.2 through the normal run path ------------------------------------------

WORDS = ["Revenue", "Cost", "Asset", "Liability", "Equity", "Expense", "Income", "Tax", "Cash", "Debt",
         "Lease", "Stock", "Share", "Loss", "Gain", "Interest", "Dividend", "Inventory", "Goodwill", "Warrant",
         "Bond", "Note", "Option", "Grant", "Award", "Plan"]
NAMES = [f"{w}NonvestedNumber" for w in WORDS]
TAXONOMY = Taxonomy.from_concepts("toy", [Concept(n, camel_split(n), datatype="sharesItemType") for n in NAMES])
FACT = Fact(id="f1", context_id="c1", modality="table", value="1,229,202", datatype="sharesItemType",
            context="Nonvested shares at December 31, 2023 1,229,202", gold=(NAMES[3],),
            row_header="Nonvested at December 31, 2023", column_header="Number")


def codes(request):
    ids = LISTED.findall(request.messages[-1].content)
    return json.dumps({"verdicts": ["SSSSSS" if cid == NAMES[3] else "SCSSSS" for cid in ids]})


def test_window_sizes_run_the_deployed_one_first_and_smaller_ones_make_no_new_calls(tmp_path):
    backend = ScriptedLLM({"hypothesis": [hypothesis_reply(H1, "Number of nonvested shares at period end"),
                                          hypothesis_reply(H2, "Nonvested number of shares")],
                           "verifier": [codes] * 20})
    llm = CachedLLM(backend, ResponseCache(tmp_path / "responses.sqlite"))
    ledger = SqliteLedger(tmp_path / "verdicts.sqlite")
    asked = {}

    def run_variant(config, tag):
        ctx = MethodContext(taxonomy=TAXONOMY, retriever=OverlapRetriever(TAXONOMY), llm=llm, domain=DOMAIN,
                            config=config, ledger=ledger)
        before = len(backend.requests)
        run_method([FACT], "fhs", ctx, tmp_path / tag, progress=False)
        asked[config.k_v] = [LISTED.findall(r.messages[-1].content) for r in backend.requests[before:]
                             if r.purpose == "verifier"]
        return read_records(tmp_path / tag / "records.jsonl")

    base = FHSConfig(selector=False)
    rows = window_sensitivity(run_variant, base, sizes=(5, 20, 10, 15))
    assert [r["k_v"] for r in rows] == [5, 10, 15, 20]
    assert list(asked) == [10, 5, 15, 20]  # the deployed window ran first
    by_kv = {r["k_v"]: r for r in rows}
    assert by_kv[10]["new_verifier_calls"] == 2 and [len(a) for a in asked[10]] == [10, 10]
    assert by_kv[5]["new_verifier_calls"] == 0 and by_kv[5]["new_hypothesis_calls"] == 0 and asked[5] == []
    assert by_kv[5]["ledger_verdicts"] == 2 * 5
    # a larger window asks each hypothesis only about the candidates beyond what was judged
    assert by_kv[15]["new_verifier_calls"] == 2 and [len(a) for a in asked[15]] == [5, 5]
    assert by_kv[15]["ledger_verdicts"] == 2 * 10 and by_kv[20]["ledger_verdicts"] == 2 * 15
    assert all(r["facts"] == 1 and r["refused"] == 0 for r in rows)
    assert {"recall@1", "recall@10", "mrr"} <= set(rows[0])
