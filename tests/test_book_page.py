"""A chapter page's opening and closing (``fhs.book.page``) and the seeded-run estimates every page shows
(``fhs.book.across_runs``)."""

import pytest

from fhs.book.across_runs import across, across_differences
from fhs.book.page import open_page
from fhs.core.errors import InputError
from fhs.run.evaluate import Interval
from fhs.run.profiles import get_profile


def test_the_chapter_takes_the_profiles_seeds_and_its_sample_limits(tmp_path):
    paper = open_page("02_main_results", "paper", tmp_path, server={"base_url": "http://a/v1,http://b/v1",
                      "cache_dir": tmp_path / "cache"}, sample={"llm_limit": 7, "llm_fraction": 0.5, "runs": 2,
                      "bootstrap_resamples": 50}, configurations={"codiesp": "x"})
    assert paper.seeds == tuple(get_profile("paper").seeds[:2]) and paper.choice.seed == paper.seeds[0]
    assert paper.study.profile.llm_facts == 7 and paper.study.profile.llm_fraction == 0.5
    assert paper.choice.base_urls == ("http://a/v1", "http://b/v1")
    assert paper.choice.cache_path == tmp_path / "cache" / "responses.sqlite"
    assert paper.interval == {"resamples": 50, "seed": 20260724} and paper.study.configuration("codiesp") == "x"
    assert paper.choice.profile == get_profile("paper")  # the model's profile is the named one, unlimited
    assert open_page("07_case_studies", "paper", tmp_path, seeds=(0,)).seeds == (0,)
    assert open_page("02_main_results", "smoke", tmp_path).seeds == tuple(get_profile("smoke").seeds)
    assert open_page("01_readiness_gap", "cpu", tmp_path, llm=False).choices == ()


def test_a_mapping_parameter_names_its_unknown_keys(tmp_path):
    with pytest.raises(InputError, match=r"'base_ur'.*server.*use backend, model, base_url"):
        open_page("02_main_results", "cpu", tmp_path, server={"base_ur": "http://a/v1"})


def test_the_close_checks_records_and_says_the_page_time(tmp_path, monkeypatch, capsys):
    """A protocol check prints its values but records nothing; a real close records them and fails on a miss."""
    monkeypatch.chdir(tmp_path)  # the results land under runs/<profile>/results/ here
    wrong = {"fincl/facts": -1}
    tiny = open_page("01_readiness_gap", "cpu", tmp_path, sample={"protocol_check": True}, llm=False)
    tiny.close(wrong)
    out = capsys.readouterr().out
    assert "PROTOCOL CHECK: 1 metrics produced" in out and "page time:" in out
    assert not (tmp_path / "runs").exists()
    real = open_page("01_readiness_gap", "cpu", tmp_path, llm=False)
    with pytest.raises(AssertionError, match="fincl/facts"):
        real.close(wrong)
    assert (tmp_path / "runs" / "cpu" / "results" / "01_readiness_gap.json").is_file()


def test_one_run_shows_its_interval_and_several_their_mean_and_std():
    assert across([0.5]).std is None and across([0.25, 0.75]).std == pytest.approx(0.3535533905932738)
    one = across_differences([Interval(0.1, -0.2, 0.3)])
    assert (one.value, one.low, one.high, one.std) == (0.1, -0.2, 0.3, None)
    several = across_differences([Interval(0.1, -0.2, 0.3), Interval(0.3, 0.0, 0.5)])
    assert several.value == pytest.approx(0.2) and several.low is None and several.std == pytest.approx(0.1414213562)
