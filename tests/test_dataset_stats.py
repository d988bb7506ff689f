"""dataset_stats on a hand-checkable set of facts."""

from fhs.data.datasets.stats import dataset_stats
from fhs.data.facts import Fact


def fact(i: int, context_id: str, modality: str, gold: str) -> Fact:
    return Fact(id=f"f{i}", context_id=context_id, modality=modality, value="1", datatype="monetaryItemType",
                context="...", gold=(gold,))


def test_dataset_stats_counts_by_hand():
    facts = [fact(0, "t1", "table", "A"), fact(1, "t1", "table", "B"), fact(2, "t1", "table", "A"),
             fact(3, "t2", "table", "C"), fact(4, "p1", "text", "A")]
    stats = dataset_stats(facts)
    assert stats["n_facts"] == 5
    assert stats["n_contexts"] == 3
    assert stats["facts_by_modality"] == {"table": 4, "text": 1}
    assert stats["contexts_by_modality"] == {"table": 2, "text": 1}
    assert stats["facts_per_table_context"] == {"mean": (3 + 1) / 2, "median": (3 + 1) / 2}
    assert stats["n_gold_concepts"] == 3


def test_dataset_stats_of_nothing():
    assert dataset_stats([])["facts_per_table_context"] == {"mean": 0.0, "median": 0.0}
