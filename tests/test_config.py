"""FHSConfig: paper defaults, the structured preset, validation, round trips."""

import pytest

from fhs.method.config import FHSConfig
from fhs.retrieval.bm25 import RetrievalConfig


def test_paper_defaults():
    c = FHSConfig()
    assert (c.num_hypotheses, c.temperature, c.top_p, c.k, c.kappa, c.beta, c.w_cov, c.k_v, c.scan) == \
        (2, 0.8, 1.0, 200, 60, 0.6, 1.0, 10, 60)
    assert (c.fusion, c.normalize, c.renderings, c.label_on_text) == ("sum", True, ("label", "definition"), False)
    assert (c.scoring, c.fill, c.window, c.selector) == ("paper", "mean", "profile", True)
    assert c.verify


def test_structured_preset_is_one_greedy_hypothesis_without_verifier():
    c = FHSConfig.structured()
    assert (c.num_hypotheses, c.temperature, c.top_p, c.beta) == (1, 0.0, 1.0, 0.0)
    assert not c.verify
    assert FHSConfig.structured(seed=3).seed == 3


@pytest.mark.parametrize("change", [
    {"fusion": "max"}, {"scoring": "lenient"}, {"fill": "median"}, {"window": "random"},
    {"renderings": ()}, {"renderings": ("title",)}, {"num_hypotheses": 0}, {"beta": -1.0},
    {"normalize_over": "all"},
])
def test_invalid_values_are_rejected(change):
    with pytest.raises(ValueError):
        FHSConfig(**change)


def test_round_trip_and_retrieval_config():
    c = FHSConfig(beta=0.2, renderings=("definition",))
    assert FHSConfig.from_dict(c.to_dict()) == c
    with pytest.raises(ValueError, match="unknown"):
        FHSConfig.from_dict({"betta": 1})
    r = FHSConfig(k=50, w_cov=0.0).retrieval_config(RetrievalConfig(k1=1.2))
    assert (r.top_k, r.w_cov, r.k1) == (50, 0.0, 1.2)


def test_named_configurations_keep_the_paper_as_default_and_offer_the_authors_codiesp_runs():
    from fhs.core.errors import InputError
    from fhs.method.config import DEFAULT_CONFIG, NAMED_CONFIGS

    assert DEFAULT_CONFIG == "paper" and FHSConfig.named("paper") == FHSConfig()
    authors = FHSConfig.named("codiesp-authors")
    assert (authors.window, authors.k_v, authors.scoring, authors.fill) == ("rank", 10, "strict", "zero")
    budgets = FHSConfig(context_chars=2_000, max_tokens_verifier=1_200)
    over = budgets.with_named("codiesp-authors")  # a profile's budgets survive
    assert (over.context_chars, over.max_tokens_verifier, over.window) == (2_000, 1_200, "rank")
    assert set(NAMED_CONFIGS) >= {"paper", "codiesp-authors"}
    with pytest.raises(InputError, match="codiesp-authors"):
        FHSConfig.named("codiesp-paper")
