"""Chapter 02's tables, costs, verdict shares and check values, on runs built from records in memory."""

import pytest
from book_records import DIMS, call, fact, memory_run, verified

from fhs.book.chapters import main_results as M
from fhs.book.costs import calls_per_fact, purpose_costs
from fhs.book.fact_view import fact_tables, rank_line, telling_fact, verdict_string
from fhs.run.summary import new_calls

INTERVAL = {"resamples": 50, "seed": 1}


def two_methods():
    direct = [fact("a", 3, correct=False, calls=[call("selector")]), fact("b", 1, context="c2", correct=True,
                                                                         calls=[call("selector", cached=True)])]
    fhs = [fact("a", 1, correct=True, calls=[call("hypothesis"), call("verifier", cached=True), call("selector")]),
           fact("b", None, context="c2", modality="text", correct=False, calls=[call("hypothesis", seconds=1.5)])]
    results = {("fincl", "direct"): [memory_run("fincl", "direct", direct)],
               ("fincl", "fhs"): [memory_run("fincl", "fhs", fhs)]}
    oracle = {"fincl": memory_run("fincl", "oracle", [fact("a", 1), fact("b", 2, context="c2")])}
    return results, oracle


def test_main_rows_follow_the_paper_order_and_keep_registered_methods_only():
    assert M.main_methods({"fhs": 1, "direct": 1, "mine": 1}) == ["direct", "fhs"]


def test_the_methods_parameter_keeps_a_subset_in_the_paper_order_and_says_so():
    registered = {"fhs": 1, "direct": 1, "parallel": 1, "mine": 1}
    assert M.main_methods(registered, None) == ["direct", "parallel", "fhs"]  # the default: every row
    assert M.main_methods(registered, ["fhs", "direct", "fhs"]) == ["direct", "fhs"]
    assert M.main_methods(registered, "fhs") == ["fhs"]  # `-p methods=fhs` reads as one name
    assert M.rows_line(["direct", "parallel", "fhs"], registered) == "This build runs all 3 rows."
    line = M.rows_line(["direct", "fhs"], registered)
    assert "2 of the 3 rows" in line and "`methods`" in line and "direct, fhs" in line
    assert M.rows_left_out(["fincl", "my.yaml"], ["direct", "fhs"], registered) == ["fincl/parallel",
                                                                                     "my.yaml/parallel"]
    assert M.rows_left_out(["fincl"], ["direct", "parallel", "fhs"], registered) == []


@pytest.mark.parametrize("chosen", [["fhs", "nope"], ["fhs", "mine"]])  # "mine" is registered but no row
def test_an_unknown_method_is_one_line_naming_the_parameter_and_the_rows(chosen):
    from fhs.core.errors import InputError

    with pytest.raises(InputError) as error:
        M.main_methods({"fhs": 1, "direct": 1, "mine": 1}, chosen)
    message = str(error.value)
    assert "\n" not in message and "'methods'" in message and repr(chosen[1]) in message
    assert "direct, fhs" in message  # the known rows, in the paper's order


def test_a_subset_without_fhs_is_refused_naming_the_parameter():
    from fhs.core.errors import InputError

    with pytest.raises(InputError, match="'methods'.*fhs"):
        M.main_methods({"fhs": 1, "direct": 1}, ["direct"])


def test_cost_table_splits_the_selectors_calls_from_the_methods_own():
    results, _ = two_methods()
    cost = M.cost_table(results, ["fincl"], ["direct", "fhs"]).set_index("method")
    assert cost.loc["fhs", "calls / fact"] == 1.5 and cost.loc["fhs", "selector calls / fact"] == 0.5
    assert cost.loc["fhs", "cached share"] == pytest.approx(1 / 3)
    assert cost.loc["fhs", "model s / fact"] == pytest.approx((0.5 + 0.5 + 1.5) / 2)
    assert cost.loc["direct", "calls / fact"] == 0 and cost.loc["direct", "selector calls / fact"] == 1.0
    assert cost.loc["direct", "calls (paper)"] == 0


def test_check_values_name_every_method_metric_and_the_calls_with_the_selector():
    results, oracle = two_methods()
    cost = M.cost_table(results, ["fincl"], ["direct", "fhs"])
    checked = M.main_results_metrics(results, oracle, {"fincl": 2}, ["direct", "fhs"], cost, {"llm": 0.5}, INTERVAL)
    assert checked["fincl/facts"] == 2 and checked["fincl/fhs/calls_per_fact"] == 2.0
    assert checked["fincl/direct/recall@1"] == 0.5 and checked["fincl/oracle/mrr"] == 0.75
    assert "fincl/oracle/accuracy" not in checked and checked["codiesp/relocation/llm"] == 0.5


def test_contrasts_and_modality_rows_are_paired_per_fact():
    results, _ = two_methods()
    contrasts = M.contrasts_table(results, ["fincl"], ["direct"], INTERVAL)
    assert contrasts.iloc[0]["contrast"] == "fhs - direct" and contrasts.iloc[0]["mrr"].value == pytest.approx(
        (1 + 0) / 2 - (1 / 3 + 1) / 2)
    split = M.modality_table(results, ["fincl"], ["fhs"])
    assert sorted(split.modality) == ["table", "text"]
    assert M.modality_contrasts(results, ["fincl"], ["direct", "fhs"], INTERVAL) == []


def test_verdict_shares_pool_every_dimension_of_every_judged_pair():
    support = dict.fromkeys(DIMS, "support")
    mixed = {**dict.fromkeys(DIMS, "abstain"), "FAMILY": "contradict"}
    record = verified("a", ["g", "x"], [{"g": support, "x": mixed}])
    row = M.verdict_share_row("fincl", [record], DIMS)
    assert row["verdicts"] == 12
    assert row["support"] == pytest.approx(6 / 12) and row["contradict"] == pytest.approx(1 / 12)
    assert row["abstain"] == pytest.approx(5 / 12)
    assert M.verdict_share_row("fincl", [], DIMS)["verdicts"] == 1  # an empty run reads zero shares, not 0/0


def test_the_shown_fact_prefers_a_gold_inside_the_window_and_its_tables_lay_out_the_record():
    support = dict.fromkeys(DIMS, "support")
    inside = verified("in", ["x", "g"], [{"g": support}], pool=["x", "g", "y"], ranking=["g", "x", "y"])
    outside = verified("out", ["x", "y"], [{"x": support}], pool=["x", "y", "g"])
    assert telling_fact([outside, inside])["id"] == "in"
    tables = fact_tables(inside)
    assert [caption.split(" ")[0] for _, caption in tables] == ["Hypotheses", "Rendered", "Verifier"]
    window = tables[2][0].set_index("candidate")
    assert window.loc["g", "gold"] == "yes" and window.loc["g", "pool rank"] == 2 and window.loc["g", "final rank"] == 1
    assert window.loc["g", "h1"] == "F+ R+ E+ Q+ S+ T+" and window.loc["x", "h1"] == "not judged"
    assert rank_line(inside) == "gold rank after fusion: 2 | after the verifier: 1 | selector chose: None "
    assert verdict_string({"FAMILY": "contradict", "ROLE": "odd"}) == "F- R?"


def test_costs_read_every_call_once_by_purpose():
    records = [fact("a", 1, calls=[call("hypothesis"), call("selector", cached=True, tokens_in=7)]),
               fact("b", 1, calls=[call("verifier"), call("verifier")])]
    own, selector = purpose_costs(records, "selector")
    assert (own["calls"], own["fresh"], own["tokens_in"]) == (3, 3, 30)
    assert (selector["calls"], selector["fresh"], selector["tokens_in"]) == (1, 0, 7)
    assert new_calls(records) == {"hypothesis": 1, "verifier": 2}
    assert calls_per_fact(records) == [1, 2]


def test_the_caption_names_the_definition_of_acc_the_runs_get():
    results, _ = two_methods()
    caption = M.main_caption(results, 1)
    assert caption.startswith("Tables 4 and 5: ours (mean, 95% interval)") and "shared selector's pick" in caption
    assert "± std across runs" in M.main_caption(results, 3)
