"""Chapter 03's Table 6, Table 16, the new-calls tally and the check values, on seeded runs built in memory."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from book_records import call, fact, memory_run  # noqa: E402
from fhs.book.chapters import ablations as T6  # noqa: E402
from fhs.book.planned import ABLATION_VARIANTS  # noqa: E402
from fhs.paper import ABLATION  # noqa: E402
from fhs.run.tables.ablations import BetaChoice  # noqa: E402

INTERVAL = {"resamples": 50, "seed": 1}


def arm(ranks, *, selector=False, fresh=0):
    """One seeded run: facts a, b with these gold ranks; with the selector, a correct where it ranks first."""
    calls = [call("hypothesis")] * fresh + [call("verifier", cached=True)]
    return memory_run("fincl", "fhs", [fact(fid, rank, context=fid, correct=(rank == 1) if selector else None,
                                            calls=calls) for fid, rank in zip("ab", ranks)])


def arms(seeds=1):
    out = {"fhs": [arm([1, 3], selector=True, fresh=2) for _ in range(seeds)]}
    for key in ABLATION_VARIANTS:
        out[key] = [arm([2, 3], selector=key == "no_verifier") for _ in range(seeds)]
    out["hypothesis1"] = [arm([1, 5]) for _ in range(seeds)]
    return out


def test_table6_has_the_papers_rows_in_order_with_differences_from_fhs():
    rows = T6.table6(arms(), INTERVAL)
    assert [r["row"] for r in rows][:4] == [T6.LABELS["fhs"], T6.LABELS["no_verifier"], T6.LABELS["hypothesis0"],
                                            T6.LABELS["hypothesis1"]]
    fhs, no_verifier, h0 = rows[0], rows[1], rows[2]
    assert fhs["mrr"].value == pytest.approx((1 + 1 / 3) / 2) and "Δ mrr" not in fhs
    assert fhs["accuracy"].value == 0.5 and h0["accuracy"] is None  # no selector ran for a single-hypothesis row
    assert no_verifier["accuracy"].value == 0.0 and no_verifier["Δ recall@1"].value == -0.5
    single = rows[4]
    assert single["row"].startswith("− ensemble (J = 1") and single["recall@1"] == 0.25
    assert single["Δ recall@1"] == pytest.approx(-0.25)
    assert single["paper R@1"] == ABLATION["single_hypothesis"]["recall@1"]
    bound = rows[-1]
    assert bound["row"] == T6.LABELS["oracle_best_single"] and bound["recall@1"].value == 0.5
    assert bound["mrr"].value == pytest.approx((1 + 1 / 3) / 2)


def test_table6_on_a_dataset_the_paper_never_ran_carries_no_paper_column_or_benchmark_name():
    rows = T6.table6(arms(), INTERVAL, paper_values=False)
    assert not [key for row in rows for key in row if key.startswith("paper")]
    assert "FinTagging" not in T6.table6_caption("ghg-report", 1, paper_values=False)
    assert "FinTagging" in T6.table6_caption("fincl", 3, paper_values=True)


def test_several_seeded_runs_give_a_mean_with_its_std():
    rows = T6.table6(arms(seeds=2), INTERVAL)
    assert rows[0]["mrr"].std == 0.0 and rows[1]["Δ mrr"].std == 0.0 and rows[1]["Δ mrr"].low is None


def test_free_text_rows_join_after_fhs_when_their_arms_ran():
    with_free_text = {**arms(), "free_text": [arm([4, 4])], "free_text_verifier": [arm([2, 4])]}
    labels = [r["row"] for r in T6.table6(with_free_text, INTERVAL)]
    assert labels[1:3] == [T6.LABELS["free_text"], T6.LABELS["free_text_verifier"]]


def test_new_calls_table16_and_the_check_values():
    runs = arms()
    frame = T6.new_calls_frame(runs)
    assert frame.iloc[0]["row"] == "FHS" and frame.iloc[0]["hypothesis"] == 4 and frame.iloc[1]["hypothesis"] == 0
    cells = T6.table16(runs)
    assert [c["selector on (Acc.)"].value for c in cells] == [0.5, 0.0]
    chosen = BetaChoice(beta=0.05, sweep=({"beta": 0.0, "table_recall@10": 0.5, "mrr": 0.4},
                                          {"beta": 0.05, "table_recall@10": 1.0, "mrr": 0.6}),
                        basis="table facts", rule="rule")
    table12 = [{"beta": 0.05, "mrr": 0.7, "chosen_on": "development"}, {"beta": 0.6, "mrr": 0.4, "chosen_on": "paper"}]
    checked = T6.ablation_metrics("fincl", "ixbrl-dev", runs, cells, chosen, table12,
                                [{"arm": "factorized", "per_hypothesis_recall@200": 0.5, "overlap": 0.1,
                                  "pool_recall@200": 0.6, "consolidation_loss": 0.0},
                                 {"arm": "diverse", "per_hypothesis_recall@200": 0.4, "overlap": None,
                                  "pool_recall@200": 0.6, "consolidation_loss": 0.0}], [{"k_v": 5, "mrr": 0.3}])
    assert checked["fincl/facts"] == 2 and checked["fincl/fhs/new_calls"] == 4
    assert checked["fincl/mean_rrf/new_calls"] == 0
    assert checked["fincl/oracle_best_single/recall@1"] == 0.5 and checked["ixbrl-dev/table12/chosen_beta"] == 0.05
    assert checked["fincl/table12/chosen/mrr"] == 0.7 and checked["fincl/table12/paper_beta/mrr"] == 0.4
    assert checked["fincl/window/kv5/mrr"] == 0.3
    assert "ixbrl-dev/table11/diverse/overlap" not in checked  # no number to check when no fact had two hypotheses
    one_row = T6.ablation_metrics("fincl", "ixbrl-dev", runs, cells, chosen, table12[:1], [], [])
    assert one_row["fincl/table12/chosen/mrr"] == one_row["fincl/table12/paper_beta/mrr"] == 0.7  # one row: the chosen beta was 0.6
    assert checked["fincl/table16/verifier_off/accuracy"] == 0.0
    assert checked["ixbrl-dev/table11/factorized/overlap"] == 0.1
    assert len(T6.beta_figure(chosen, "ixbrl-dev").axes) == 2


def test_selector_accuracy_is_the_evaluate_modules_and_empty_without_the_selector():
    assert T6.selector_accuracy([fact("a", 3, correct=True), fact("b", 1, correct=False)]) == 0.5
    assert T6.selector_accuracy([fact("a", 1)]) is None and T6.selector_accuracy([]) is None
    # a refused fact is a miss (fhs.run.evaluate), whatever the others' basis
    assert T6.selector_accuracy([fact("a", 1, correct=True), fact("b", None, failed="refused")]) == 0.5
