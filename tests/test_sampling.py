from fhs.data.facts import Fact
from fhs.data.sampling import sample_by_context


def make_facts(n_contexts, per_context):
    return [Fact(id=f"{c}-{i}", context_id=f"ctx{c}", modality="table", value="1", datatype="t", context="x", gold=("g",))
            for c in range(n_contexts) for i in range(per_context)]


def test_sample_keeps_whole_contexts_and_is_deterministic():
    facts = make_facts(20, 5)
    sample = sample_by_context(facts, 23, seed=1)
    contexts = {f.context_id for f in sample}
    assert all(sum(f.context_id == c for f in sample) == 5 for c in contexts)
    assert len(sample) == 25  # whole contexts until at least the target
    assert sample == sample_by_context(facts, 23, seed=1)
    assert sample != sample_by_context(facts, 23, seed=2)
    assert [f.id for f in sample] == [f.id for f in facts if f.context_id in contexts]  # original order


def test_no_target_returns_everything():
    facts = make_facts(3, 2)
    assert sample_by_context(facts, None) == facts
    assert sample_by_context(facts, 100) == facts


def test_a_context_that_would_overshoot_by_more_than_half_is_skipped():
    small = make_facts(10, 2)
    big = [Fact(id=f"big-{i}", context_id="big", modality="text", value="1", datatype="t", context="x", gold=("g",))
           for i in range(30)]
    for seed in range(5):
        sample = sample_by_context(small + big, 6, seed=seed)
        assert 6 <= len(sample) <= 9 and "big" not in {f.context_id for f in sample}


def test_when_no_context_is_small_enough_the_smallest_is_the_sample():
    facts = make_facts(1, 7) + [Fact(id=f"mid-{i}", context_id="mid", modality="text", value="1", datatype="t",
                                     context="x", gold=("g",)) for i in range(5)]
    sample = sample_by_context(facts, 2, seed=0)
    assert {f.context_id for f in sample} == {"mid"} and len(sample) == 5
