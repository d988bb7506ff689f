from fhs.data.evidence import direct_query, evidence_block, located_query, location
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


def _cell(row_header: str = "", column_header: str = "") -> Fact:
    return Fact(id="f", context_id="c", modality="table", value="5", datatype="monetaryItemType",
                context="Balance sheet | Total assets | 5 | Total liabilities | 3", gold=("Assets",),
                row_header=row_header, column_header=column_header)


def test_a_table_cell_is_queried_by_its_value_datatype_and_headers_not_the_whole_table():
    fact = _cell("Total  assets", "December 31, 2024")
    assert located_query(fact) == "5 monetaryItemType Total assets December 31, 2024"
    assert located_query(_cell("Total assets")) == "5 monetaryItemType Total assets"
    assert located_query(_cell(column_header="2024")) == "5 monetaryItemType 2024"
    assert "liabilities" in direct_query(fact) and "liabilities" not in located_query(fact)


def test_a_text_mention_is_queried_by_its_sentence_and_a_sentence_that_is_the_context_changes_nothing():
    fact = _text_fact("The exam showed hepatomegaly.", "Admitted for fever. The exam showed hepatomegaly. Discharged.")
    assert located_query(fact) == "hepatomegaly diagnosis The exam showed hepatomegaly."
    whole = _text_fact("The exam showed hepatomegaly.", "The exam showed hepatomegaly.")
    assert located_query(whole) == direct_query(whole)


def test_a_fact_without_headers_or_sentence_issues_the_direct_query():
    assert located_query(_cell()) == direct_query(_cell()) and location(_cell()) == ""
    headers_on_text = Fact(id="f", context_id="c", modality="text", value="5", datatype="d", context="x 5 y",
                           gold=("g",), row_header="Total assets")
    assert located_query(headers_on_text) == direct_query(headers_on_text)  # a text fact's location is its sentence


def test_a_long_location_is_clipped_like_the_context():
    fact = _cell("word " * 5000)
    assert len(located_query(fact, context_chars=100)) < 130 and " ... " in located_query(fact, context_chars=100)
