"""A chapter's set-up (``fhs.book.setup``) and the seeded-run estimates every page shows (``fhs.book.seeded``)."""

import pytest

from fhs.book.seeded import across, across_differences
from fhs.book.setup import llm_chapter
from fhs.run.evaluate import Interval
from fhs.run.profiles import get_profile


def test_the_chapter_takes_the_profiles_seeds_and_its_sample_limits(tmp_path):
    paper = llm_chapter("paper", tmp_path, llm_limit=7, llm_fraction=0.5, runs=2, base_url="http://a/v1,http://b/v1",
                        cache_dir=tmp_path / "cache", bootstrap_resamples=50, configurations={"codiesp": "x"})
    assert paper.seeds == tuple(get_profile("paper").seeds[:2]) and paper.choice.seed == paper.seeds[0]
    assert paper.study.profile.llm_facts == 7 and paper.study.profile.llm_fraction == 0.5
    assert paper.choice.base_urls == ("http://a/v1", "http://b/v1")
    assert paper.choice.cache_path == tmp_path / "cache" / "responses.sqlite"
    assert paper.interval == {"resamples": 50, "seed": 20260724} and paper.study.configuration("codiesp") == "x"
    assert paper.choice.profile == get_profile("paper")  # the model's profile is the named one, unlimited
    assert llm_chapter("paper", tmp_path, seeds=(0,)).seeds == (0,)
    assert llm_chapter("smoke", tmp_path).seeds == tuple(get_profile("smoke").seeds)


def test_one_run_shows_its_interval_and_several_their_mean_and_std():
    assert across([0.5]).std is None and across([0.25, 0.75]).std == pytest.approx(0.3535533905932738)
    one = across_differences([Interval(0.1, -0.2, 0.3)])
    assert (one.value, one.low, one.high, one.std) == (0.1, -0.2, 0.3, None)
    several = across_differences([Interval(0.1, -0.2, 0.3), Interval(0.3, 0.0, 0.5)])
    assert several.value == pytest.approx(0.2) and several.low is None and several.std == pytest.approx(0.1414213562)
