"""dev/llm_free_search.py: the LLM-free runs' queries, timed on three scorers that must rank alike."""

from __future__ import annotations

from dev import llm_free_search
from fhs.data.evidence import direct_query
from test_plan import fixture_experiment


def test_every_fact_sends_its_direct_then_its_oracle_query():
    experiment = fixture_experiment()
    asked = llm_free_search.queries(experiment)
    facts = experiment.facts
    assert asked[:len(facts)] == [(direct_query(f), f.datatype) for f in facts]
    assert len(asked) == 2 * len(facts)  # every toy fact's gold is in the taxonomy
    assert all(datatype == "sharesItemType" for _, datatype in asked)


def test_the_three_scorers_are_timed_and_agree(monkeypatch):
    monkeypatch.setattr("fhs.run.inputs.load_experiment", lambda name, **kw: fixture_experiment(name))
    row = llm_free_search.time_dataset("toy", None, repeats=2)
    assert row["identical_rankings"] is True and row["queries"] == 12
    assert {"cpu_seconds_numpy", "cpu_seconds_compiled", "cpu_seconds_batched", "speedup_batched"} <= set(row)
