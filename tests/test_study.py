"""Study: cached runs per profile, folders named by settings, one stamp with ``fhs run``."""

from __future__ import annotations

import json
import re

import pytest

from fhs.book.study import Study
from fhs.cli import main
from fhs.method.config import FHSConfig
from fhs.run.inputs import ModelChoice
from fhs.run.spec import STAMP_VERSION

pytestmark = pytest.mark.data
DIGEST = "[0-9a-f]{8}"


class SameAnswer:
    name = "same-answer"

    def complete(self, requests):
        from fhs.llm.contract import Response

        replies = {"hypothesis": json.dumps({"dimensions": {"FAMILY": "Revenue"}, "operators": [],
                                             "retrieval_query": "revenue from contracts"}),
                   "verifier": '{"verdicts": []}', "selector": '{"selected_index": 2}'}
        return [Response(text=replies[r.purpose], tokens_in=3, tokens_out=2, seconds=0.5) for r in requests]


@pytest.mark.model
def test_runs_are_cached_and_settings_pick_the_folder(tmp_path):
    study = Study.for_profile("smoke", tmp_path, progress=False)
    facts = study.experiment("fincl").facts[:4]
    first = study.run("fincl", "direct", facts=facts)
    again = study.run("fincl", "direct", facts=facts)
    assert again.metrics["n_new"] == 0 and again.records == first.records
    assert [r["id"] for r in first.records] == [f.id for f in facts]  # in fact order
    assert re.fullmatch(f"direct-{DIGEST}", first.path.name)
    assert re.fullmatch(f"direct-wcov0-{DIGEST}", study.run("fincl", "direct", w_cov=0.0, facts=facts).path.name)

    model = ModelChoice.resolve("smoke", cache=tmp_path / "responses.sqlite")
    model._llm = SameAnswer()
    fhs_run = study.run_llm("fincl", "fhs", model, facts=facts)
    assert fhs_run.path.name.startswith("fhs-seed0-") and len(fhs_run.records) == 4
    assert all(r["selected"] == r["ranking"][1] for r in fhs_run.records)  # the selector's choice, index 2
    other = study.run_llm("fincl", "fhs", model, facts=facts, config=FHSConfig.fhs(beta=0.2))
    assert other.path != fhs_run.path and other.metrics["n_new"] == 4
    assert study.run_llm("fincl", "fhs", model, facts=facts).metrics["n_new"] == 0


@pytest.mark.model
def test_a_retriever_swap_gets_its_own_folder_and_stamp(tmp_path, monkeypatch):
    """Dense/hybrid runs (Table 17) name their folder and record the model; BM25 runs keep theirs."""
    import numpy as np

    import fhs.retrieval.dense as dense_module

    class HashedWords:  # a stand-in encoder: words hashed into 64 dimensions
        key = "hashed-words"

        def encode(self, texts, *, batch_size=32, progress=None, documents=False):
            rows = np.zeros((len(texts), 64), dtype=np.float32)
            for i, text in enumerate(texts):
                for word in text.lower().split():
                    rows[i, sum(map(ord, word)) % 64] += 1
            return rows / np.maximum(np.linalg.norm(rows, axis=1, keepdims=True), 1e-9)

    monkeypatch.setattr(dense_module, "make_encoder", lambda model, **options: HashedWords())
    monkeypatch.setattr(dense_module, "make_exact_encoder", lambda model: HashedWords())  # LLM runs rank exactly
    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))
    study = Study.for_profile("smoke", tmp_path, progress=False)
    facts = study.experiment("fincl").facts[:3]
    bm25 = study.run("fincl", "direct", facts=facts)
    dense = study.run("fincl", "direct", facts=facts, retriever="dense")
    hybrid = study.run("fincl", "direct", facts=facts, retriever="hybrid", w_cov=1.0)
    names = [run.path.name.rsplit("-", 1)[0] for run in (bm25, dense, hybrid)]
    assert names == ["direct", "direct-dense", "direct-hybrid-wcov1"]
    stamp = json.loads((dense.path / "run-config.json").read_text())
    assert stamp["retriever"]["kind"] == "dense" and stamp["retriever"]["model"] == "minilm-int8"
    assert stamp["retrieval"]["w_cov"] == 0.0
    assert json.loads((bm25.path / "run-config.json").read_text())["retriever"] == {"kind": "bm25"}

    model = ModelChoice.resolve("smoke", cache=tmp_path / "responses.sqlite")
    model._llm = SameAnswer()
    first = study.run_llm("fincl", "structured", model, facts=facts)
    swapped = study.run_llm("fincl", "structured", model, facts=facts, retriever="dense")
    assert swapped.path.name.startswith("structured-dense-seed0-") and swapped.path != first.path
    assert len(swapped.records) == 3
    assert [r["hypotheses"] for r in swapped.records] == [r["hypotheses"] for r in first.records]


@pytest.mark.model
def test_fhs_run_and_a_study_write_the_same_stamp(tmp_path, capsys):
    """One RunSpec behind both: the same run from the command line and from a chapter has one stamp."""
    study = Study.for_profile("smoke", tmp_path / "runs", progress=False)
    facts = study.experiment("fincl").facts[:3]
    run = study.run("fincl", "direct", facts=facts)
    assert main(["run", "--dataset", "fincl", "--method", "direct", "--limit", "3", "--quiet",
                 "--out", str(tmp_path / "cli")]) == 0
    capsys.readouterr()
    stamp = json.loads((run.path / "run-config.json").read_text())
    assert json.loads((tmp_path / "cli" / "run-config.json").read_text()) == stamp
    assert stamp["stamp"] == STAMP_VERSION and stamp["model"] is None and stamp["fhs"] is None
    assert set(stamp["inputs"]) == {"facts", "taxonomy"}
    assert json.loads((run.path / "metrics.json").read_text())["config"] == stamp

    model = ModelChoice.resolve("smoke", cache=tmp_path / "responses.sqlite")
    model._llm = SameAnswer()
    llm_run = study.run_llm("fincl", "fhs", model, facts=facts)
    llm_stamp = json.loads((llm_run.path / "run-config.json").read_text())
    assert set(llm_stamp) == set(stamp)  # one schema
    assert llm_stamp["model"] == {"backend": "llama_cpp", "model": "smollm2-135m", "structured": None}
    assert llm_stamp["seed"] == 0 and llm_stamp["fhs_configuration"] == "paper" and llm_stamp["fhs"]["selector"]
    assert {"domain", "prompts", "model"} <= set(llm_stamp["inputs"])


def test_summaries_are_small_and_records_are_read_lazily(tmp_path):
    study = Study.for_profile("smoke", tmp_path, progress=False)
    facts = study.experiment("fincl").facts[:5]
    run = study.run("fincl", "direct", facts=facts)
    assert [s["id"] for s in run.summaries] == [f.id for f in facts]
    assert "ranking" not in run.summaries[0] and {"rank", "context_id", "modality", "gold"} <= set(run.summaries[0])
    assert run.interval("mrr").estimate == pytest.approx(run.metrics["mrr"])
    ranks = list(run.iter_records(fields=["id", "rank", "ranking"]))
    assert [set(r) for r in ranks] == [{"id", "rank", "ranking"}] * 5
    assert [r["rank"] for r in ranks] == [s["rank"] for s in run.summaries]


@pytest.mark.model
def test_run_all_executes_a_manifest_together_with_the_records_of_one_run_at_a_time(tmp_path):
    facts = None
    runs = {}
    for workers in (1, 4):
        study = Study.for_profile("smoke", tmp_path / f"w{workers}", progress=False)
        facts = facts or study.experiment("fincl").facts[:6]
        model = ModelChoice.resolve("smoke", cache=tmp_path / f"w{workers}" / "responses.sqlite")
        model._llm = SameAnswer()
        specs = [study.spec("fincl", method, model) for method in ("structured", "fhs", "direct")]
        specs.append(study.spec("fincl", "fhs", model, config=model.profile.fhs_config(beta=0.0), tag="beta0"))
        runs[workers] = study.run_all(specs, {"fincl": facts}, workers=workers)
    for one, four in zip(runs[1], runs[4]):
        assert one.path.name == four.path.name
        strip = [{k: v for k, v in r.items() if k != "wall_seconds"} for r in one.records]
        assert strip == [{k: v for k, v in r.items() if k != "wall_seconds"} for r in four.records]
        assert one.summaries == [{**s, "offset": o["offset"]} for s, o in zip(four.summaries, one.summaries)]
    assert runs[1][3].path.name.startswith("fhs-beta0-seed0-")
    assert [run.metrics["n_facts"] for run in runs[4]] == [6, 6, 6, 6]


@pytest.mark.model
def test_smollm2_manifest_run_together_sends_what_one_run_at_a_time_asks(tmp_path):
    """SmolLM2 through llama.cpp: structured, its selector-off variant and direct with the selector,
    two facts in flight at once. Run again one run at a time against the same cache, every call is a
    cache hit and every fact ends the same: the concurrent schedule asked what a sequential one asks.
    (Unparsed answers are replayed too, so a reply SmolLM2 garbled is not asked again by design.)"""
    cache = tmp_path / "responses.sqlite"
    outcomes = {}
    for name, workers in (("together", 2), ("one-by-one", 1)):
        study = Study.for_profile("smoke", tmp_path / name, progress=False)
        facts = study.experiment("fincl").facts[:2]
        model = ModelChoice.resolve("smoke", cache=cache, replay_unparsed=True)
        specs = [study.spec("fincl", "structured", model),
                 study.spec("fincl", "structured", model, config=model.profile.fhs_config(selector=False),
                            tag="no-selector"),
                 study.spec("fincl", "direct", model)]
        if workers == 2:
            outcomes[name] = study.run_all(specs, {"fincl": facts}, workers=2)
        else:
            outcomes[name] = [study.run_all([spec], {"fincl": facts}, workers=1)[0] for spec in specs]
    together, alone = outcomes["together"], outcomes["one-by-one"]
    assert together[0].metrics["llm_calls"] > 0 and together[1].metrics["llm_calls"] == 0  # the variant replays
    for run_together, run_alone in zip(together, alone):
        assert run_together.path.name == run_alone.path.name
        assert run_alone.metrics["llm_calls"] == 0  # every request was already answered by the concurrent run
        for a, b in zip(run_together.records, run_alone.records):
            assert (a["ranking"], a.get("selected"), a.get("hypotheses")) == \
                (b["ranking"], b.get("selected"), b.get("hypotheses"))
        keys = ("recall@1", "recall@10", "mrr", "accuracy", "n_facts")
        assert {k: run_together.metrics[k] for k in keys} == {k: run_alone.metrics[k] for k in keys}
