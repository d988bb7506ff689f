"""Chapter 02's lead: the full-scale rows beside the paper, the folded sampled block, tables read across."""

import pytest
from book_records import fact, memory_run
from test_book_main_results import INTERVAL, two_methods

from fhs.book.chapters import main_lead as L
from fhs.book.chapters import main_results as M
from fhs.book.fold import Folded
from fhs.paper import paper_value


def test_main_table_puts_ours_beside_the_papers_figure_on_one_row_with_the_gap():
    results, oracle = two_methods()
    table = M.main_table(results, oracle, ["fincl"], ["direct", "fhs"], INTERVAL)
    assert list(table.columns) == ["dataset", "row", "facts", "metric", "paper", "ours [95% interval]", "gap"]
    row = table[(table.row == "fhs") & (table.metric == "recall@1")].iloc[0]
    paper = paper_value("fincl", "fhs", "recall@1")
    assert row["paper"] == paper and row["ours [95% interval]"].startswith("0.500 [")
    assert row["gap"] == f"{0.5 - paper:+.3f}"
    assert set(table.row) == {"direct", "fhs", "oracle (ceiling)"}  # no second "(paper)" row under each of ours


def test_a_dataset_the_paper_did_not_use_gets_no_paper_figure():
    results, oracle = two_methods()
    mine = {("ghg", method): runs for (_, method), runs in results.items()}
    table = M.main_table(mine, {"ghg": oracle["fincl"]}, ["ghg"], ["direct", "fhs"], INTERVAL)
    assert set(table.paper) == {"—"} and set(table.gap) == {""}


def test_full_scale_rows_lead_with_direct_the_probe_and_chapter_nines_stages():
    direct = memory_run("fincl", "direct", [fact("a", 3), fact("b", 1, context="c2")])
    probe = memory_run("fincl", "oracle", [fact("a", 1), fact("b", 1, context="c2")])
    ceilings = {"fincl/facts": 500, "fincl/pool/recall@1": 0.4, "fincl/pool/mrr": 0.55,
                "fincl/verified/recall@1": 0.65, "fincl/verified/mrr": 0.71}
    table = L.full_scale_table({("fincl", "direct"): direct, ("fincl", "oracle"): probe}, ceilings, ["fincl"],
                               {"fincl": "fincl"}, INTERVAL)
    assert list(dict.fromkeys(table.row)) == ["direct", "probe", "perfect pool (ch. 9)", "+ perfect verifier",
                                              "FHS (paper)"]
    pool = table[(table.row == "perfect pool (ch. 9)") & (table.metric == "recall@1")].iloc[0]
    assert pool["facts"] == 500 and pool["ours [95% interval]"].startswith("0.400 [0.3")
    paper_fhs = table[table.row == "FHS (paper)"]
    assert set(paper_fhs["ours [95% interval]"]) == {"—"} and paper_fhs.iloc[0]["paper"] == paper_value(
        "fincl", "fhs", "recall@1")
    # on a dataset of one's own chapter 9 has recorded nothing: no stage rows, no paper row
    mine = L.full_scale_table({("ghg", "direct"): direct, ("ghg", "oracle"): probe}, ceilings, ["ghg"],
                              {"ghg": "ghg"}, INTERVAL)
    assert set(mine.row) == {"direct", "probe"} and set(mine.paper) == {"—"}


def test_only_an_in_process_cpu_model_folds_the_sampled_rows():
    assert L.protocol_run("llama_cpp") and not L.protocol_run("openai")


def test_the_folded_block_holds_every_table_under_one_summary_line():
    results, oracle = two_methods()
    tables = L.sampled_tables(results, oracle, ["fincl"], ["direct", "fhs"], INTERVAL, 1,
                              {"fincl": ("FAMILY",)}, "tiny", "llama_cpp")
    cost = tables["cost"][0]
    summary = L.protocol_summary(results, cost, {"fincl": 2}, {"fincl": "fincl"})
    assert summary.startswith("Every method (2) ran end to end on fincl 2 facts: 6 model calls, 66 tokens")
    block = Folded(summary, list(tables.values()), ["a note"])
    markup = block._repr_html_()
    assert markup.startswith('<details class="fhs-folded"><summary>Every method')
    assert markup.count("<table") == 3 and "a note" in markup and markup.endswith("</details>")
    assert "Table 19" in repr(block)


def test_too_few_facts_say_so_in_one_sentence():
    line = L.too_few_line({"fincl": 2, "codiesp": 2}, {"fincl": "fincl", "codiesp": "codiesp"}, "The contrasts")
    assert line.startswith("The contrasts are left out on this profile: on fincl 2, codiesp 2 facts")
    assert "±0.5" in line or "±0.6" in line


@pytest.mark.parametrize("marked", [True, False])
def test_figures_mark_the_paper_only_where_it_has_a_value(marked):
    import matplotlib
    matplotlib.use("Agg")
    results, _ = two_methods()
    name = "fincl" if marked else "ghg"
    results = {(name, method): runs for (_, method), runs in results.items()}
    figure = M.head_metrics_figure(results, [name], ["direct", "fhs"], INTERVAL)
    assert ("black ticks: the paper" in figure._suptitle.get_text()) is marked
    legend = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert ("paper" in legend) is marked
    depth = M.head_depth_figure(results, [name], ["direct", "fhs"], INTERVAL)
    assert ("crosses: the paper" in depth._suptitle.get_text()) is (
        marked and paper_value("fincl", "fhs", "recall@50") is not None)


def test_table_19_splits_into_two_tables_that_fit_the_page():
    results, _ = two_methods()
    cost = M.cost_table(results, ["fincl"], ["direct", "fhs"])
    (own, own_caption), (selector, selector_caption) = L.cost_parts(cost, "Table 19")
    assert list(own.columns)[:3] == ["dataset", "method", "calls / fact"] and "selector calls / fact" not in own
    assert {"selector calls / fact", "wall s / fact", "answers cut / fact"} <= set(selector.columns)
    assert set(own.columns) | set(selector.columns) == set(cost.columns)  # every number still shown
    assert len(own.columns) <= 8 and len(selector.columns) <= 8
    assert own_caption.startswith("Table 19: ") and selector_caption != own_caption


def test_the_protocol_block_shows_table_19_in_its_two_parts(capsys):
    results, oracle = two_methods()
    tables = L.sampled_tables(results, oracle, ["fincl"], ["direct", "fhs"], INTERVAL, 1,
                              {"fincl": ("FAMILY",)}, "tiny", "llama_cpp")
    L.show_sampled(True, "every method ran", tables, [])
    printed = capsys.readouterr().out
    assert printed.startswith("every method ran") and "the method's own calls" in printed
    assert "the shared selector's calls and the whole method" in printed
