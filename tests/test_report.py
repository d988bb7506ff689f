"""fhs.book.report: the 'ours vs paper' table, the profile note and the figure helpers."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from fhs.book import report as R  # noqa: E402


class _Interval:  # what a bootstrap function elsewhere might return
    def __init__(self, value, low, high):
        self.value, self.low, self.high = value, low, high


def test_as_estimate_accepts_numbers_triples_and_duck_types():
    assert R.as_estimate(0.25) == R.Estimate(0.25)
    assert R.as_estimate((0.25, 0.2, 0.3)) == R.Estimate(0.25, 0.2, 0.3)
    assert R.as_estimate(_Interval(0.25, 0.2, 0.3)) == R.Estimate(0.25, 0.2, 0.3)
    assert R.as_estimate(None) is None
    with pytest.raises(ValueError):
        R.as_estimate((0.1, 0.2))


def test_estimate_rejects_inconsistent_intervals():
    with pytest.raises(ValueError, match="both ends"):
        R.Estimate(0.3, low=0.2)
    with pytest.raises(ValueError, match="does not contain"):
        R.Estimate(0.5, 0.1, 0.2)


def test_ours_vs_paper_gap_and_interval_columns():
    ours = {"R@1": (0.190, 0.160, 0.220), "MRR": (0.230, 0.210, 0.250), "Acc": 0.3}
    paper = {"R@1": 0.185, "MRR": 0.257}
    frame = R.ours_vs_paper(ours, paper)
    assert list(frame.columns) == ["metric", "ours", "paper", "gap", "paper in CI"]
    rows = frame.set_index("metric")
    assert rows.loc["R@1", "ours"] == "0.190 [0.160, 0.220]"
    assert rows.loc["R@1", "gap"] == f"{0.190 - 0.185:+.3f}"
    assert rows.loc["R@1", "paper in CI"] == "yes"  # 0.160 <= 0.185 <= 0.220
    assert rows.loc["MRR", "gap"] == f"{0.230 - 0.257:+.3f}"
    assert rows.loc["MRR", "paper in CI"] == "no"  # 0.257 > 0.250
    assert rows.loc["Acc", "paper"] == "–" and rows.loc["Acc", "gap"] == ""
    assert list(frame["metric"]) == ["R@1", "MRR", "Acc"]  # order of `ours`


def test_ours_vs_paper_without_intervals_drops_the_ci_column():
    frame = R.ours_vs_paper({"MRR": 0.2}, {"MRR": 0.257}, precision=2)
    assert list(frame.columns) == ["metric", "ours", "paper", "gap"]
    assert frame.iloc[0].tolist() == ["MRR", "0.20", "0.26", f"{0.2 - 0.257:+.2f}"]


def test_markdown_table_is_a_pipe_table_with_escaped_bars():
    frame = pd.DataFrame({"a": ["x|y"], "b": [1]})
    assert R.to_markdown(frame) == "| a | b |\n| --- | --- |\n| x\\|y | 1 |"


def test_html_table_escapes_and_carries_caption():
    markup = R.to_html(pd.DataFrame({"m": ["<b>"]}), caption="Table 4 & more")
    assert "&lt;b&gt;" in markup
    assert "<caption>Table 4 &amp; more</caption>" in markup
    assert markup.index("<caption>") < markup.index("<thead>")


def test_show_prints_markdown_outside_ipython(capsys):
    assert R.show(pd.DataFrame({"a": [1]}), caption="cap") is None
    assert capsys.readouterr().out.strip() == "| a |\n| --- |\n| 1 |\n\ncap"


def test_profile_note_warns_about_tiny_models_and_escapes_the_name():
    note = R.profile_note("cpu", "Qwen2.5-0.5B <q4>")
    assert 'class="admonition warning"' in note._repr_html_()
    assert "tiny model" in note._repr_html_()
    assert "Qwen2.5-0.5B &lt;q4&gt;" in note._repr_html_()
    assert "<" not in repr(note).replace("<q4>", "")  # the text form has no markup
    assert 'class="admonition note"' in R.profile_note("paper", "Qwen3-32B")._repr_html_()
    assert "custom" in repr(R.profile_note("custom", "m"))
    no_llm = R.profile_note("cpu")  # no model: deterministic numbers
    assert 'class="admonition note"' in no_llm._repr_html_()
    assert "No language model" in repr(no_llm) and "cpu" in repr(no_llm)


def test_plot_ours_vs_paper_draws_one_row_per_metric():
    R.use_style()
    assert matplotlib.rcParams["axes.spines.top"] is False
    ax = R.plot_ours_vs_paper({"R@1": (0.19, 0.16, 0.22), "MRR": 0.23}, {"R@1": 0.185})
    at = {t.get_text(): y for t, y in zip(ax.get_yticklabels(), ax.get_yticks())}
    assert at["R@1"] > at["MRR"]  # the first metric is drawn on top
    assert [h.get_label() for h in ax.get_legend().legend_handles] == ["ours (95% CI)", "paper"]


def test_paper_values_checks_lengths():
    assert R.paper_values(["a", "b"], [0.1, None]) == {"a": 0.1, "b": None}
    with pytest.raises(ValueError, match="2 names but 1"):
        R.paper_values(["a", "b"], [0.1])


def test_ours_vs_paper_with_no_paper_value_shows_no_empty_paper_column():
    frame = R.ours_vs_paper({"MRR": 0.2, "R@1": 0.1}, {"MRR": None})
    assert list(frame.columns) == ["metric", "ours"]


def test_an_interval_equal_to_its_estimate_but_for_rounding_is_accepted():
    """One context: the bootstrap's ends equal the paired mean up to the last bit (an adapter's one-table spec)."""
    assert R.Estimate(0.5333333333333334, 0.5333333333333333, 0.5333333333333333).value == 0.5333333333333334
    with pytest.raises(ValueError, match="does not contain"):
        R.Estimate(0.6, 0.5, 0.55)
