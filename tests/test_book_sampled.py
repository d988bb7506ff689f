"""The LLM chapters' lead: under a CPU model's few facts the sampled tables fold into one block, else stay put."""

from pathlib import Path

import pandas as pd
from book_records import call, fact, memory_run

from fhs.book.chapters import verifier_diagnostics as V
from fhs.book.sampled import Sampled, lead_line, ran_line
from fhs.paper import VERIFIER


def frame(value):
    return pd.DataFrame([{"row": "fhs", "recall@1": value}])


def test_a_protocol_run_keeps_its_tables_and_shows_them_in_one_folded_block(capsys):
    sampled = Sampled(protocol=True)
    sampled.lead(["Table 12", "Table 16"])
    assert capsys.readouterr().out.strip() == lead_line(["Table 12", "Table 16"])
    assert "(Table 12, Table 16)" in lead_line(["Table 12", "Table 16"])
    sampled.show(frame(0.25), "Table 12")
    sampled.say("β chosen on dev: 0.6")
    sampled.show(frame(0.5), "Table 16")
    assert capsys.readouterr().out == ""  # nothing shown in the sections
    sampled.fold("FHS ran end to end on 2 facts")
    printed = capsys.readouterr().out
    assert printed.startswith("FHS ran end to end on 2 facts")
    assert "β chosen on dev: 0.6" in printed and "Table 12" in printed and "Table 16" in printed
    assert printed.index("Table 12") < printed.index("Table 16")


def test_a_full_sample_shows_each_table_in_its_section_and_folds_nothing(capsys):
    sampled = Sampled(protocol=False)
    sampled.show(frame(0.25), "Table 12")
    sampled.say("β chosen on dev: 0.6")
    shown = capsys.readouterr().out
    assert "Table 12" in shown and "β chosen on dev: 0.6" in shown
    sampled.fold("FHS ran end to end on 2 facts")
    assert capsys.readouterr().out == "" and sampled.tables == []
    sampled.lead(["Table 16"])
    assert capsys.readouterr().out == ""  # the lead names folded tables only where they fold


def test_the_summary_counts_each_run_once_with_its_calls_tokens_and_model_time():
    calls = [call("generator", tokens_in=100, tokens_out=20, seconds=30.0), call("verifier", cached=True)]
    first = memory_run("fincl", "fhs", [fact("a", 1, calls=calls), fact("b", 2, calls=calls[:1])])
    second = memory_run("fincl", "fhs", [fact("a", 1, calls=calls[:1])])
    second.path = Path("elsewhere")
    line = ran_line([first, first, second], "FHS")  # the first run read twice counts once
    assert line.startswith("FHS ran end to end on 2 facts per run (2 runs): 4 model calls, 372 tokens, 1.5 min")
    assert "(1 run):" in ran_line([second], "FHS")


def test_chapter_04_leads_with_the_window_statistics_beside_the_papers():
    lead = V.lead_frame({"fincl": {"calls": 12, "gold_in_window": 0.25, "dimensions_resolved": 4.5}})
    assert list(lead.quantity) == ["gold_in_window", "dimensions_resolved"]
    row = lead.iloc[0]
    assert row["dataset"] == "fincl" and row["verifier calls"] == 12 and row["ours"] == "0.250"
    paper = VERIFIER["gold_in_window"]
    assert row["paper"] == f"{paper:.3f}" and row["gap"] == f"{0.25 - paper:+.3f}"
    own = V.lead_frame({"ghg": {"calls": 3, "gold_in_window": 0.5, "dimensions_resolved": 2.0}})
    assert "paper" not in own.columns  # a dataset the paper did not use gets no paper figure beside ours
