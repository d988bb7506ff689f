import pytest

from fhs.core.text import STOPWORDS, camel_split, join_tokens, normalize_token, token_set, tokenize


def test_camel_split_handles_acronyms_and_digits():
    assert camel_split("AssetsHeldForSale") == "Assets Held For Sale"
    assert camel_split("EPSBasic") == "EPS Basic"
    assert camel_split("Level3Assets") == "Level3 Assets"


def test_plain_words_appear_twice_once_per_source_string():
    # original string tokens, then the camel-split string's tokens
    assert tokenize("net revenue") == ["net", "revenue", "net", "revenue"]


def test_camel_case_name_emits_whole_token_then_parts():
    assert tokenize("AccountsPayable") == ["accountspayable", "account", "payable"]


def test_plural_rule_then_stopwords():
    assert normalize_token("Liabilities") == "liability"
    assert normalize_token("Assets") == "asset"
    assert normalize_token("Loss") == "loss"  # -ss is kept
    assert normalize_token("gas") == "gas"  # too short for the plural rule
    assert normalize_token("The") is None
    # the stopword check runs after the plural rule: "this" -> "thi" survives
    assert normalize_token("this") == "thi"
    assert "thi" not in STOPWORDS


def test_token_set_and_join():
    assert token_set("Share-Based Compensation") == {"share", "based", "compensation"}
    assert join_tokens(["Nonvested Shares", "Equity"]) == "nonvested share nonvested share equity equity"


def test_token_set_word_by_word_is_the_set_of_tokenize():
    """token_set splits each word's camel case alone; the set must be tokenize's on any text."""
    import random

    rng = random.Random(3)
    pieces = ["EPS", "Basic", "eps", "IDs", "iPhone", "ABCd", "x1Y2", "Assets", "HeldForSale", "this", "policies",
              "glass", "US", "GAAP", "10K", "aB", "-", " ", ".", "/", "(", "1,229,202", "\u00e9t\u00e9", "\n"]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 12)))
        assert token_set(text) == frozenset(tokenize(text)), text


@pytest.mark.data
def test_token_set_is_the_set_of_tokenize_on_real_queries():
    from fhs.data.evidence import direct_query
    from fhs.run.inputs import load_experiment

    for name in ("fincl", "codiesp"):
        for fact in load_experiment(name, limit=300, progress=False).facts:
            text = direct_query(fact)
            assert token_set(text) == frozenset(tokenize(text))
