"""Study: cached runs per profile, folders named by settings."""

from __future__ import annotations

import json

import pytest

from fhs.book.study import Study
from fhs.method.config import FHSConfig
from fhs.run.inputs import ModelChoice

pytestmark = pytest.mark.data


class SameAnswer:
    name = "same-answer"

    def complete(self, requests):
        from fhs.llm.contract import Response

        replies = {"hypothesis": json.dumps({"dimensions": {"FAMILY": "Revenue"}, "operators": [],
                                             "retrieval_query": "revenue from contracts"}),
                   "verifier": '{"verdicts": []}', "selector": '{"selected_index": 2}'}
        return [Response(text=replies[r.purpose], tokens_in=3, tokens_out=2, seconds=0.5) for r in requests]


def test_runs_are_cached_and_settings_pick_the_folder(tmp_path):
    study = Study.for_profile("smoke", tmp_path, progress=False)
    facts = study.experiment("fincl").facts[:4]
    first = study.run("fincl", "direct", facts=facts)
    again = study.run("fincl", "direct", facts=facts)
    assert again.metrics["n_new"] == 0 and again.records == first.records
    assert study.run("fincl", "direct", w_cov=0.0, facts=facts).path.name == "direct-wcov0"

    model = ModelChoice.resolve("smoke", cache=tmp_path / "responses.sqlite")
    model._llm = SameAnswer()
    fhs_run = study.run_llm("fincl", "fhs", model, facts=facts)
    assert fhs_run.path.name.startswith("fhs-seed0-") and len(fhs_run.records) == 4
    assert all(r["selected"] == r["ranking"][1] for r in fhs_run.records)  # the selector's choice, index 2
    other = study.run_llm("fincl", "fhs", model, facts=facts, config=FHSConfig.fhs(beta=0.2))
    assert other.path != fhs_run.path and other.metrics["n_new"] == 4
    assert study.run_llm("fincl", "fhs", model, facts=facts).metrics["n_new"] == 0


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

    monkeypatch.setattr(dense_module, "make_encoder", lambda model: HashedWords())
    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))
    study = Study.for_profile("smoke", tmp_path, progress=False)
    facts = study.experiment("fincl").facts[:3]
    bm25 = study.run("fincl", "direct", facts=facts)
    dense = study.run("fincl", "direct", facts=facts, retriever="dense")
    hybrid = study.run("fincl", "direct", facts=facts, retriever="hybrid", w_cov=1.0)
    assert (bm25.path.name, dense.path.name, hybrid.path.name) == ("direct", "direct-dense", "direct-hybrid-wcov1")
    stamp = json.loads((dense.path / "run-config.json").read_text())
    assert stamp["retriever"]["kind"] == "dense" and stamp["retriever"]["model"] == "minilm-int8"
    assert stamp["retrieval"]["w_cov"] == 0.0
    assert "retriever" not in json.loads((bm25.path / "run-config.json").read_text())

    model = ModelChoice.resolve("smoke", cache=tmp_path / "responses.sqlite")
    model._llm = SameAnswer()
    first = study.run_llm("fincl", "structured", model, facts=facts)
    swapped = study.run_llm("fincl", "structured", model, facts=facts, retriever="dense")
    assert swapped.path.name.startswith("structured-dense-seed0-") and swapped.path != first.path
    assert len(swapped.records) == 3
    assert [r["hypotheses"] for r in swapped.records] == [r["hypotheses"] for r in first.records]
