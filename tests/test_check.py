"""fhs.book.check: the regression checker that ends every chapter.

The fixture file is small enough to read by hand: metric ``r10`` has precision 3 and
tolerance 0.002, so for an expected 0.400 the bands are written out below.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fhs.book import check as C
from fhs.core.errors import InputError
from fhs.paper import PAPER

PAPER_R10 = PAPER["fintagging"]["fhs"]["recall@10"]  # what the fixture's reference names

FIXTURE = """\
chapter: demo
title: Demo chapter
command: make notebooks PROFILE={profile}
metrics:
  fincl/r10:
    description: Recall@10
    paper: fintagging/fhs/recall@10
    precision: 3
    tolerance: 0.002
  fincl/mrr:
    description: MRR
    paper: fintagging/fhs/mrr
    precision: 3
  count:
    description: facts
    precision: 0
expected:
  cpu:
    fincl/r10: 0.4
    fincl/mrr: {value: 0.25, tolerance: 0.01}
    count: 500
"""


@pytest.fixture
def regdir(tmp_path: Path) -> Path:
    directory = tmp_path / "regressions"
    directory.mkdir()
    (directory / "demo.yaml").write_text(FIXTURE)
    return directory


def test_status_bands_follow_precision_then_tolerance():
    expected = C.Expected(0.400, 0.002)
    assert C.status_of(0.4004, expected, precision=3) == C.OK  # rounds to 0.400
    assert C.status_of(0.4016, expected, precision=3) == C.OK_TOL  # |0.4016 - 0.4| <= 0.002
    assert C.status_of(0.4020, expected, precision=3) == C.OK_TOL  # on the edge counts
    assert C.status_of(0.4030, expected, precision=3) == C.FAIL
    assert C.status_of(None, expected, precision=3) == C.FAIL
    assert C.status_of(float("nan"), expected, precision=3) == C.FAIL
    assert C.status_of(0.4, None, precision=3) == C.NEW


def test_load_regression_reads_bare_and_explicit_values(regdir):
    reg = C.load_regression("demo", regdir)
    assert reg.title == "Demo chapter"
    assert reg.metrics["fincl/r10"].paper == PAPER_R10
    cpu = reg.expected_for("cpu")
    assert cpu["fincl/r10"] == C.Expected(0.4, 0.002)  # bare value: metric's tolerance
    assert cpu["fincl/mrr"] == C.Expected(0.25, 0.01)  # explicit tolerance wins
    assert cpu["count"] == C.Expected(500.0, 0.0)  # default tolerance 0
    assert reg.expected_for("paper") == {}


def test_check_prints_table_with_gap_to_paper_and_saves_results(regdir, tmp_path, capsys):
    results = {"fincl": {"r10": 0.4016, "mrr": 0.2700}, "count": 500}
    report = C.check(results, "demo", "cpu", directory=regdir, results_root=tmp_path / "runs")
    rows = {row.metric: row for row in report.rows}
    assert rows["fincl/r10"].status == C.OK_TOL
    assert rows["fincl/mrr"].status == C.FAIL  # |0.27 - 0.25| > 0.01
    assert rows["count"].status == C.OK
    assert rows["fincl/r10"].gap_to_paper == pytest.approx(0.4016 - PAPER_R10)
    assert rows["count"].gap_to_paper is None  # no paper value
    printed = capsys.readouterr().out
    assert "Regression check: demo [profile cpu]" in printed
    assert f"{0.4016 - PAPER_R10:+.3f}" in printed  # the gap column
    assert "1 OK, 1 OK*, 1 FAIL" in printed
    saved = json.loads((tmp_path / "runs" / "cpu" / "results" / "demo.json").read_text())
    assert saved == {"fincl/r10": 0.4016, "fincl/mrr": 0.27, "count": 500.0}
    assert not report.ok


def test_assert_ok_names_each_failure_and_how_to_record(regdir):
    report = C.check({"fincl": {"r10": 0.5, "mrr": 0.25}, "count": 500}, "demo", "cpu",
                     directory=regdir, save=False, quiet=True)
    with pytest.raises(AssertionError) as error:
        report.assert_ok()
    message = str(error.value)
    assert "fincl/r10: expected 0.400" in message and "got 0.500" in message
    assert "fincl/mrr" not in message
    assert "python -m fhs.book.check record demo --profile cpu" in message


def test_missing_result_fails_and_unrecorded_profile_is_new(regdir):
    report = C.check({"fincl": {"r10": 0.4}}, "demo", "cpu", directory=regdir,
                     save=False, quiet=True)
    statuses = {row.metric: row.status for row in report.rows}
    assert statuses == {"fincl/r10": C.OK, "fincl/mrr": C.FAIL, "count": C.FAIL}
    fresh = C.check({"count": 12}, "demo", "paper", directory=regdir, save=False, quiet=True)
    assert [(r.metric, r.status) for r in fresh.rows] == [("count", C.NEW)]
    fresh.assert_ok()  # nothing recorded is not a failure


def test_undefined_metric_is_an_input_error_naming_the_file(regdir):
    with pytest.raises(InputError, match="demo.yaml.*not defined"):
        C.check({"fincl": {"r20": 0.1}}, "demo", "cpu", directory=regdir, save=False)


@pytest.mark.parametrize("bad, where", [
    ("metrics:\n  a: {precision: 3, colour: red}\n", "metrics.a"),
    ("metrics:\n  a: {paper: high}\n", "metrics.a.paper"),
    ("metrics:\n  a: {}\nexpected:\n  cpu:\n    b: 1\n", "expected.cpu.b"),
    ("metrics:\n  a: {}\nexpected:\n  cpu:\n    a: {tolerance: 1}\n", "expected.cpu.a"),
    ("- just\n- a list\n", "top level"),
])
def test_malformed_files_name_the_field(tmp_path, bad, where):
    (tmp_path / "bad.yaml").write_text(bad)
    with pytest.raises(InputError) as error:
        C.load_regression("bad", tmp_path)
    assert str(tmp_path / "bad.yaml") in str(error.value)
    assert where in str(error.value)


def test_missing_file_says_how_to_create_it(tmp_path):
    with pytest.raises(InputError, match="no regression file"):
        C.load_regression("nothing", tmp_path)


def test_flatten_joins_nested_keys_and_rejects_non_numbers():
    assert C.flatten({"a": {"b": 1, "c": {"d": 2.5}}, "e": 3}) == {"a/b": 1.0, "a/c/d": 2.5, "e": 3.0}
    with pytest.raises(InputError, match="'a/b'"):
        C.flatten({"a": {"b": "high"}})
    with pytest.raises(InputError):
        C.flatten({"flag": True})


def test_record_writes_values_and_keeps_other_profiles(regdir):
    path = C.record("demo", "smoke", {"fincl": {"r10": 0.123456789}, "count": 7.0},
                    directory=regdir)
    reg = C.load_regression("demo", regdir)
    assert reg.expected_for("smoke") == {
        "fincl/r10": C.Expected(0.123456789, 0.002),  # unrounded, metric tolerance
        "count": C.Expected(7.0, 0.0),
    }
    assert reg.expected_for("cpu")["fincl/mrr"] == C.Expected(0.25, 0.01)  # untouched
    raw = yaml.safe_load(path.read_text())
    assert raw["expected"]["smoke"]["count"] == 7 and isinstance(raw["expected"]["smoke"]["count"], int)
    assert raw["metrics"]["fincl/r10"]["paper"] == "fintagging/fhs/recall@10"  # the reference, not its number
    # a run that reproduces what was recorded is OK
    again = C.check({"fincl": {"r10": 0.123456789}, "count": 7}, "demo", "smoke",
                    directory=regdir, save=False, quiet=True)
    assert [r.status for r in again.rows] == [C.OK, C.OK]


def test_record_with_tolerance_stores_explicit_entries(regdir):
    C.record("demo", "paper", {"fincl": {"mrr": 0.26}}, directory=regdir, tolerance=0.005)
    assert C.load_regression("demo", regdir).expected_for("paper") == {
        "fincl/mrr": C.Expected(0.26, 0.005)}


def test_record_refuses_undefined_metrics(regdir):
    with pytest.raises(InputError, match="undefined metric"):
        C.record("demo", "cpu", {"new": 1}, directory=regdir)


def test_command_line_verify_and_record(regdir, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(C, "REGRESSIONS_DIR", regdir)
    root = tmp_path / "runs"
    C.save_results({"fincl": {"r10": 0.41, "mrr": 0.25}, "count": 500}, "demo", "cpu", root)
    assert C.main(["verify", "demo", "--profile", "cpu", "--results-root", str(root)]) == 1
    assert "FAIL" in capsys.readouterr().out
    assert C.main(["record", "demo", "--profile", "cpu", "--results-root", str(root)]) == 0
    assert C.main(["verify", "demo", "--profile", "cpu", "--results-root", str(root)]) == 0
    assert C.main(["verify", "demo", "--profile", "paper", "--results-root", str(root)]) == 2
    assert "no saved results" in capsys.readouterr().err


def test_html_repr_escapes_and_lists_rows(regdir):
    report = C.check({"count": 500}, "demo", "cpu", directory=regdir, save=False, quiet=True)
    markup = report._repr_html_()
    assert "<table>" in markup and "count" in markup and "OK* = within" in markup


def test_shipped_regression_files_parse():
    files = sorted(C.REGRESSIONS_DIR.glob("*.yaml"))
    assert files, "fhs/book/regressions/ holds at least the pipeline check"
    for path in files:
        reg = C.load_regression(path.stem)
        assert reg.chapter == path.stem
        for profile, values in reg.expected.items():
            assert set(values) <= set(reg.metrics), (path, profile)


# ----------------------------------------------------------------------------- inputs and per-profile tolerances

PROFILED = """\
chapter: demo
metrics:
  fincl/acc:
    description: accuracy
    precision: 4
    tolerance: {default: 1.0e-09, paper: 0.03}
  codiesp/acc:
    description: accuracy
    precision: 4
    tolerance: {default: 1.0e-09, paper: 0.03}
expected:
  cpu:
    fincl/acc: 0.25
    codiesp/acc: 0.3333333333333333
  paper:
    fincl/acc: 0.25
inputs:
  cpu:
    fincl/facts: aaaa
    fincl/taxonomy: bbbb
    codiesp/facts: cccc
    model: dddd
"""


@pytest.fixture
def profiled(tmp_path: Path) -> Path:
    directory = tmp_path / "profiled"
    directory.mkdir()
    (directory / "demo.yaml").write_text(PROFILED)
    return directory


def test_tolerance_can_differ_per_profile(profiled):
    reg = C.load_regression("demo", profiled)
    assert reg.expected_for("cpu")["fincl/acc"].tolerance == 1e-9  # llama.cpp: exact
    assert reg.expected_for("paper")["fincl/acc"].tolerance == 0.03  # a served model drifts
    # one fact in twelve (0.0833) is far outside the cpu tolerance, inside nothing
    assert C.compare({"fincl/acc": 0.25 + 1 / 12}, reg, "cpu").rows[0].status == C.FAIL
    assert C.compare({"fincl/acc": 0.27}, reg, "paper").rows[0].status == C.OK_TOL


def test_per_profile_tolerance_needs_a_default(tmp_path):
    (tmp_path / "demo.yaml").write_text(PROFILED.replace("{default: 1.0e-09, paper: 0.03}", "{paper: 0.03}", 1))
    with pytest.raises(InputError, match=r"metrics\.fincl/acc\.tolerance.*default"):
        C.load_regression("demo", tmp_path)


def test_changed_inputs_are_named_on_the_report_and_on_failing_rows(profiled):
    reg = C.load_regression("demo", profiled)
    inputs = {"fincl/facts": "aaaa", "fincl/taxonomy": "bbbb", "codiesp/facts": "CHANGED", "model": "dddd"}
    report = C.compare({"fincl/acc": 0.25, "codiesp/acc": 0.5}, reg, "cpu", inputs)
    assert [str(c) for c in report.input_changes] == ["codiesp/facts (recorded cccc, now CHANGED)"]
    rows = {row.metric: row for row in report.rows}
    assert rows["codiesp/acc"].status == C.FAIL and rows["codiesp/acc"].reason == "input changed: codiesp/facts"
    assert rows["fincl/acc"].status == C.OK and rows["fincl/acc"].reason == ""
    text = str(report)
    assert "Inputs differ from the recorded ones" in text and "codiesp/facts" in text and "why" in text
    with pytest.raises(AssertionError, match=r"codiesp/acc.*\(input changed: codiesp/facts\)"):
        report.assert_ok()


def test_a_changed_model_explains_every_metric(profiled):
    reg = C.load_regression("demo", profiled)
    inputs = {"fincl/facts": "aaaa", "fincl/taxonomy": "bbbb", "codiesp/facts": "cccc", "model": "other"}
    report = C.compare({"fincl/acc": 0.5, "codiesp/acc": 0.5}, reg, "cpu", inputs)
    assert {row.reason for row in report.rows} == {"input changed: model"}


def test_matching_inputs_and_unrecorded_inputs_are_said_so(profiled):
    reg = C.load_regression("demo", profiled)
    same = {"fincl/facts": "aaaa", "fincl/taxonomy": "bbbb", "codiesp/facts": "cccc", "model": "dddd"}
    report = C.compare({"fincl/acc": 0.25, "codiesp/acc": 1 / 3}, reg, "cpu", same)
    assert report.ok and not report.input_changes and report.inputs_line() == "Inputs match the recorded ones."
    paper = C.compare({"fincl/acc": 0.25}, reg, "paper", same)
    assert "No input fingerprints recorded" in paper.inputs_line()


def test_record_writes_exact_values_and_fingerprints_and_verify_reads_them(profiled, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    value = 1 / 3 + 1e-13  # recorded as computed, not rounded
    inputs = {"fincl/facts": "eeee", "model": "ffff"}
    C.check({"fincl/acc": 0.25, "codiesp/acc": value}, "demo", "cpu", inputs=inputs, directory=profiled)
    assert json.loads((tmp_path / "runs/cpu/results/demo.inputs.json").read_text()) == inputs
    monkeypatch.setattr(C, "REGRESSIONS_DIR", profiled)
    # the numbers still match, so nothing fails, but the changed inputs are reported
    assert C.main(["verify", "demo", "--profile", "cpu"]) == 0
    assert "fincl/facts (recorded aaaa, now eeee)" in capsys.readouterr().out
    assert C.main(["record", "demo", "--profile", "cpu"]) == 0
    assert "2 input fingerprint(s)" in capsys.readouterr().out
    raw = yaml.safe_load((profiled / "demo.yaml").read_text())
    assert raw["expected"]["cpu"]["codiesp/acc"] == value
    assert raw["inputs"]["cpu"] == inputs and "paper" in raw["expected"]
    assert C.main(["verify", "demo", "--profile", "cpu"]) == 0


def test_fingerprints_follow_content(tmp_path):
    from fhs.book.fingerprint import facts_fingerprint, file_fingerprint, model_fingerprint, taxonomy_fingerprint
    from fhs.data.facts import Fact
    from fhs.data.taxonomy import Concept, Taxonomy

    one = Fact("f1", "c1", "text", "anemia", "diagnosis", "Anemia noted.", ("D64.9",))
    two = Fact("f2", "c1", "text", "nausea", "diagnosis", "Nausea noted.", ("R11.0",))
    assert facts_fingerprint([one, two]) == facts_fingerprint([two, one])  # order of the sample is not content
    edited = Fact("f2", "c1", "text", "nausea", "diagnosis", "Nausea noted.", ("R11.2",))
    assert facts_fingerprint([one, two]) != facts_fingerprint([one, edited])
    tax = Taxonomy.from_concepts("t", [Concept("A", "Alpha"), Concept("B", "Beta")])
    assert taxonomy_fingerprint(tax) != taxonomy_fingerprint(Taxonomy.from_concepts("t", [Concept("A", "Alpha")]))
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"weights")
    first = file_fingerprint(weights)
    weights.write_bytes(b"other weights")
    assert file_fingerprint(weights) != first and model_fingerprint("llama_cpp", "m", weights) == file_fingerprint(weights)
    assert model_fingerprint("openai", "Qwen/Qwen3-32B").startswith("name:")


def test_shipped_cpu_values_of_llm_chapters_are_exact():
    """llama.cpp is deterministic across processes: no cpu tolerance beyond float noise."""
    for chapter in ("01_readiness_gap", "02_main_results"):
        reg = C.load_regression(chapter)
        assert all(e.tolerance <= 1e-9 for e in reg.expected_for("cpu").values()), chapter


def test_the_html_check_folds_under_its_tally_and_opens_on_a_failure(regdir):
    passing = C.check({"count": 500}, "demo", "cpu", directory=regdir, save=False, quiet=True)._repr_html_()
    assert passing.startswith("<details><summary><b>Regression check: demo [profile cpu]</b>: 1 OK</summary>")
    failing = C.check({"count": 7}, "demo", "cpu", directory=regdir, save=False, quiet=True)._repr_html_()
    assert failing.startswith("<details open><summary>") and "1 FAIL" in failing


ROWS_FIXTURE = """\
chapter: rows
title: Rows chapter
command: make notebooks PROFILE={profile}
metrics:
  fincl/direct/r1: {description: Recall@1, precision: 3}
  fincl/parallel/r1: {description: Recall@1, precision: 3}
  fincl/parallel-diverse/r1: {description: Recall@1, precision: 3}
expected:
  cpu:
    fincl/direct/r1: 0.5
    fincl/parallel/r1: 0.25
    fincl/parallel-diverse/r1: 0.75
"""


def test_rows_a_chapter_was_asked_not_to_run_are_left_out_of_its_check(tmp_path):
    """Chapter 2's ``methods`` subset: the recorded values of a row it did not run are skipped, not failed; a row
    named alike (parallel-diverse beside parallel) and a produced value are still compared."""
    (tmp_path / "rows.yaml").write_text(ROWS_FIXTURE)
    ran = {"fincl/direct/r1": 0.5, "fincl/parallel-diverse/r1": 0.75}
    report = C.check(ran, "rows", "cpu", directory=tmp_path, save=False, quiet=True)
    assert {row.metric: row.status for row in report.rows}["fincl/parallel/r1"] == C.FAIL  # as before
    report = C.check(ran, "rows", "cpu", directory=tmp_path, save=False, quiet=True, left_out=["fincl/parallel"])
    assert {row.metric: row.status for row in report.rows} == {"fincl/direct/r1": C.OK,
                                                               "fincl/parallel-diverse/r1": C.OK}
    report.assert_ok()
    wrong = C.check({**ran, "fincl/parallel/r1": 0.3}, "rows", "cpu", directory=tmp_path, save=False, quiet=True,
                    left_out=["fincl/parallel"])
    assert {row.metric: row.status for row in wrong.rows}["fincl/parallel/r1"] == C.FAIL  # a value given is checked
