"""Chapter 06's tables from FHS-Seq records built in memory: Table 20, stops, revisions, the oracle, the cost."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from book_records import call, memory_run  # noqa: E402
from fhs.book.chapters import fhs_seq as T  # noqa: E402
from fhs.method.config import FHSConfig  # noqa: E402
from fhs.method.fhs_seq import STOP_REASONS  # noqa: E402
from fhs.run.tables.seq_diagnostics import with_round_ranks  # noqa: E402

INTERVAL = {"resamples": 50, "seed": 1}


def episode(fid, first, last, *, stop="max_rounds", revised=("ROLE",), context="c1"):
    """An FHS-Seq record: round 1's list ``first``, the last round's ``last``, one revision per later round."""
    rounds = [{"ranking": list(first), "refusion": list(first), "hypotheses": 2, "verifier": None}]
    for target in revised:
        rounds.append({"ranking": list(last), "refusion": list(last), "hypotheses": 3,
                       "revision": {"target": target, "restored": target == "EVENT"}})
    return {"id": fid, "context_id": context, "modality": "table", "gold": ["g"], "rank": None,
            "ranking": list(last), "rounds": rounds, "rounds_used": len(rounds), "stop_reason": stop,
            # hypothesis 0 alone ranks the gold first, hypothesis 1 third
            "queries": [{"hypothesis_index": 0}, {"hypothesis_index": 1}],
            "rankings": [["g", "a", "b"], ["a", "b", "g"]],
            "llm_calls": [call("hypothesis"), call("verifier", cached=True), call("selector")]}


def seeded():
    records = [episode("f1", ["a", "g"], ["g", "a"]), episode("f2", ["g"], ["g"], stop=STOP_REASONS[0], revised=(),
                                                              context="c2")]
    return [with_round_ranks(records)]


def test_table20_reads_round_one_against_the_full_episode_with_the_papers_values():
    table, note, checked = T.table20("fincl", seeded(), INTERVAL)
    assert checked["fincl/fhs-seq/recall@50_round1"] == 1.0 and checked["fincl/fhs-seq/mean_rounds"] == 1.5
    assert checked["fincl/fhs-seq/one_round"] == 0.5 and checked["fincl/facts"] == 2
    assert "Δ Recall@50 (full − round 1)" in list(table.quantity)
    assert note.startswith("; the paper's Δ interval is [")


def test_stops_revisions_and_the_oracle_best_single_hypothesis():
    records = {"fincl": seeded()[0]}
    rows, checked = T.stop_rows(records)
    assert {r["stopping reason"] for r in rows} == set(STOP_REASONS)
    assert checked["fincl/fhs-seq/rounds/2"] == 0.5 and checked[f"fincl/fhs-seq/stop/{STOP_REASONS[0]}"] == 0.5
    revisions = T.revisions_frame(records)
    assert revisions.to_dict("records") == [{"dataset": "fincl", "target": "ROLE", "revisions": 1, "restored": 0}]
    assert len(T.revisions_frame({"fincl": []})) == 0
    rows, checked, gain = T.oracle_rows("fincl", seeded(), FHSConfig(beta=0.0), INTERVAL)
    assert checked["fincl/oracle_best_single/recall@1"] == 1.0 and checked["fincl/round1/recall@1"] == 0.5
    assert gain.value == pytest.approx(0.5) and [r["list"] for r in rows][0] == "FHS (round 1)"


def test_round_one_identity_selector_row_and_cost_over_the_seeded_runs():
    recs = seeded()[0]
    fhs = memory_run("fincl", "fhs", [{**r, "ranking": r["rounds"][0]["ranking"]} for r in recs])
    assert T.round1_is_fhs([recs], [fhs]) == 1.0
    seq = memory_run("fincl", "fhs-seq", [{**r, "rank": 1, "correct": True} for r in recs])
    row = T.selector_row("fincl", [seq], [fhs], INTERVAL)
    assert row["fhs-seq accuracy"].value == 1.0 and row["Δ recall@1"].value == pytest.approx(1.0)
    cost = T.cost_row("fincl", [seq, seq])
    assert cost["calls / fact"] == 2 and cost["served by the cache"] == 1 and (cost["min"], cost["max"]) == (2, 2)
    assert cost["tokens in / fact"] == 30  # what the calls read, the selector's included
    figure = T.rounds_figure({"fincl": recs}, STOP_REASONS)
    assert len(figure.axes) == 2


def test_a_dataset_the_paper_never_ran_gets_no_paper_column_row_or_tick():
    table, note, _ = T.table20("ghg-report", seeded(), INTERVAL)
    assert "paper" not in table.columns and note == ""
    rows, _, _ = T.oracle_rows("ghg-report", seeded(), FHSConfig(beta=0.0), INTERVAL)
    assert not [r["list"] for r in rows if "(paper)" in r["list"]]
    figure = T.rounds_figure({"ghg-report": seeded()[0]}, STOP_REASONS)
    assert "paper" not in figure._suptitle.get_text()
    assert not [c for ax in figure.axes for c in ax.collections if c.get_label() == "paper"]
