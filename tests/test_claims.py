"""fhs.book.claims: the paper's claims, written beside their chapters, judged on recorded values.

The recorded values are the regression files' own (``expected: cpu``), so these tests judge the
claims exactly as the claims page does on a ``cpu`` build, without running a chapter.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from fhs.book import claims as K
from fhs.book.check import REGRESSIONS_DIR, load_regression
from fhs.book.claims_page import claims_frame, tally
from fhs.core.errors import InputError
from fhs.paper import PAPER_BENCHMARK, lookup


def recorded(profile: str = "cpu") -> dict[str, dict[str, float]]:
    """Every chapter's recorded values for ``profile``: what its saved results hold after a passing check."""
    return {path.stem: {name: e.value for name, e in load_regression(path.stem).expected_for(profile).items()}
            for path in sorted(REGRESSIONS_DIR.glob("*.yaml"))}


def by_id(verdicts: list[K.Verdict]) -> dict[str, K.Verdict]:
    return {v.claim.id: v for v in verdicts}


def test_every_claim_names_real_metrics_and_paper_figures():
    claims = K.load_claims()
    results = recorded()
    metrics: dict[str, set[str]] = {}  # each chapter's file read once, not once a reference
    for claim in K.expand(claims, results):
        for ref in claim.ours + ((claim.facts,) if claim.facts else ()):
            chapter, metric = K.split_ref(ref, claim.chapter)
            if chapter not in metrics:
                metrics[chapter] = set(load_regression(chapter).metrics)
            assert metric in metrics[chapter], (claim.id, ref)
        for ref in claim.paper:
            lookup(ref)  # raises if the paper's figure is not in fhs/paper.py


def test_the_cpu_build_judges_at_least_fifteen_of_the_papers_claims():
    verdicts = K.verdicts(recorded(), "cpu")
    papers = [v for v in verdicts if v.paper is not None]
    assert len(papers) >= 15
    assert all(v.standing in (K.HOLDS, K.FAILS, K.TOO_FEW, K.NEEDS) and v.detail for v in verdicts)
    judged = by_id(verdicts)
    # the readiness gap on every test fact holds; the LLM rows on two facts cannot be judged
    assert judged["readiness-gap/fincl"].standing == K.HOLDS and judged["readiness-gap/fincl"].facts == 500
    assert judged["head-fintagging-r1"].standing == K.TOO_FEW
    assert "facts would separate it" in judged["head-fintagging-r1"].detail
    # an LLM claim shows what chapter 9's perfect model reaches on the same metric
    assert set(judged["head-fintagging-r1"].ceilings) == {"pool", "verified"}
    frame = claims_frame(verdicts)
    assert len(frame) == len(verdicts) and list(frame.columns) == ["claim", "paper", "this build, 95% interval",
                                                                   "standing"]
    head = frame[frame.claim.str.startswith("On the financial benchmark FHS puts")].iloc[0]
    assert "perfect model (ch. 9): pool" in head["this build, 95% interval"] and head["paper"] == "+0.044"
    assert tally(verdicts).iloc[-1][K.HOLDS] == sum(v.standing == K.HOLDS for v in verdicts)


def test_changing_a_recorded_value_changes_the_standing():
    results = recorded()
    before = by_id(K.verdicts(results, "cpu"))["direct-head/fincl"]
    assert before.standing == K.HOLDS
    results["01_readiness_gap"]["fincl/direct/recall@1"] = 0.30  # far above the paper's Recall@1
    after = by_id(K.verdicts(results, "cpu"))["direct-head/fincl"]
    assert after.standing == K.FAILS and after.ours == pytest.approx(0.30)
    results["01_readiness_gap"]["fincl/oracle/recall@1"] = 0.10  # the probe now below direct retrieval
    gap = by_id(K.verdicts(results, "cpu"))["readiness-gap/fincl"]
    assert gap.standing == K.FAILS and "reversed by 0.200" in gap.detail


def test_more_facts_turn_too_few_into_a_judgement():
    results = recorded()
    results["02_main_results"].update({"fincl/facts": 3000, "fincl/fhs/recall@1": 0.20,
                                       "fincl/feedback-refine/recall@1": 0.10})
    assert by_id(K.verdicts(results, "cpu"))["head-fintagging-r1"].standing == K.HOLDS
    results["02_main_results"]["fincl/feedback-refine/recall@1"] = 0.20  # a tie, narrower than the paper's lead
    tied = by_id(K.verdicts(results, "cpu"))["head-fintagging-r1"]
    assert tied.standing == K.FAILS and "falls short of the paper's +0.044" in tied.detail


def test_a_metric_the_profile_does_not_measure_needs_the_paper_profile():
    results = recorded()
    del results["02_main_results"]["codiesp/structured/mrr"]
    judged = by_id(K.verdicts(results, "cpu"))["head-codiesp-mrr"]
    assert judged.standing == K.NEEDS and judged.ours is None and judged.paper is not None


def test_a_book_of_ones_own_data_shows_only_its_own_comparisons():
    results = {"01_readiness_gap": {"ghg/facts": 25, "ghg/direct/recall@1": 0.36, "ghg/oracle/recall@1": 1.0,
                                    "ghg/direct/mrr": 0.51, "ghg/oracle/recall@10": 1.0},
               "09_stage_ceilings": {"ghg/facts": 25, "ghg/direct/recall@1": 0.36, "ghg/pool/recall@1": 0.8,
                                     "ghg/verified/recall@1": 0.9, "ghg/hypotheses-0.25/recall@1": 0.7}}
    assert not K.paper_datasets(results)
    verdicts = K.verdicts(results, "smoke")
    assert {v.claim.id for v in verdicts} == {"readiness-gap/ghg", "ceiling-pool/ghg", "ceiling-verifier/ghg",
                                              "tolerates-model-error/ghg"}
    assert all(v.paper is None for v in verdicts)
    text = claims_frame(verdicts).to_string()
    assert not any(word in text for word in (*PAPER_BENCHMARK, "fintagging", "CodiEsp", "financial"))
    assert by_id(verdicts)["readiness-gap/ghg"].standing == K.HOLDS


def test_intervals_are_wilson_and_newcombe():
    low, high = K.wilson(0.0, 2)
    assert low == 0.0 and high == pytest.approx(0.6576, abs=1e-4)
    low, high = K.newcombe(0.5, 0.5, 100)
    assert low == pytest.approx(-high) and 0.13 < high < 0.14
    assert K.wilson(3.0, 10, (0, 6)) == pytest.approx(tuple(6 * x for x in K.wilson(0.5, 10)))


@pytest.mark.parametrize("entry, field", [
    ("- {id: x, claim: c, section: s, ours: a, colour: red}", "claims[0]"),
    ("- {id: x, claim: c, section: s, ours: a, kind: ratio}", "claims[0].kind"),
    ("- {id: x, claim: c, section: s, ours: [a, b, c]}", "claims[0].ours"),
    ("- {id: x, claim: c, section: s, ours: a, bounds: [1, 0]}", "claims[0].bounds"),
    ("- {id: x, section: s, ours: a}", "claims[0].claim"),
])
def test_a_malformed_claim_names_its_file_and_field(tmp_path: Path, entry: str, field: str):
    (tmp_path / "01_x.yaml").write_text("chapter: 01_x\nclaims:\n" + entry + "\nmetrics: {}\n")
    with pytest.raises(InputError) as error:
        K.load_claims(tmp_path)
    assert "01_x.yaml" in str(error.value) and field in str(error.value)


def test_recording_new_values_keeps_the_claims(tmp_path: Path):
    from fhs.book.check import record

    source = REGRESSIONS_DIR / "06_fhs_seq.yaml"
    (tmp_path / source.name).write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    before = K.load_claims(tmp_path)
    values = dict(recorded()["06_fhs_seq"])
    values["fincl/fhs-seq/all_rounds"] = 0.75
    record("06_fhs_seq", "cpu", values, directory=tmp_path)
    assert K.load_claims(tmp_path) == before and len(before) == 3
    assert load_regression("06_fhs_seq", tmp_path).expected_for("cpu")["fincl/fhs-seq/all_rounds"].value == 0.75
