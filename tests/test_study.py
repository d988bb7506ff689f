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
