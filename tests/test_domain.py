"""Domain files: the bundled two load, bad files fail with the file and key path, profiles match as documented."""

import re

import pytest

from fhs.core.errors import InputError
from fhs.data.domain import available_domains, load_domain
from fhs.data.taxonomy import Concept

SIX = ("FAMILY", "ROLE", "EVENT", "QUALIFIER", "SCOPE", "TEMPORAL")

GOOD = """
name: toy
taxonomy: Toy
evidence: a toy fact
dimensions:
  - {name: FAMILY, gloss: the family, examples: [A, B]}
  - {name: ROLE, gloss: the role, verifier_gloss: the judged role}
operators:
  - {name: direct_label, gloss: named directly}
profile:
  qualifier:
    categories:
      net: [net]
      with_complication: [with complications]
      fair_value: [fair value]
  family:
    from_metadata: chapter
    categories:
      heart: [heart]
"""


def write(tmp_path, text):
    path = tmp_path / "domain.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", ["us-gaap", "icd-10-cm"])
def test_bundled_domains_have_the_six_dimensions_in_order(name):
    domain = load_domain(name)
    assert domain.dimension_names == SIX
    assert all(d.gloss and d.verifier_gloss and d.examples for d in domain.dimensions)
    assert domain.operator_names == ("direct_label", "row_column", "relative_time", "roll_forward",
                                     "dimensional", "aggregation", "rate", "schedule")
    assert name in available_domains()


def test_profile_dimensions_of_the_bundled_domains():
    assert [p.name for p in load_domain("us-gaap").profile] == ["family", "qualifier", "scope", "temporal", "aggregation"]
    icd = load_domain("icd-10-cm")
    assert [p.name for p in icd.profile] == ["family", "qualifier", "scope", "temporal"]
    assert icd.profile[0].from_metadata == "chapter"
    assert len(icd.profile[1].categories) >= 20


def test_load_by_path_and_glosses(tmp_path):
    domain = load_domain(write(tmp_path, GOOD))
    assert domain.dimension_names == ("FAMILY", "ROLE")
    assert domain.dimensions[0].verifier_gloss == "the family"  # defaults to the generator gloss
    assert domain.dimensions[1].verifier_gloss == "the judged role"
    assert domain.dimensions[0].examples == ("A", "B")


def test_profile_matching_rules(tmp_path):
    domain = load_domain(write(tmp_path, GOOD))

    def profile(concept):
        return dict(domain.profile_of(concept))

    # whole words or all tokens: "FairValueNet" (camel case) matches both phrases
    assert profile(Concept("AssetsFairValueNet", "Assets Fair Value Net"))["qualifier"] == ("fair_value", "net")
    # not inside other words
    assert profile(Concept("Internet", "Internet revenue"))["qualifier"] == ()
    # a phrase with a function word must occur verbatim: "without complications" is not "with complications"
    assert profile(Concept("E11.9", "Type 2 diabetes without complications"))["qualifier"] == ()
    assert profile(Concept("E11.8", "Type 2 diabetes with complications"))["qualifier"] == ("with_complication",)
    # metadata wins for a from_metadata dimension; phrases are the fallback
    assert profile(Concept("I21", "Heart attack", metadata={"chapter": "9"}))["family"] == ("chapter:9",)
    assert profile(Concept("I21", "Heart attack"))["family"] == ("heart",)


def test_a_profile_is_remembered_per_concept_as_shown(tmp_path):
    domain = load_domain(write(tmp_path, GOOD))
    net = Concept("AssetsNet", "Assets Net")
    assert domain.profile_of(net) is domain.profile_of(Concept("AssetsNet", "Assets Net"))
    # the same id shown with another label is matched again, not served the old profile
    edited = Concept("AssetsNet", "Assets at fair value")
    assert dict(domain.profile_of(edited))["qualifier"] == ("fair_value", "net") != dict(domain.profile_of(net))["qualifier"]
    assert domain == load_domain(write(tmp_path, GOOD))  # what it remembers is not part of the domain's equality


def test_equal_profiles_of_different_concepts_are_held_once(tmp_path):
    """The memo keeps one entry per concept but one copy per distinct profile (bounded memory)."""
    domain = load_domain(write(tmp_path, GOOD))
    first = domain.profile_of(Concept("AssetsNet", "Assets Net"))
    second = domain.profile_of(Concept("OtherAssetsNet", "Other Assets Net"))
    assert first == second and first is second
    assert domain.profile_of(Concept("AssetsFairValue", "Assets at fair value")) != first


@pytest.mark.parametrize("text", ["non-current assets", "assets, net", "net-assets", "café net", "netassets",
                                  "fair  value", "fair\tvalue", "un fair value", "fairvalue", "x-net-y", "(net)"])
def test_the_word_check_before_each_search_changes_no_match(tmp_path, text):
    from fhs.core.text import token_set

    domain = load_domain(write(tmp_path, GOOD))
    lowered = " ".join(text.lower().split())
    for dimension in domain.profile:
        for _, phrases in dimension.categories:
            for phrase in phrases:
                words = frozenset(re.findall(r"[a-z0-9]+", lowered))
                assert phrase.matches(lowered, token_set(text), words) == phrase.matches(lowered, token_set(text))


def test_icd_profile_reads_laterality_and_encounter():
    domain = load_domain("icd-10-cm")
    profile = dict(domain.profile_of(Concept(
        "S72.001A", "Fracture of unspecified part of neck of right femur, initial encounter for closed fracture")))
    assert profile["scope"] == ("right",)
    assert profile["temporal"] == ("initial_encounter",)
    assert "closed" in profile["qualifier"]


@pytest.mark.parametrize("text, field", [
    ("name: toy\n", "dimensions"),
    (GOOD.replace("name: FAMILY", "name: family"), "dimensions[0].name"),
    (GOOD.replace("gloss: the role, ", ""), "dimensions[1].gloss"),
    (GOOD.replace("name: ROLE", "name: FAMILY"), "dimensions[1].name"),
    (GOOD.replace("name: direct_label", "name: other"), "operators"),
    (GOOD.replace("net: [net]", "net: []"), "profile.qualifier.categories.net"),
    (GOOD.replace("net: [net]", "net: net"), "profile.qualifier.categories.net"),
    (GOOD.replace("taxonomy: Toy\n", ""), "taxonomy"),
    ("- just a list\n", None),
])
def test_malformed_files_name_the_file_and_key(tmp_path, text, field):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as error:
        load_domain(path)
    assert str(path) in str(error.value)
    if field:
        assert f"field '{field}'" in str(error.value)


def test_unknown_name_and_bad_yaml(tmp_path):
    with pytest.raises(InputError, match="unknown domain"):
        load_domain("no-such-domain")
    with pytest.raises(InputError, match="not valid YAML"):
        load_domain(write(tmp_path, "name: [unclosed\n"))
    with pytest.raises(InputError, match="no such domain file"):
        load_domain(tmp_path / "missing.yaml")
