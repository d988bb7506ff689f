"""Chapter 01's module on LLM-free runs built in memory: Table 1's rows, Table 13's panels, the check values."""

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from book_records import fact, memory_run  # noqa: E402
from fhs.book.chapters import readiness as RG  # noqa: E402
from fhs.data.taxonomy import Concept, Taxonomy  # noqa: E402
from fhs.paper import RELOCATION  # noqa: E402

INTERVAL = {"resamples": 50, "seed": 1}
TAXONOMY = Taxonomy.from_concepts("toy", [Concept("Short", "Revenues"), Concept("Long", "one two three four five six")])


def runs():
    direct = memory_run("fincl", "direct", [fact("a", 12, gold=("Short",)), fact("b", 1, context="c2", gold=("Long",))])
    oracle = memory_run("fincl", "oracle", [fact("a", 1, gold=("Short",)), fact("b", 1, context="c2", gold=("Long",))])
    no_cov = memory_run("fincl", "direct", [fact("a", 40, gold=("Short",)), fact("b", 1, context="c2", gold=("Long",))])
    return {"fincl": direct}, {"fincl": oracle}, {("fincl", "direct"): no_cov, ("fincl", "oracle"): oracle}


def test_metric_table_puts_the_papers_row_under_ours_where_it_reports_one():
    direct, oracle, _ = runs()
    table = RG.metric_table({("fincl", "direct"): direct["fincl"], ("mine", "oracle"): oracle["fincl"]},
                            RG.PAPER_ROWS, INTERVAL)
    assert list(table["query"]) == ["direct", "direct (paper)", "oracle"]
    assert table.iloc[0]["recall@1"].value == 0.5 and table.iloc[2]["mrr"].value == 1.0
    assert table.iloc[1]["recall@10"] == RG.PAPER_ROWS[("fincl", "direct")]["recall@10"]


def test_the_coverage_panels_pair_each_run_with_its_w_cov_0_twin_and_bin_by_label_length():
    direct, oracle, no_cov = runs()
    with_cov = {("fincl", "direct"): direct["fincl"], ("fincl", "oracle"): oracle["fincl"]}
    rows = RG.coverage_rows(no_cov, with_cov, INTERVAL)
    assert rows[0]["recall@10, w_cov 0"] == 0.5 and rows[0]["recall@10, w_cov 1"] == 0.5
    assert rows[0]["Δ mrr"].value == pytest.approx((1 / 12 + 1) / 2 - (1 / 40 + 1) / 2)
    assert rows[1]["Δ mrr"].value == 0.0
    panel_b = RG.label_length_rows(direct["fincl"], no_cov[("fincl", "direct")], TAXONOMY)
    assert [r["label words"] for r in panel_b] == ["1", "5+"]
    assert panel_b[0]["Recall@10, w_cov 1"] == 0.0 and panel_b[1]["gain"] == 0.0
    bin_of = RG.label_length_bin(TAXONOMY)
    assert bin_of(fact("x", 1, gold=("Unknown",))) == "n/a"
    figure = RG.label_length_figure(pd.DataFrame(panel_b), ["fincl"])
    assert len(figure.axes) == 1 and len(RG.depth_figure(direct, oracle, ["fincl"]).axes) == 1


def test_check_values_and_the_relocation_lines():
    direct, oracle, no_cov = runs()
    checked = RG.readiness_metrics(direct, oracle, no_cov, ["fincl"])
    assert checked["fincl/direct/recall@1"] == 0.5 and checked["fincl/direct-wcov0/mrr"] == pytest.approx(
        (1 / 40 + 1) / 2)
    assert checked["fincl/facts"] == 2 and "codiesp/relocation_rate" not in checked
    checked = RG.readiness_metrics(direct, oracle, no_cov, ["fincl"], 0.75, oracle["fincl"])
    assert checked["codiesp/relocation_rate"] == 0.75 and checked["codiesp/oracle-exact/mrr"] == 1.0
    lines = RG.relocation_lines({"diagnosis_rows": 10, "facts": 8, "exact": 6})
    assert lines[1] == "codes in the inventory: 8 (80.0% of rows)"
    assert lines[2].startswith("relocated exactly: 6 (75.0%)") and f"{RELOCATION['exact']:,}" in lines[2]


def test_a_spec_files_panels_and_figures_are_titled_by_its_name_not_its_path():
    path = "/data/specs/my-filing.yaml"  # how the chapter's datasets parameter names it
    direct = {path: memory_run("my-filing", "direct", [fact("a", 12, gold=("Short",))])}
    oracle = {path: memory_run("my-filing", "oracle", [fact("a", 1, gold=("Short",))])}
    no_cov = memory_run("my-filing", "direct", [fact("a", 40, gold=("Short",))])
    panel_b = RG.label_length_rows(direct[path], no_cov, TAXONOMY)
    assert {row["dataset"] for row in panel_b} == {"my-filing"}
    titles = [ax.get_title() for ax in RG.depth_figure(direct, oracle, [path]).axes]
    titles += [ax.get_title() for ax in RG.label_length_figure(pd.DataFrame(panel_b), [path]).axes]
    assert titles == ["my-filing", "my-filing"]


class _Facts:
    """What ``with_headers`` asks of a study: each dataset's facts."""

    def __init__(self, **facts):
        self._facts = facts

    def facts(self, name):
        return self._facts[name]


def _fact(fid, modality="table", **where):
    from fhs.data.facts import Fact

    return Fact(id=fid, context_id="c", modality=modality, value="5", datatype="d", context="x 5", gold=("g",),
                **where)


def test_the_located_query_is_shown_for_datasets_with_headers_beside_direct_with_the_paired_difference():
    study = _Facts(fincl=[_fact("a"), _fact("b", column_header="2024")], codiesp=[_fact("c", "text", sentence="x 5")])
    assert RG.with_headers(study, ["fincl", "codiesp"]) == ["fincl"]
    direct, _, _ = runs()
    located = memory_run("fincl", "direct-located", [fact("a", 1, gold=("Short",)),
                                                     fact("b", 2, context="c2", gold=("Long",))])
    rows = RG.located_rows(direct, {"fincl": located}, INTERVAL)
    assert [r["query"] for r in rows] == ["direct (the paper's serialisation)", "direct-located",
                                          "Δ direct-located − direct (paired)"]
    assert rows[0]["recall@1"].value == 0.5 and rows[1]["recall@1"].value == 0.5
    assert rows[2]["mrr"].value == pytest.approx((1 + 1 / 2) / 2 - (1 / 12 + 1) / 2)
    assert set(rows[0]) == {"dataset", "query", "facts", "recall@1", "recall@10", "mrr"}
    checked = RG.readiness_metrics(*runs(), ["fincl"], located={"fincl": located})
    assert checked["fincl/direct-located/recall@1"] == 0.5 and checked["fincl/direct-located/mrr"] == 0.75
    assert "fincl/direct-located/recall@50" not in checked
    assert not any("direct-located" in key for key in RG.readiness_metrics(*runs(), ["fincl"]))


def test_the_note_counts_the_facts_that_had_a_location_per_modality():
    lines = RG.located_lines({"mine": [_fact("a", row_header="Assets"), _fact("b"),
                                       _fact("c", "text", sentence="x 5.")]})
    assert lines == ["mine: 1 of 2 table cells had a row or column header, 1 of 1 text mentions had a sentence; "
                     "a fact with neither issued the direct query."]


def test_the_coverage_terms_gain_is_read_from_the_rows_not_assumed_to_favour_short_labels():
    """The figure once said the term "rescues short labels" on every dataset; on a taxonomy whose only gain is
    on long labels the page now says so, from the rows it shows."""
    import pandas as pd

    from fhs.book.chapters.readiness import label_length_lines

    panel_b = pd.DataFrame([
        {"dataset": "ghg", "label words": "2", "facts": 4, "gain": 0.0},
        {"dataset": "ghg", "label words": "5+", "facts": 5, "gain": 0.4},
        {"dataset": "flat", "label words": "3", "facts": 2, "gain": 0.0},
    ])
    ghg, flat = label_length_lines(panel_b)
    assert ghg == ("ghg: the coverage term's largest Recall@10 gain is on labels of five or more words "
                   "(+0.400, 5 facts); on labels of one or two words it is +0.000.")
    assert flat == "flat: the coverage term raises raw-query Recall@10 at no label length."
