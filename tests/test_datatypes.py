"""A fact datatype no concept has is said once per datatype, with its count and the datatypes that exist."""

from fhs.data.facts import Fact
from fhs.data.taxonomies.datatypes import check_datatypes
from fhs.data.taxonomy import Concept, Taxonomy

TAXONOMY = Taxonomy("ghg", (Concept("Scope1", "Scope 1 emissions", datatype="emissionsItemType"),
                            Concept("Target", "Reduction target", datatype="percentItemType")))


def fact(n: int, datatype: str) -> Fact:
    return Fact(f"f{n}", "c", "table", "1", datatype, "Scope 1 | 1", ("Scope1",))


def test_unmatched_datatype_is_warned_once_with_count_and_existing_types(capsys):
    facts = [fact(1, "monetary"), fact(2, "monetary"), fact(3, "emissionsItemType"), fact(4, "")]
    assert check_datatypes(facts, TAXONOMY, "my-report") == {"monetary": 2}
    assert check_datatypes(facts, TAXONOMY, "my-report") == {"monetary": 2}  # said once
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1
    assert "my-report: 2 fact(s) have datatype 'monetary'" in lines[0]
    assert "emissionsItemType, percentItemType" in lines[0]


def test_a_taxonomy_without_datatypes_filters_nothing(capsys):
    plain = Taxonomy("plain", (Concept("Scope1", "Scope 1 emissions"),))
    assert not check_datatypes([fact(1, "monetary")], plain, "x")
    assert capsys.readouterr().err == ""


def test_parse_failure_advice_names_the_model_in_process_and_the_server_otherwise(capsys):
    from fhs.run.health import warn_about

    stages = {"hypothesis": {"calls": 4, "parse_failures": 3, "fallbacks": 3, "truncations": 2}}
    none = {"count": 0}
    (local,) = warn_about(stages, none, 4, in_process=True)
    (served,) = warn_about(stages, none, 4)
    assert "server" not in local and "in-process model" in local
    assert "check the server" in served
