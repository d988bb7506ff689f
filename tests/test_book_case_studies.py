"""Chapter 07's module: the case rule, Table 25's cells, the worked examples' check values and figure."""

import matplotlib

matplotlib.use("Agg")

from book_records import fact  # noqa: E402
from fhs.book.chapters import case_studies as C  # noqa: E402
from fhs.book.chapters import worked_examples as W  # noqa: E402


def test_the_rule_takes_the_first_rank1_disagreement_in_sample_order_then_the_first_rank_difference():
    fhs = [fact("a", 2), fact("b", 1), fact("c", 1), fact("t", 4, modality="text")]
    base = [fact("a", 3), fact("b", 5), fact("c", 2), fact("t", 4, modality="text")]
    assert C.choose_case(fhs, base, "table") == ("b", "disagree at rank 1")
    assert C.choose_case(fhs[:1], base, "table") == ("a", "gold ranks differ")
    assert C.choose_case(fhs, base, "text") == (None, "no difference")
    cases = C.choose_cases({"fincl": ["c", "b", "a", "t"]}, {"fincl": fhs}, {"fincl": base})
    assert cases == [{"dataset": "fincl", "modality": "table", "fact": "c", "chosen because": "disagree at rank 1"}]


def test_table25_cells_give_the_rank_and_the_selectors_verdict_where_it_ran():
    assert C.gold_rank_cell(None) == "not run"
    assert C.gold_rank_cell(fact("a", None)) == "—"
    assert C.gold_rank_cell(fact("a", 1, correct=True)) == "1 ✓"
    assert C.gold_rank_cell(fact("a", 3, correct=False)) == "3 ✗"
    cases = [{"dataset": "fincl", "modality": "table", "fact": "a"}]
    rows = C.gold_rank_table(cases, {("fincl", "fhs"): [fact("a", 1, correct=True)], ("fincl", "direct"): []},
                             ["fhs", "direct"])
    assert rows == [{"dataset": "fincl", "modality": "table", "fact": "a", "fhs": "1 ✓", "direct": "not run"}]
    checked = C.case_study_metrics(W.score_example(W.rsu_example()), W.score_example(W.securitization_example()),
                               W.score_example(W.securitization_example(), "strict"), cases, 1, rows, "direct")
    assert checked["cases/fhs_at_rank1"] == 1 and checked["cases/direct_at_rank1"] == 0 and checked["cases/pages"] == 1


def test_the_worked_examples_check_values_match_the_papers_printed_ones():
    rsu = W.score_example(W.rsu_example())
    securitization = W.score_example(W.securitization_example())
    strict = W.score_example(W.securitization_example(), "strict")
    checked = C.case_study_metrics(rsu, securitization, strict, [], 0, [], "structured")
    assert C.paper_mismatches(checked) == []
    assert checked["appendix-g/rsu/gap"] > checked["appendix-g/rsu/lead"] and checked["appendix-g/rsu/gold_rank"] == 1
    assert C.paper_mismatches({**checked, "appendix-g/rsu/gap": 0.0}) == [
        f"appendix-g/rsu/gap: 0.000 vs the paper's {C.PAPER_G['rsu']['gap']}"]
    assert f"{checked['appendix-g/rsu/gap']:.3f}" in C.rsu_text(rsu)
    assert f"{checked['appendix-g/securitization/vbar_strict']:.3f}" in C.securitization_text(securitization, strict)


def test_the_example_figure_has_one_verdict_grid_per_hypothesis_and_the_score_bars():
    rsu = W.score_example(W.rsu_example())
    figure = C.example_figure(rsu, "title")
    assert len(figure.axes) == len(rsu.example.hypotheses) + 1
    assert C.short("x" * 40) == "…" + "x" * 33 and C.short("short") == "short"
