"""Chapter 09's helpers on a user's spec file: the oracle's runs, the ceiling table, the curves, the check."""

from __future__ import annotations

import math

import pytest

from fhs.book import check as C
from fhs.book.chapters import stage_ceilings
from fhs.book.study import Study
from test_oracle_model import spec_file  # noqa: F401  (the fixture: five facts over six concepts)


def test_crossing_interpolates_between_measured_levels():
    assert stage_ceilings.crossing([0, 0.5, 1], [0.8, 0.4, 0.0], 0.2) == pytest.approx(0.75)
    assert stage_ceilings.crossing([0, 0.5, 1], [0.8, 0.6, 0.5], 0.2) is None
    assert stage_ceilings.crossing([0, 1], [0.1, 0.0], 0.2) == 0.0


def test_the_chapter_runs_on_a_spec_file(spec_file, tmp_path):  # noqa: F811
    study = Study.for_profile("cpu", tmp_path / "runs", progress=False)
    name = str(spec_file)
    facts = {name: stage_ceilings.oracle_facts(study, name)}
    assert len(facts[name]) == 5  # the paper profile takes every fact of a user's set
    runs = stage_ceilings.oracle_runs(study, [name], facts, hypothesis_noise=[1.0], verdict_noise=[1.0])
    assert runs[(name, "hypotheses", 0.0)] is runs[(name, "verdicts", 0.0)]
    rows = {key: stage_ceilings.stage_rows(run) for key, run in runs.items()}
    stages = {name: rows[(name, "hypotheses", 0.0)]}
    assert all(r["pool_rank"] is not None and r["correct"] for r in stages[name])  # a tiny taxonomy: all in reach
    baselines = {(name, m): study.run(name, m, facts=facts[name]) for m in ("direct", "oracle")}
    table = stage_ceilings.ceiling_table(study, [name], baselines, stages, {"resamples": 50, "seed": 1})
    assert list(table["row"]) == ["direct retrieval", "gold-query probe", *stage_ceilings.STAGES.values()]
    assert set(table["dataset"]) == {"small"}  # runs go by the spec's name, not its path
    labels = {name: "small"}
    frames = {("small", kind): stage_ceilings.curves(rows, name, kind) for kind in ("hypotheses", "verdicts")}
    assert list(frames[("small", "hypotheses")]["noise"]) == [0.0, 1.0]
    assert frames[("small", "hypotheses")]["recall@1"].iloc[1] < frames[("small", "hypotheses")]["recall@1"].iloc[0]
    direct = {"small": baselines[(name, "direct")].metrics}
    crossings = stage_ceilings.crossing_rows(frames, direct)
    assert len(crossings) == 4 and len(stage_ceilings.crossing_lines(crossings)) == 1
    figure = stage_ceilings.noise_figure(frames, direct, ["small"])
    assert len(figure.axes) == 2 and len(figure.axes[1].lines) == 6  # 2 curves, 2 direct, 2 fused-pool lines
    results = stage_ceilings.stage_ceiling_metrics(labels, stages, baselines, frames)
    assert results["small/facts"] == 5 and results["small/selected/accuracy"] == 1.0
    assert "small/hypotheses-1/recall@1" in results and not any(math.isnan(v) for v in results.values())
    report = C.check(results, chapter="09_stage_ceilings", profile="cpu", save=False)
    assert {row.status for row in report.rows} == {"NEW"}  # a dataset the file has never seen


def test_the_ceiling_tables_caption_names_the_papers_row_only_where_there_is_one():
    from fhs.book.chapters.stage_ceilings import ceiling_caption

    assert "paper" not in ceiling_caption(["ghg-report"])
    assert ceiling_caption(["ghg-report", "fincl"]).endswith("the paper's FHS")
