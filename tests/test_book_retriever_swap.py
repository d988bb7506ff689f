"""Chapter 05's module on runs built in memory: the gap per retriever, the method rows, margins and swaps."""

import matplotlib

matplotlib.use("Agg")

import pytest  # noqa: E402

from book_records import fact, memory_run  # noqa: E402
from fhs.book.chapters import retriever_swap as R  # noqa: E402
from fhs.paper import RETRIEVER_SWAP  # noqa: E402

INTERVAL = {"resamples": 50, "seed": 1}
RETRIEVERS = ["bm25", "dense"]


def seeded_runs():
    """FHS ranks the gold first under both retrievers; one-pass third under bm25 and second under dense."""
    ranks = {("bm25", "fhs"): 1, ("dense", "fhs"): 1, ("bm25", "structured"): 3, ("dense", "structured"): 2,
             ("bm25", "direct"): 4, ("dense", "direct"): 4}
    return {("fincl", r, m): [memory_run("fincl", m, [fact("a", rank, correct=rank == 1)]) for _ in range(2)]
            for (r, m), rank in ranks.items()}


def test_the_gap_rows_add_the_papers_bm25_rows_after_ours():
    readiness = {("fincl", r, m): memory_run("fincl", m, [fact("a", 1 if m == "oracle" else 5)])
                 for r in RETRIEVERS for m in ("direct", "oracle")}
    rows = R.gap_rows(readiness)
    assert [(row["retriever"], row["query"]) for row in rows][:4] == [
        ("bm25", "raw fact"), ("bm25", "gold-query probe"), ("paper (fintagging), bm25", "raw fact"),
        ("paper (fintagging), bm25", "gold-query probe")]
    assert rows[4]["retriever"] == "dense" and rows[4]["mrr"] == 0.2
    checked = R.retriever_swap_metrics(readiness, {}, {})
    assert checked["fincl/dense/oracle/recall@1"] == 1.0 and checked["fincl/bm25/direct/mrr"] == 0.2
    assert len(R.readiness_figure(readiness, ["fincl"], RETRIEVERS).axes) == 1


def test_margins_and_swaps_are_paired_per_run_and_carry_the_papers_values():
    seeded = seeded_runs()
    rows = R.method_rows(seeded, INTERVAL)
    assert rows[0]["method"] == "fhs" and rows[0]["mrr"].value == 1.0 and rows[0]["mrr"].std == 0.0
    found, margin_rows = R.margins(seeded, ["fincl"], RETRIEVERS, INTERVAL)
    assert found[("fincl", "bm25", "mrr")].value == pytest.approx(1 - 1 / 3)
    assert found[("fincl", "dense", "accuracy")].value == 1.0
    assert margin_rows[0]["paper Δ mrr"] == RETRIEVER_SWAP["fhs_margin"]["bm25"]["mrr"]
    swaps, swap_rows = R.swap_deltas(seeded, ["fincl"], RETRIEVERS, INTERVAL)
    assert swaps[("fincl", "structured", "dense")].value == pytest.approx(1 / 2 - 1 / 3)
    assert [row["swap"] for row in swap_rows] == ["dense − bm25"] * 3
    checked = R.retriever_swap_metrics({}, found, swaps)
    assert checked["fincl/dense/fhs_margin/mrr"] == pytest.approx(0.5)
    assert checked["fincl/fhs/dense_minus_bm25/mrr"] == 0.0
    assert len(R.margin_figure(found, ["fincl"], RETRIEVERS).axes) == 1
    assert R.mean_of([memory_run("fincl", "x", [fact("a", 1)])], "accuracy", INTERVAL).value == 1.0


def test_a_dataset_the_paper_never_ran_gets_no_paper_rows_columns_or_marks():
    """An adapter's spec: the paper's BM25 rows, Table 17's margins and deltas and the figure's squares belong to
    the paper's benchmarks, so none of them stands beside it."""
    seeded = {("ghg", r, m): runs for (_, r, m), runs in seeded_runs().items()}
    readiness = {("ghg", r, m): memory_run("ghg", m, [fact("a", 1)]) for r in RETRIEVERS for m in ("direct", "oracle")}
    assert [row["retriever"] for row in R.gap_rows(readiness)] == ["bm25", "bm25", "dense", "dense"]
    found, margin_rows = R.margins(seeded, ["ghg"], RETRIEVERS, INTERVAL)
    _, swap_rows = R.swap_deltas(seeded, ["ghg"], RETRIEVERS, INTERVAL)
    assert not [key for row in margin_rows + swap_rows for key in row if key.startswith("paper")]
    figure = R.margin_figure(found, ["ghg"], RETRIEVERS)
    assert [line.get_label() for line in figure.axes[0].get_lines() if line.get_label() == "paper"] == []


def test_the_margin_figure_draws_an_interval_equal_to_its_mean_but_for_rounding():
    """One context: the bootstrap's ends equal the mean up to the last bit, on either side (a one-table spec)."""
    from fhs.book.report import Estimate

    value = 0.5333333333333334
    found = {("ghg", r, "mrr"): Estimate(value, 0.5333333333333335, 0.5333333333333335) for r in RETRIEVERS}
    assert len(R.margin_figure(found, ["ghg"], RETRIEVERS).axes) == 1


def test_the_dense_index_is_built_without_a_bar_above_the_first_table(monkeypatch):
    """A cold build embeds each taxonomy in the chapter's lead cell: a progress bar there printed a line every
    half minute above the first table (the first-screen rule failed on the cold build); the table gives the time."""
    from types import SimpleNamespace

    import numpy as np

    from fhs.retrieval.dense import DenseRetriever
    from fhs.retrieval.encoders import DEFAULT_MODEL
    from fhs.run import inputs

    seen = []

    class Built(DenseRetriever):
        def __init__(self) -> None:
            self.progress = True
            self.build_info = {"cache": "built", "seconds": 1.0}
            self._matrix = np.zeros((3, 4), dtype=np.float32)

        def warm_up(self) -> DenseRetriever:
            seen.append(self.progress)
            return self

    monkeypatch.setattr(inputs, "cached_retriever", lambda *args, **kw: Built())
    taxonomy = type("Taxonomy", (list,), {"name": "toy"})(["a", "b", "c"])
    experiment = SimpleNamespace(taxonomy=taxonomy, spec=SimpleNamespace(taxonomy="toy"))
    study = SimpleNamespace(experiment=lambda name: experiment,
                            profile=SimpleNamespace(dense_model_for=lambda name: DEFAULT_MODEL))
    rows = R.dense_index_rows(study, ["toy"])
    assert seen == [False] and rows[0]["concepts"] == 3
