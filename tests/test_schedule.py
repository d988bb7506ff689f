"""Many runs at once: the same records and metrics at any number of facts in flight.

A chapter's manifest (methods, variants that replay FHS's hypotheses and
verdicts, seeds) runs fact-major through ``fhs.run.spec.run_all``; here it runs
at 1 and at 64 facts in flight, against the simulated model and against the
scripted one, and everything but wall-clock timings must come out the same.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from fhs.data.datasets import DatasetSpec
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import cache_key
from fhs.llm.tokens import CharEstimate
from fhs.run.ledger import SqliteLedger
from fhs.plan.simulated import SimulatedBackend
from fhs.retrieval.bm25 import RetrievalConfig, Retriever
from fhs.run.inputs import Experiment, ModelChoice
from fhs.run.records import read_records
from fhs.run.spec import RunSpec, run_all
from scripted_llm import ScriptedLLM

CONCEPTS = [
    ("Revenues", "Revenues", "Amount of revenue recognized from goods sold and services rendered."),
    ("CostOfRevenue", "Cost Of Revenue", "Cost of goods and services sold."),
    ("OperatingExpenses", "Operating Expenses", "Generally recurring costs of operations."),
    ("NetIncomeLoss", "Net Income Loss", "Profit or loss after taxes attributable to the parent."),
    ("GrossProfit", "Gross Profit", "Revenue less cost of goods and services sold."),
    ("ResearchAndDevelopmentExpense", "Research And Development Expense", "Costs of research and development."),
    ("IncomeTaxExpenseBenefit", "Income Tax Expense Benefit", "Current and deferred income tax expense."),
    ("InterestExpense", "Interest Expense", "Cost of borrowed funds accounted for as interest."),
]
TAXONOMY = Taxonomy.from_concepts("tiny", [Concept(i, label, text, "monetaryItemType") for i, label, text in CONCEPTS])
ROWS = ["Total revenues", "Cost of revenue", "Operating expenses", "Net income", "Gross profit",
        "Research and development", "Income tax expense", "Interest expense"]
FACTS = [Fact(id=f"f{i:02d}", context_id=f"c{i % 6}", modality="table" if i % 3 else "text",
              value=f"{100 + 7 * i:,}", datatype="monetaryItemType",
              context=f"{ROWS[i % 8]} were {100 + 7 * i} million in fiscal {2020 + i % 4}; "
                      f"{ROWS[(i + 3) % 8].lower()} rose.",
              gold=(CONCEPTS[i % 8][0],), row_header=ROWS[i % 8] if i % 3 else None,
              sentence=None if i % 3 else f"{ROWS[i % 8]} were {100 + 7 * i} million.")
         for i in range(24)]
TIMINGS = ("wall_seconds",)


class InFlight:
    """A backend wrapper that takes ``seconds`` a call and counts the calls in flight at once."""

    def __init__(self, inner, seconds: float = 0.002) -> None:
        self.inner, self.seconds = inner, seconds
        self.kind, self.model = "simulated", "simulated"
        self.now = self.peak = self.calls = 0
        self._lock = threading.Lock()

    def complete(self, requests):
        with self._lock:
            self.now += 1
            self.calls += len(requests)
            self.peak = max(self.peak, self.now)
        try:
            time.sleep(self.seconds)
            return self.inner.complete(requests)
        finally:
            with self._lock:
                self.now -= 1


def manifest(model: ModelChoice) -> list[RunSpec]:
    """A chapter's runs, in its order: FHS-Seq, FHS, its re-scoring variants, baselines, a second seed."""
    spec = RunSpec(dataset="tiny", method="fhs", model=model)
    return [
        RunSpec(dataset="tiny", method="fhs-seq", model=model),
        spec,
        RunSpec(dataset="tiny", method="fhs", model=model, overrides={"beta": 0.0}, tag="no-verifier"),
        RunSpec(dataset="tiny", method="fhs", model=model, overrides={"fusion": "mean"}, selector=False,
                tag="mean-rrf"),
        RunSpec(dataset="tiny", method="fhs", model=model, overrides={"only_hypothesis": 0}, selector=False,
                tag="hypothesis0"),
        RunSpec(dataset="tiny", method="structured", model=model),
        RunSpec(dataset="tiny", method="parallel", model=model),
        RunSpec(dataset="tiny", method="self-refine", model=model),
        RunSpec(dataset="tiny", method="direct", model=model, selector=True),
        RunSpec(dataset="tiny", method="fhs", model=model, seed=1),
    ]


def experiment() -> Experiment:
    spec = DatasetSpec("tiny", "", "", "tiny", "the scheduling fixture", domain="us-gaap")
    return Experiment(spec=spec, taxonomy=TAXONOMY, facts=list(FACTS), retriever=Retriever(TAXONOMY, RetrievalConfig()))


def execute(tmp_path, name: str, backend, specs_of, workers: int):
    """Run the manifest with a fresh cache and ledger; (records by run folder name, metrics by folder name)."""
    model = ModelChoice.resolve("smoke", cache=tmp_path / name / "responses.sqlite")
    model._llm = CachedLLM(backend, ResponseCache(tmp_path / name / "responses.sqlite"))
    model._ledger = SqliteLedger(tmp_path / name / "verdicts.sqlite")
    exp = experiment()
    outcomes = run_all([(spec, exp, exp.facts) for spec in specs_of(model)], root=tmp_path / name / "runs",
                       workers=workers, progress=False)
    records, metrics = {}, {}
    for outcome in outcomes:
        key = outcome.path.name
        records[key] = {r["id"]: {k: v for k, v in r.items() if k not in TIMINGS}
                        for r in read_records(outcome.path / "records.jsonl")}
        metrics[key] = {k: v for k, v in outcome.metrics.items() if k not in TIMINGS}
        assert [s["id"] for s in outcome.summaries] == [f.id for f in FACTS]  # fact order, whatever finished first
    return records, metrics


@pytest.mark.model
def test_the_simulated_model_gives_the_same_records_and_metrics_at_1_and_64_in_flight(tmp_path):
    one = InFlight(SimulatedBackend(counter=CharEstimate()))
    many = InFlight(SimulatedBackend(counter=CharEstimate()))
    records_1, metrics_1 = execute(tmp_path, "one", one, manifest, workers=1)
    records_64, metrics_64 = execute(tmp_path, "many", many, manifest, workers=64)
    assert one.peak == 1 and many.peak > 4  # the facts of several runs really were in flight together
    assert one.calls == many.calls  # and no request was asked twice
    assert list(records_1) == list(records_64)  # folder names: the same settings and inputs
    for name in records_1:
        assert records_1[name] == records_64[name], name
        assert metrics_1[name] == metrics_64[name], name
    # the variants replayed FHS's hypotheses and verdicts in both: no new verifier call
    no_verifier = next(name for name in metrics_1 if "no-verifier" in name)
    assert metrics_1[no_verifier]["stages"].get("verifier", {"calls": 0})["calls"] == 0
    mean_rrf = next(name for name in metrics_1 if "mean-rrf" in name)
    assert all(call["cached"] for record in records_1[mean_rrf].values() for call in record["llm_calls"]
               if call["purpose"] == "hypothesis")


HYPOTHESIS = json.dumps({"dimensions": {"FAMILY": "Revenue", "ROLE": "Revenues", "EVENT": "UNRESOLVED",
                                        "QUALIFIER": "UNRESOLVED", "SCOPE": "UNRESOLVED", "TEMPORAL": "UNRESOLVED"},
                         "operators": ["direct_label"], "retrieval_query": "Total revenue recognized"})


def scripted_manifest(model: ModelChoice) -> list[RunSpec]:
    return [spec for spec in manifest(model) if spec.method in ("fhs", "structured", "direct")]


def scripted() -> ScriptedLLM:
    llm = ScriptedLLM({"hypothesis": [HYPOTHESIS] * 2000, "verifier": ['{"verdicts": []}'] * 2000,
                       "selector": ['{"selected_index": 2, "ranked_indices": [2, 1]}'] * 2000})
    llm.kind, llm.model = "scripted", "scripted"
    return llm


@pytest.mark.model
def test_the_scripted_model_is_asked_the_same_requests_at_1_and_64_in_flight(tmp_path):
    one, many = scripted(), scripted()
    records_1, metrics_1 = execute(tmp_path, "one", InFlight(one), scripted_manifest, workers=1)
    records_64, metrics_64 = execute(tmp_path, "many", InFlight(many), scripted_manifest, workers=64)
    assert records_1 == records_64 and metrics_1 == metrics_64

    def asked(llm):
        return sorted(cache_key("scripted", "scripted", r) for r in llm.requests)

    assert asked(one) == asked(many) and len(one.requests) > len(FACTS)


@pytest.mark.model
@pytest.mark.parametrize("workers", [1, 8])
def test_a_run_listed_twice_runs_once(tmp_path, workers):
    model = ModelChoice.resolve("smoke", cache=tmp_path / "responses.sqlite")
    model._llm = CachedLLM(SimulatedBackend(counter=CharEstimate()), ResponseCache(tmp_path / "responses.sqlite"))
    exp = experiment()
    spec = RunSpec(dataset="tiny", method="structured", model=model)
    first, second = run_all([(spec, exp, exp.facts[:4]), (spec, exp, exp.facts[:4])], root=tmp_path / "runs",
                            workers=workers, progress=False)
    assert first is second and first.metrics["n_new"] == 4
