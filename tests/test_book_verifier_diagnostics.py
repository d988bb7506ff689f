"""Chapter 04's tables from FHS records built in memory: Table 15's frames, the abstain re-scoring, the arms."""

import pytest

from book_records import DIMS, memory_run, verified
from fhs.book.chapters import verifier_diagnostics as V
from fhs.book.fact_view import verifier_example, window_with_and_without
from fhs.paper import VERIFIER
from fhs.run.tables.verdict_stats import panel_a, window_stats

INTERVAL = {"resamples": 50, "seed": 1}
ABSTAIN = dict.fromkeys(DIMS, "abstain")


def abstaining():
    """The gold is supported on FAMILY only, its rival contradicted there: the conventions disagree on the gold."""
    verdicts = [{"g": {**ABSTAIN, "FAMILY": "support"}, "x": {**ABSTAIN, "FAMILY": "contradict"}}]
    return verified("a", ["x", "g"], verdicts, scores=[1.0, 0.8])


def test_abstain_rows_rescore_each_convention_and_difference_it_from_the_papers():
    seeded = {"fincl": [memory_run("fincl", "fhs", [abstaining()])]}
    rows = {row["scoring"]: row for row in V.abstain_rows(seeded, {"fincl": DIMS}, INTERVAL)}
    # paper and code: v̄(gold) = 1 lifts it over the rival (0.8 + 0.6 > 1.0); strict: 1/6, it stays second
    assert rows["paper"]["mrr"].value == 1.0 and rows["code"]["mrr"].value == 1.0
    assert rows["strict"]["mrr"].value == 0.5 and rows["strict"]["Δ MRR vs paper"].value == -0.5
    assert "Δ MRR vs paper" not in rows["paper"] and rows["paper"]["mrr"].std is None


def test_panel_and_window_frames_lay_out_the_verdict_statistics_with_the_papers_row():
    records = [abstaining()]
    frame = V.panel_frame({"fincl": panel_a(records, DIMS)})
    assert list(frame.group) == ["gold", "non-gold"] and list(frame.dataset) == ["fincl", "fincl"]
    window = V.window_frame({"fincl": window_stats(records)})
    assert window.iloc[-1]["calls"] == VERIFIER["calls"] and window.iloc[0]["gold_in_window"] == 1.0
    own = V.window_frame({"ghg-report": window_stats(records)})  # an adapter's dataset: no paper row beside it
    assert list(own.dataset) == ["ghg-report"]


def test_arms_and_check_values_average_the_seeded_runs():
    fhs = [memory_run("codiesp", "fhs", [abstaining()]) for _ in range(2)]
    arm = [memory_run("codiesp", "fhs", [verified("a", ["x", "g"], [{}])])]
    arm[0].metrics["accuracy"] = None  # a run whose accuracy is undefined leaves its row's Acc. empty
    rows = V.arms_frame(fhs, arm)
    assert rows[0]["mrr"].value == 0.5 and rows[0]["mrr"].std == 0.0 and rows[0]["accuracy"].value == 0.0
    assert rows[1]["accuracy"] is None
    stats = {"codiesp": window_stats(fhs[0].records)}
    checked = V.verifier_metrics(stats, {"codiesp": panel_a(fhs[0].records, DIMS)},
                               {"codiesp": {"correct hypothesis": {"all": 0.25}}}, [], rows + rows)
    assert checked["codiesp/no_verifier/mrr"] == 0.5 and "codiesp/no_verifier/accuracy" not in checked
    assert checked["codiesp/verifier/calls"] == 1 and checked["codiesp/panel_b/correct/support"] == 0.25
    assert checked["codiesp/panel_a/gold/support"] == 1.0


def test_the_verifier_example_and_its_window_beside_the_arm_without_it():
    inside = abstaining()
    elsewhere = verified("b", ["x", "y"], [{}], pool=["x", "y", "g"])
    example = verifier_example([elsewhere, inside])
    assert example["id"] == "a"
    arm = {**inside, "ranking": ["g", "x"]}
    frame = window_with_and_without(example, arm).set_index("candidate")
    assert frame.loc["g", "fused rank"] == 2 and frame.loc["g", "rank − verifier arm"] == 1
    assert frame.loc["x", "gold"] == "" and frame.loc["g", "v̄"] == pytest.approx(0.5)
