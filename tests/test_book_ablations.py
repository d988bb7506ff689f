"""Chapter 03's row functions ask the study for the right runs: methods, datasets, selector off, shared dev run."""

from pathlib import Path

from fhs.book.chapters.ablations import (DEV_TAG, beta_on_development, free_text_verifier, sampling_pilot_table,
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


def test_seeded_rows_are_averaged_by_key_with_a_std_where_runs_differ():
    from fhs.book.chapters.ablations import over_seeds

    seeds = [[{"k_v": 5, "facts": 2, "mrr": 0.5, "label": "a"}, {"k_v": 10, "facts": 2, "mrr": 0.25, "label": "b"}],
             [{"k_v": 10, "facts": 2, "mrr": 0.75, "label": "b"}, {"k_v": 5, "facts": 2, "mrr": 0.5, "label": "a"}]]
    rows = over_seeds(seeds, "k_v")
    assert [r["k_v"] for r in rows] == [5, 10] and [r["label"] for r in rows] == ["a", "b"]
    assert rows[0]["mrr"] == 0.5 and rows[0]["mrr (std)"] == 0.0 and rows[0]["facts"] == 2
    assert rows[1]["mrr"] == 0.5 and abs(rows[1]["mrr (std)"] - 0.3535533905932738) < 1e-12
    assert over_seeds([seeds[0]], "k_v") == [dict(r) for r in seeds[0]]  # one run: its own rows, no std


def test_seeded_tables_run_each_seed_and_choose_one_beta():
    from dataclasses import dataclass

    from fhs.book.chapters.ablations import beta_over_seeds, pilot_over_seeds, windows_over_seeds

    @dataclass(frozen=True)
    class Choice:
        seed: int

    base = FHSConfig()
    study = FakeStudy({
        ("ixbrl-dev", "fhs"): [overtaken("d1"), overtaken("d2")],
        ("ixbrl-dev", "parallel-diverse"): [diverse_record("d1", "table", [(["g"], ["a"])])],
        ("fincl", "fhs"): lambda config: [gold_behind(config.k_v, "t")],
    })
    choices = [Choice(0), Choice(1)]
    test_runs = [memory_run("fincl", "fhs", [gold_behind(5, "t1")])] * 2
    chosen, rows = beta_over_seeds(study, "ixbrl-dev", test_runs, choices, base, grid=(0.0, 0.6))
    assert chosen.beta in (0.0, 0.6) and rows[0]["beta"] == chosen.beta
    study.records[("ixbrl-dev", "fhs")] = [fhs_record("d1", "table", [(0, "definition", ["g"])])]
    arms, difference = pilot_over_seeds(study, "ixbrl-dev", choices, base)
    assert [a["arm"] for a in arms] == ["factorized", "diverse"] and difference["facts"] == 1
    windows = windows_over_seeds(study, "fincl", choices, base, sizes=(5, 10))
    assert [w["k_v"] for w in windows] == [5, 10]
    assert sum(1 for dataset, method, _, tag in study.asked if tag == "kv10") == 2  # once per seed
