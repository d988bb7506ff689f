from fhs.data.evidence import evidence_block
from fhs.data.facts import Fact


def _text_fact(sentence: str, context: str) -> Fact:
    return Fact(id="f", context_id="c", modality="text", value="hepatomegaly", datatype="diagnosis",
                context=context, gold=("R16.0",), sentence=sentence)


def test_a_sentence_that_is_the_whole_context_is_shown_once():
    line = "The exam showed  hepatomegaly."
    block = evidence_block(_text_fact(line, "The exam showed hepatomegaly."))
    assert "Sentence:" not in block
    assert block.count("hepatomegaly.") == 1


def test_a_sentence_inside_a_longer_context_keeps_its_own_line():
    block = evidence_block(_text_fact("The exam showed hepatomegaly.",
                                      "Admitted for fever. The exam showed hepatomegaly. Discharged."))
    assert "Sentence: The exam showed hepatomegaly." in block
    assert block.index("Source context:") < block.index("Value:") < block.index("Sentence:")


def test_the_context_comes_before_the_fields_and_the_authors_order_is_kept_behind_a_flag():
    fact = Fact(id="f", context_id="c", modality="table", value="5", datatype="monetaryItemType",
                context="Total assets | 5", gold=("Assets",), row_header="Total assets", column_header="2024")
    assert evidence_block(fact).split("\n") == [
        "Input type: table", "Source context: Total assets | 5", "",
        "Value: 5", "Datatype: monetaryItemType", "Row context: Total assets", "Column context: 2024"]
    assert evidence_block(fact, order="evidence-first").split("\n") == [
        "Value: 5", "Datatype: monetaryItemType", "Input type: table", "Row context: Total assets",
        "Column context: 2024", "Source context: Total assets | 5"]
