"""The verdict ledger reuses a verdict only where nothing it depends on changed, and ``--fresh`` reuses none.

Runs go through ``fhs run --backend openai`` against the scripted servers of
``fake_openai.py``; the verifier's answer (all support or all contradict) is
what the server is set to say, so a verdict served from the ledger shows up
as a v̄ the server did not give.
"""

from __future__ import annotations

import json
import re

import pytest

from fake_openai import completion, serve
from fhs.cli import main
from fhs.data.domain import load_domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept
from fhs.method.config import FHSConfig
from fhs.method.hypotheses import Hypothesis
from fhs.run import ledger
from fhs.run.records import read_records

CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n")
EDITED = CONCEPTS.replace("Revenues,Revenues,Amount of revenue recognized.",
                          "Revenues,Sales Proceeds,Cash taken at the till.")
FACT = {"id": "f1", "context_id": "c1", "modality": "table", "value": "10", "datatype": "monetaryItemType",
        "context": "Total revenues 10 9; cost of revenue 4 3", "gold": ["Revenues"], "row_header": "Total revenues"}


def hypothesis(seed) -> str:
    """One hypothesis per sample (the seed tells the J samples apart), so each gets its own verifier call."""
    return json.dumps({"dimensions": {"FAMILY": "Revenue", "ROLE": "Revenue", "EVENT": f"Sale {seed}",
                                      "QUALIFIER": "UNRESOLVED", "SCOPE": "UNRESOLVED", "TEMPORAL": "Duration"},
                       "operators": ["direct_label"], "retrieval_query": "Total revenue recognized."})
CANDIDATE_LINE = re.compile(r"^\[\d+\] ", flags=re.M)


def server(code: str):
    """A server whose verifier gives every candidate ``code`` (six letters), and every sample one hypothesis."""

    def reply(body):
        prompt = body["messages"][-1]["content"]
        if '"verdicts"' in prompt:
            return 200, completion(json.dumps({"verdicts": [code] * len(CANDIDATE_LINE.findall(prompt))})), {}
        return 200, completion(hypothesis(body.get("seed"))), {}

    return serve(reply)


@pytest.fixture
def inputs(tmp_path):
    (tmp_path / "facts.jsonl").write_text(json.dumps(FACT) + "\n")
    (tmp_path / "concepts.csv").write_text(CONCEPTS)
    return tmp_path


def fhs_run(capsys, base, url: str, out: str, *extra: str) -> list[dict]:
    code = main(["run", "--facts", str(base / "facts.jsonl"), "--taxonomy", str(base / "concepts.csv"),
                 "--domain", "us-gaap", "--method", "fhs", "--backend", "openai", "--model", "fake",
                 "--base-url", url, "--schema-transport", "none", "--selector", "off", "--cache",
                 str(base / "cache" / "responses.sqlite"), "--out", str(base / out), "--quiet", *extra])
    err = capsys.readouterr().err
    assert code == 0, err
    return read_records(base / out / "records.jsonl")


def verifier_requests(received: list[dict]) -> int:
    return sum('"verdicts"' in body["messages"][-1]["content"] for body in received)


def test_an_edited_gold_concept_and_another_server_are_judged_again_under_fresh(capsys, inputs):
    with server("SSSSSS") as (url, received):
        first = fhs_run(capsys, inputs, url, "run")[0]
    assert verifier_requests(received) == 2 and first["verifier"]["vbar"]["Revenues"] == 1.0
    (inputs / "concepts.csv").write_text(EDITED)
    with server("CCCCCC") as (url, received):
        again = fhs_run(capsys, inputs, url, "run", "--fresh")[0]
    assert verifier_requests(received) == 2  # both hypotheses asked: nothing came from the ledger
    assert all(v["from_ledger"] == 0 for v in again["verifier"]["verdicts"])
    assert again["verifier"]["vbar"]["Revenues"] == 0.0  # what this server said, not the old verdict


def test_fresh_reuses_no_verdict_even_when_nothing_changed(capsys, inputs):
    with server("SSSSSS") as (url, received):
        fhs_run(capsys, inputs, url, "a")
        reused = fhs_run(capsys, inputs, url, "b")[0]  # a new --out with the same inputs: reuse is right
        fresh = fhs_run(capsys, inputs, url, "b", "--fresh")[0]
    window = len(reused["verifier"]["window"]["ids"])
    assert [v["from_ledger"] for v in reused["verifier"]["verdicts"]] == [window, window]
    assert [v["from_ledger"] for v in fresh["verifier"]["verdicts"]] == [0, 0]
    # the fresh run asked the verifier again (its identical requests were answered by --cache)
    assert [c["cached"] for c in fresh["llm_calls"] if c["purpose"] == "verifier"] == [True, True]
    assert verifier_requests(received) == 2


def test_two_caches_in_one_folder_keep_two_ledgers(tmp_path):
    assert ledger.ledger_path(tmp_path / "responses.sqlite") == tmp_path / "verdicts.sqlite"
    assert ledger.ledger_path(tmp_path / "other.sqlite") == tmp_path / "other.verdicts.sqlite"


def test_a_ledger_is_present_however_many_verdicts_it_holds(tmp_path, monkeypatch):
    """Asking whether a run has a ledger never counts its rows (a full scan, per hypothesis per fact)."""
    kept = ledger.SqliteLedger(tmp_path / "verdicts.sqlite")
    assert kept and ledger.MemoryLedger()  # empty, and still ledgers that verify_pool consults
    monkeypatch.setattr(ledger.SqliteLedger, "__len__", lambda self: pytest.fail("the ledger was counted"))
    kept.record("scope", "f", "h", {"C1#x": {"FAMILY": "support"}})
    assert bool(kept) and kept.lookup("scope", "f", "h", ["C1#x"]) == {"C1#x": {"FAMILY": "support"}}
    kept.close()


class Named:
    def __init__(self, **attributes):
        self.__dict__.update(attributes)


def test_every_input_of_the_prompt_is_in_a_key():
    domain, config = load_domain("us-gaap"), FHSConfig()
    fact = Fact(**{**FACT, "gold": tuple(FACT["gold"])})
    hypothesis = Hypothesis(dimensions=(("FAMILY", "Revenue"),), retrieval_query="q")
    llm = Named(name="openai:fake", kind="openai", model="fake", provenance="http://a")
    scope = ledger.verifier_scope(llm, config, domain)
    assert scope != ledger.verifier_scope(Named(**{**llm.__dict__, "provenance": "http://b"}), config, domain)
    assert scope != ledger.verifier_scope(llm, config.replace(compact_outputs=False), domain)
    other_domain = load_domain("icd-10-cm")
    assert scope != ledger.verifier_scope(llm, config, other_domain)
    key = ledger.hypothesis_key(hypothesis, fact)
    assert key != ledger.hypothesis_key(hypothesis, Fact(**{**FACT, "gold": ("Revenues",), "context": "Other text 10"}))
    assert key == ledger.hypothesis_key(hypothesis, Fact(**{**FACT, "gold": ("CostOfRevenue",)}))  # gold is not shown
    concept = Concept("Revenues", "Revenues", "Amount of revenue recognized.", "monetaryItemType")
    assert ledger.candidate_key(concept).startswith("Revenues#")
    for changed in (Concept("Revenues", "Sales", concept.definition, concept.datatype),
                    Concept("Revenues", concept.label, "Other.", concept.datatype),
                    Concept("Revenues", concept.label, concept.definition, "stringItemType")):
        assert ledger.candidate_key(changed) != ledger.candidate_key(concept)


def test_an_edited_prompt_template_is_another_scope(monkeypatch):
    from string import Template

    llm = Named(name="x", kind="x", model="x", provenance="")
    before = ledger.verifier_scope(llm, FHSConfig(), load_domain("us-gaap"))
    original = ledger.load_template
    monkeypatch.setattr(ledger, "load_template",
                        lambda name, *order: Template(original(name, *order).template + " edited")
                        if name == "verifier" else original(name, *order))
    assert ledger.verifier_scope(llm, FHSConfig(), load_domain("us-gaap")) != before


def test_a_damaged_ledger_page_is_one_line_naming_the_ledger(tmp_path):
    import sqlite3

    from fhs.core.errors import InputError
    from fhs.run.ledger import SqliteLedger

    path = tmp_path / "verdicts.sqlite"
    ledger = SqliteLedger(path)
    for i in range(300):
        ledger.record("s", f"f{i}", "h", {f"c{j}": {"FAMILY": "support"} for j in range(10)})
    ledger.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = db.execute("PRAGMA page_size").fetchone()[0]
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_verdicts_1'").fetchone()
    with open(path, "r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(b"\xff" * size)
    with pytest.raises(InputError, match="verdicts.sqlite: the verdict ledger is damaged .*malformed"):
        SqliteLedger(path).lookup("s", "f1", "h", ["c1"])
