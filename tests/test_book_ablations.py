"""Chapter 03's row functions ask the study for the right runs: methods, datasets, selector off, shared dev run."""

from pathlib import Path

from fhs.book.ablations import (DEV_TAG, beta_on_development, free_text_verifier, sampling_pilot_table,
                                window_sizes)
from fhs.book.study import Run
from fhs.method.config import FHSConfig
from test_ablations import gold_behind, overtaken
from test_sampling_pilot import diverse_record, fhs_record


class FakeStudy:
    """Stands in for ``Study``: records which runs were asked for and hands back prepared records."""

    def __init__(self, records):
        self.records = records
        self.asked = []

    def run_llm(self, dataset, method, model, *, config=None, tag=""):
        self.asked.append((dataset, method, config, tag))
        records = self.records[(dataset, method)]
        return memory_run(dataset, method, records(config) if callable(records) else records)


def memory_run(dataset, method, records):
    """A run whose records live in memory: full records serve as their own summaries."""
    run = Run(dataset, method, Path("."), records, {})
    run.__dict__["records"] = records  # fills the cached property instead of reading a file
    return run


def test_rows_run_their_methods_with_the_selector_off_and_share_the_development_run():
    base = FHSConfig()
    study = FakeStudy({
        ("fincl", "parallel-verified"): [gold_behind(3, "t")],
        ("ixbrl-dev", "fhs"): [overtaken("d1"), overtaken("d2")],
        ("ixbrl-dev", "parallel-diverse"): [diverse_record("d1", "table", [(["g"], ["a"])])],
        ("fincl", "fhs"): lambda config: [gold_behind(config.k_v, "t")],
    })
    assert free_text_verifier(study, "fincl", None, base).records[0]["id"] == "t"
    test_run = memory_run("fincl", "fhs", [gold_behind(5, "t1")])
    chosen, rows = beta_on_development(study, "ixbrl-dev", test_run, None, base, grid=(0.0, 0.05, 0.6))
    assert chosen.beta == 0.05 and [r["beta"] for r in rows] == [0.05, 0.6]
    study.records[("ixbrl-dev", "fhs")] = [fhs_record("d1", "table", [(0, "definition", ["g"])])]
    table = sampling_pilot_table(study, "ixbrl-dev", None, base)
    assert table["facts"] == 1 and table["depth"] == base.k
    kv = window_sizes(study, "fincl", None, base, sizes=(5, 10))
    assert [r["k_v"] for r in kv] == [5, 10]
    assert all(config.selector is False for _, _, config, _ in study.asked)
    dev_tags = [tag for dataset, method, _, tag in study.asked if (dataset, method) == ("ixbrl-dev", "fhs")]
    assert dev_tags == [DEV_TAG, DEV_TAG]
    assert [(m, t) for d, m, _, t in study.asked if d == "fincl" and m == "fhs"] == [("fhs", "kv10"), ("fhs", "kv5")]
