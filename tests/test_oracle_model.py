"""The oracle model: FHS's model stages answered from the gold, its noise, and where it may not be used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fhs.cli import main
from fhs.core.errors import InputError
from fhs.data.domain import load_domain
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.contract import Request
from fhs.method.hypotheses import UNRESOLVED
from fhs.llm.oracle import OracleNoise, oracle_for, query_text, value_text
from fhs.run.inputs import ModelChoice, load_experiment
from fhs.run.profiles import RunProfile
from fhs.run.spec import RunSpec

# Concepts whose profiles differ on FAMILY, QUALIFIER and TEMPORAL (fhs/data/domains/us-gaap.yaml)
CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold and services rendered.,monetaryItemType\n"
            "NetIncomeLoss,Net Income Loss,Profit or loss for the period net of tax.,monetaryItemType\n"
            "AccountsPayableCurrent,Accounts Payable Current,Amount of liabilities due within one year.,"
            "monetaryItemType\n"
            "InventoryNet,Inventory Net,Amount after valuation reserves of inventory held as of the balance "
            "sheet date.,monetaryItemType\n"
            "DebtInstrumentInterestRate,Debt Instrument Interest Rate,Contractual interest rate of the debt.,"
            "percentItemType\n")
FACTS = [
    {"id": "a1", "context_id": "t1", "modality": "table", "value": "10", "datatype": "monetaryItemType",
     "context": "Total revenues 10 9", "gold": ["Revenues"], "row_header": "Total revenues"},
    {"id": "a2", "context_id": "t1", "modality": "table", "value": "4", "datatype": "monetaryItemType",
     "context": "Cost of revenue 4 3", "gold": ["CostOfRevenue"], "row_header": "Cost of revenue"},
    {"id": "a3", "context_id": "s1", "modality": "text", "value": "2", "datatype": "monetaryItemType",
     "context": "We earned 2 million this year.", "gold": ["NetIncomeLoss"]},
    {"id": "a4", "context_id": "t2", "modality": "table", "value": "7", "datatype": "monetaryItemType",
     "context": "Payables 7 6", "gold": ["AccountsPayableCurrent"], "row_header": "Payables"},
    {"id": "a5", "context_id": "s2", "modality": "text", "value": "5.5", "datatype": "percentItemType",
     "context": "The notes bear 5.5 percent.", "gold": ["DebtInstrumentInterestRate"]},
]


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    (tmp_path / "facts.jsonl").write_text("".join(json.dumps(f) + "\n" for f in FACTS))
    (tmp_path / "concepts.csv").write_text(CONCEPTS)
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump({"name": "small", "facts": "facts.jsonl", "taxonomy": "concepts.csv",
                                    "domain": "us-gaap"}))
    return path


def oracle_run(spec_file: Path, out: Path, noise: str | None = None, **overrides):
    experiment = load_experiment(str(spec_file), progress=False)
    model = ModelChoice.resolve("paper", backend="oracle", oracle_noise=noise)
    spec = RunSpec(dataset=experiment.spec.name, method="fhs", model=model, overrides=overrides)
    outcome = spec.execute(experiment, experiment.facts, out_dir=out, progress=False)
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    return experiment, outcome.metrics, {r["id"]: r for r in records}


def test_the_oracle_answers_every_stage_from_the_gold(spec_file, tmp_path):
    experiment, metrics, records = oracle_run(spec_file, tmp_path / "run")
    domain = load_domain("us-gaap")
    assert metrics["n_facts"] == 5 and metrics["tokens_in"] == metrics["tokens_out"] == 0
    assert metrics["accuracy"] == 1.0  # the gold is always in the (short) list the selector is shown
    assert sum(metrics["parse_failures"].values()) == 0
    for fid, record in records.items():
        gold = experiment.taxonomy[record["gold"][0]]
        profile = dict(domain.profile_of(gold))
        for hypothesis in record["hypotheses"]:  # J = 2 identical perfect readings
            assert hypothesis["source"] == "model"
            assert hypothesis["retrieval_query"] == f"{gold.label} {gold.definition}" == query_text(gold)
            for name, value in hypothesis["dimensions"].items():
                expected = value_text(profile.get(name.lower(), ()))
                assert value == expected
            assert hypothesis["dimensions"]["ROLE"] == hypothesis["dimensions"]["EVENT"] == UNRESOLVED
        assert record["selected"] in record["gold"]
        window = record["verifier"]["window"]["ids"] if record["verifier"] else []
        for verdicts in (record["verifier"] or {}).get("verdicts", []):
            for cid, entry in verdicts["entries"].items():
                theirs = dict(domain.profile_of(experiment.taxonomy[cid]))
                for name, ruling in entry.items():
                    want, have = profile.get(name.lower(), ()), theirs.get(name.lower(), ())
                    assert ruling == ("abstain" if not want and not have else "support" if want == have
                                      else "contradict"), (fid, cid, name)
        if gold.id in window:  # the gold supports itself on every dimension it has
            assert record["verifier"]["vbar"][gold.id] == 1.0


def test_noise_is_seeded_nested_and_changes_the_run_folder(spec_file, tmp_path):
    _, _, clean = oracle_run(spec_file, tmp_path / "clean")
    _, _, some = oracle_run(spec_file, tmp_path / "some", "hypotheses=0.5")
    _, _, again = oracle_run(spec_file, tmp_path / "again", "hypotheses=0.5")
    _, _, every = oracle_run(spec_file, tmp_path / "every", "hypotheses=1")
    same = ("hypotheses", "rankings", "verifier", "ranking", "selected")
    assert [[r[k] for k in same] for r in some.values()] == [[r[k] for k in same] for r in again.values()]
    changed = {0.5: 0, 1.0: 0}
    for fid in clean:
        for j, h in enumerate(clean[fid]["hypotheses"]):
            for name, value in h["dimensions"].items():
                half = some[fid]["hypotheses"][j]["dimensions"][name]
                full = every[fid]["hypotheses"][j]["dimensions"][name]
                if half != value:  # what is corrupted at 0.5 is corrupted, the same way, at 1
                    assert full == half
                changed[0.5] += half != value
                changed[1.0] += full != value
            assert every[fid]["hypotheses"][j]["retrieval_query"] != h["retrieval_query"]
    # at P = 1 every value differs but ROLE and EVENT: US-GAAP profiles neither, so UNRESOLVED is all they take
    assert 0 < changed[0.5] < changed[1.0] == 5 * 2 * 4
    stamp = json.loads((tmp_path / "some" / "run-config.json").read_text())
    assert stamp["model"] == {"backend": "oracle", "model": "oracle", "structured": None,
                              "noise": "hypotheses=0.5,verdicts=0"}


def test_flipped_verdicts_flip_support_and_contradict_only(spec_file, tmp_path):
    _, _, clean = oracle_run(spec_file, tmp_path / "clean")
    _, _, flipped = oracle_run(spec_file, tmp_path / "flipped", "verdicts=1")
    opposite = {"support": "contradict", "contradict": "support", "abstain": "abstain"}
    for fid, record in clean.items():
        for mine, theirs in zip(record["verifier"]["verdicts"], flipped[fid]["verifier"]["verdicts"]):
            for cid, entry in mine["entries"].items():
                assert theirs["entries"][cid] == {k: opposite[v] for k, v in entry.items()}


def test_the_selector_keeps_the_method_top_when_the_gold_is_not_shown():
    taxonomy = Taxonomy.from_concepts("t", [Concept("A", "Alpha"), Concept("B", "Beta"), Concept("C", "Gamma")])
    from fhs.data.facts import Fact

    fact = Fact(id="f", context_id="c", modality="text", value="1", datatype="", context="x", gold=("C",))
    oracle = oracle_for([fact], taxonomy, load_domain("us-gaap"))
    shown = Request(messages=(), purpose="selector", fact_id="f", shown=("A", "C", "B"))
    hidden = Request(messages=(), purpose="selector", fact_id="f", shown=("B", "A"))
    assert [json.loads(r.text)["selected_index"] for r in oracle.complete([shown, hidden])] == [2, 1]
    with pytest.raises(InputError, match="only FHS's stages"):
        oracle.complete([Request(messages=(), purpose="rewrite", fact_id="f")])
    with pytest.raises(InputError, match="was not given fact"):
        oracle.complete([Request(messages=(), purpose="selector", fact_id="other")])


def test_the_oracle_is_never_a_profile_and_its_noise_is_checked():
    with pytest.raises(ValueError, match="never"):
        RunProfile(name="sneaky", backend="oracle", model="oracle", llm_facts=None, retrieval_facts=None)
    with pytest.raises(InputError, match="oracle backend only"):
        ModelChoice.resolve("paper", backend="openai", oracle_noise="hypotheses=0.1")
    assert OracleNoise.parse("verdicts=0.2,hypotheses=0.25") == OracleNoise(0.25, 0.2)
    assert str(OracleNoise.parse(None)) == "hypotheses=0,verdicts=0"
    for bad in ("hypotheses=2", "hypothesis=0.1", "verdicts=x", "verdicts="):
        with pytest.raises(InputError):
            OracleNoise.parse(bad)


def test_fhs_run_with_the_oracle_backend_on_a_spec_file(spec_file, tmp_path, capsys):
    out = tmp_path / "cli"
    assert main(["run", "--dataset", str(spec_file), "--method", "fhs", "--backend", "oracle",
                 "--oracle-noise", "hypotheses=0.25", "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr()
    metrics = json.loads(printed.out)
    assert metrics["n_facts"] == 5 and metrics["llm_calls"] > 0 and metrics["tokens_in"] == 0
    assert "all 5 facts" in printed.err and "profile paper" in printed.err
    assert main(["run", "--dataset", str(spec_file), "--method", "direct", "--oracle-noise", "hypotheses=0.25",
                 "--out", str(tmp_path / "d")]) == 2
    assert "asks no model" in capsys.readouterr().err


@pytest.mark.data
@pytest.mark.slow
def test_recall_at_1_falls_as_hypothesis_noise_rises_on_fincl(tmp_path):
    """The first 120 FinCL facts (whole contexts are not needed: no sample is drawn) at P = 0, 0.25, 0.5, 1."""
    experiment = load_experiment("fincl", progress=False, limit=120)
    recall = []
    for p in (0.0, 0.25, 0.5, 1.0):
        model = ModelChoice.resolve("paper", backend="oracle", oracle_noise=f"hypotheses={p}")
        spec = RunSpec(dataset="fincl", method="fhs", model=model, selector=False)
        recall.append(spec.execute(experiment, experiment.facts, out_dir=tmp_path / str(p),
                                   progress=False).metrics["recall@1"])
    assert recall == sorted(recall, reverse=True) and len(set(recall)) == 4, recall
    assert recall[-1] < 0.05  # hypotheses about random concepts almost never put the gold first


def test_what_a_request_is_about_leaves_its_cache_key_alone():
    """Served models answer from the prompt: naming the fact and the listed concepts changes no key."""
    from fhs.llm.contract import Message, cache_key

    bare = Request(messages=(Message("user", "judge these"),), purpose="verifier")
    about = Request(messages=bare.messages, purpose="verifier", fact_id="a1", shown=("Revenues", "CostOfRevenue"))
    assert cache_key("openai", "m", bare) == cache_key("openai", "m", about)


@pytest.mark.data
@pytest.mark.slow
def test_oracle_runs_split_between_processes_write_the_records_of_one(tmp_path, monkeypatch):
    """The oracle forks safely (pure Python, draws hashed from the request): FinCL's first 120 facts with
    noise, in one process and in two, give the same records in the same order."""
    from fhs.run import runner

    monkeypatch.setattr(runner, "FORK_MIN_FACTS", 50)
    forks = []
    forked = runner._forked
    monkeypatch.setattr(runner, "_forked", lambda *a: forks.append(a[2]) or forked(*a))
    experiment = load_experiment("fincl", progress=False, limit=120)
    model = ModelChoice.resolve("paper", backend="oracle", oracle_noise="hypotheses=0.25,verdicts=0.1")
    records = {}
    for processes in ("1", "2"):
        monkeypatch.setenv(runner.PROCESSES_ENV, processes)
        out = tmp_path / processes
        RunSpec(dataset="fincl", method="fhs", model=model).execute(experiment, experiment.facts, out_dir=out,
                                                                   progress=False)
        records[processes] = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
        for record in records[processes]:
            assert record.pop("wall_seconds") >= 0
    assert forks == [2]
    assert records["2"] == records["1"] and len(records["1"]) == 120


def test_the_by_id_selector_layout_from_the_command_line_gives_the_same_final_lists(spec_file, tmp_path, capsys):
    """The oracle answers with numbers into the list shown, so both layouts must map back to the same candidates."""
    ranked = {}
    for layout in ("ranked", "by-id"):
        out = tmp_path / layout
        assert main(["run", "--dataset", str(spec_file), "--method", "fhs", "--backend", "oracle",
                     "--oracle-noise", "hypotheses=0.5", "--selector-layout", layout, "--out", str(out),
                     "--quiet"]) == 0
        capsys.readouterr()
        assert json.loads((out / "run-config.json").read_text())["fhs"]["selector_layout"] == layout
        records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
        ranked[layout] = {r["id"]: (r["ranking"], r["selected"]) for r in records}
    assert ranked["ranked"] == ranked["by-id"] and len(ranked["by-id"]) == len(FACTS)
    # the selector moved a candidate up somewhere, so the numbers were mapped, not merely kept
    assert any(selected != ranking[0] for ranking, selected in ranked["by-id"].values())


def test_the_oracle_model_answers_the_stages_the_method_names():
    """The model sits below the method, so it spells the stages' purposes itself: they must stay the method's."""
    from fhs.llm import oracle
    from fhs.method import hypotheses, selector, verifier

    assert oracle.STAGES == (hypotheses.PURPOSE, verifier.PURPOSE, selector.PURPOSE)
    assert oracle.UNRESOLVED == hypotheses.UNRESOLVED
