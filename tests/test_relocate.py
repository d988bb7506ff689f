"""Relocation of Spanish mentions into the English translation (fhs.data.relocate)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from fhs.data.relocate.align import AlignConfig, align_document
from fhs.data.relocate.cache import read_relocation_cache, relocate_cached, relocation_cache_path
from fhs.data.relocate.cognates import word_match
from fhs.data.relocate.contract import AlignedDocument, Relocation, RelocationTask, accept_span
from fhs.data.relocate.deterministic import DeterministicRelocator
from fhs.data.relocate.sentences import english_lines, split_spanish_sentences
from fhs.llm.contract import Request, Response
from fhs.run.relocation import RELOCATE_SCHEMA, LLMRelocator, load_prompt, parse_relocation_answer


def sentence_texts(text: str, **options) -> list[str]:
    return [text[s.start:s.end] for s in split_spanish_sentences(text, **options) if not s.paragraph_break]


# --- Spanish sentence splitting ------------------------------------------------------------


def test_split_at_period_before_capital_digit_and_quote():
    text = 'Tiene fiebre. 3 días después mejora. Dijo: "no". "Ya pasó" dijo. ¿Dolor? Sí.'
    assert sentence_texts(text) == [
        "Tiene fiebre.", "3 días después mejora.", 'Dijo: "no".', '"Ya pasó" dijo.', "¿Dolor?", "Sí.",
    ]


def test_no_split_before_lower_case_or_after_initials_and_abbreviations():
    text = ("Visto por el Dr. García y la Dra. Ruiz. Tratado con A.I.N.E. durante diez días. "
            "Firmado por J. Pérez. Masa de 6 cm. No hay adenopatías. Pesaba 50 g. El resto normal.")
    assert sentence_texts(text) == [
        "Visto por el Dr. García y la Dra. Ruiz.",
        "Tratado con A.I.N.E. durante diez días.",
        "Firmado por J. Pérez.",
        "Masa de 6 cm. No hay adenopatías.",  # "cm." never ends a sentence (the translation keeps them together)
        "Pesaba 50 g.",  # a lower-case letter after a number is a unit, not an initial
        "El resto normal.",
    ]


def test_line_breaks_end_sentences_and_blank_lines_become_paragraph_breaks():
    text = "Primera frase sin punto\nSegunda frase. Tercera.\n\n\nCuarta.\n"
    plain = split_spanish_sentences(text)
    assert [text[s.start:s.end] for s in plain] == ["Primera frase sin punto", "Segunda frase.", "Tercera.", "Cuarta."]
    with_breaks = split_spanish_sentences(text, paragraph_breaks=True)
    assert [s.paragraph_break for s in with_breaks] == [False, False, False, True, False]
    # a trailing blank line is not a paragraph break: nothing follows it
    assert len(split_spanish_sentences("Una.\n\n", paragraph_breaks=True)) == 1


def test_english_lines_drop_blank_lines_and_normalise_whitespace():
    assert english_lines("A  b.\n\n 1.\nC\td.\n") == ["A b.", "1.", "C d."]


# --- alignment -------------------------------------------------------------------------------

SPANISH = (
    "Varón de 66 años con dolor abdominal. Presenta fiebre de 39 grados y vómitos desde hace 3 días, "
    "con diarrea y malestar general intenso. Se diagnostica apendicitis aguda.\n\nEvolución favorable."
)
ENGLISH_SPLIT = (
    "A 66-year-old man with abdominal pain.\n"
    "He presented with a fever of 39 degrees and vomiting for 3 days.\n"
    "He also had diarrhea and intense general malaise.\n"
    "Acute appendicitis was diagnosed.\n1.\nFavorable evolution.\n"
)


def test_count_rule_aligns_line_by_line_only_when_counts_agree():
    segments = split_spanish_sentences(SPANISH, paragraph_breaks=True)
    lines = english_lines(ENGLISH_SPLIT)
    assert len(segments) == 5 and len(lines) == 6
    assert align_document(SPANISH, segments, lines, AlignConfig(method="count")) is None
    same = english_lines("A.\nB.\nC.\n1.\nD.")
    alignment = align_document(SPANISH, segments, same, AlignConfig(method="count"))
    assert alignment.beads == tuple(((i,), (i,)) for i in range(5))


def test_dynamic_programming_finds_a_sentence_translated_as_two_lines():
    segments = split_spanish_sentences(SPANISH, paragraph_breaks=True)
    lines = english_lines(ENGLISH_SPLIT)
    alignment = align_document(SPANISH, segments, lines, AlignConfig(method="dp"))
    assert alignment.beads == (((0,), (0,)), ((1,), (1, 2)), ((2,), (3,)), ((3,), (4,)), ((4,), (5,)))
    assert alignment.english_for([1]) == (1, 2)


def test_unknown_alignment_method_is_an_input_error():
    from fhs.core.errors import InputError
    with pytest.raises(InputError, match="align"):
        align_document(SPANISH, split_spanish_sentences(SPANISH), ["x"], AlignConfig(method="magic"))


# --- tasks: which sentence, which candidate --------------------------------------------------


def test_task_takes_the_aligned_lines_of_every_sentence_a_discontinuous_mention_touches():
    document = AlignedDocument.build("doc", SPANISH, ENGLISH_SPLIT)
    fiebre = SPANISH.index("fiebre")
    malestar = SPANISH.index("malestar general")
    task = document.task("fiebre malestar", [(fiebre, fiebre + 6), (malestar, malestar + 16)])
    assert task.scope == "sentence"
    assert task.candidate == ("He presented with a fever of 39 degrees and vomiting for 3 days. "
                              "He also had diarrhea and intense general malaise.")
    assert task.spanish_context.startswith("Presenta fiebre") and task.spanish_context.endswith("intenso.")
    # spans in two different sentences take both sentences and everything between them
    dolor = SPANISH.index("dolor")
    apendicitis = SPANISH.index("apendicitis")
    across = document.task("dolor apendicitis", [(dolor, dolor + 5), (apendicitis, apendicitis + 11)])
    assert across.english_lines == (0, 1, 2, 3)


def test_task_falls_back_to_the_whole_document_without_alignment():
    document = AlignedDocument.build("doc", SPANISH, ENGLISH_SPLIT, AlignConfig(method="count"))
    start = SPANISH.index("vómitos")
    task = document.task("vómitos", [(start, start + 7)])
    assert task.scope == "document"
    assert "1." not in task.candidate.split()  # paragraph stand-ins are not text
    assert task.candidate == " ".join(line for line in english_lines(ENGLISH_SPLIT) if line != "1.")


def test_offsets_outside_the_text_are_rejected():
    document = AlignedDocument.build("doc", SPANISH, ENGLISH_SPLIT)
    with pytest.raises(ValueError, match="outside"):
        document.task("x", [(len(SPANISH) - 1, len(SPANISH) + 5)])


# --- the acceptance rule ---------------------------------------------------------------------

CANDIDATE = "Ultrasound shows simple cortical cysts in the right kidney and a cyst in the left kidney."


def test_accept_span_returns_offsets_of_an_exact_substring():
    start, end = accept_span("cysts in the right kidney", CANDIDATE)
    assert CANDIDATE[start:end] == "cysts in the right kidney"


def test_accept_span_normalises_whitespace_and_edge_punctuation_only():
    start, end = accept_span('  "cysts  in the\nright kidney." ', CANDIDATE)
    assert CANDIDATE[start:end] == "cysts in the right kidney"
    assert accept_span("Cysts in the right kidney", CANDIDATE) is None  # case matters
    assert accept_span("cysts in right kidney", CANDIDATE) is None  # a paraphrase is not a substring
    assert accept_span("", CANDIDATE) is None


def test_accept_span_picks_the_occurrence_nearest_the_mention_position():
    early = accept_span("kidney", CANDIDATE, position=0.0)
    late = accept_span("kidney", CANDIDATE, position=1.0)
    assert early[0] == CANDIDATE.index("kidney") and late[0] == CANDIDATE.rindex("kidney")


def test_accept_span_requires_a_normalised_candidate():
    with pytest.raises(ValueError):
        accept_span("right", "the  right kidney")


# --- word matching and the deterministic relocator -------------------------------------------


@pytest.mark.parametrize("spanish, english", [
    ("quistes", "cysts"), ("hipertrofia", "hypertrophy"), ("estenosis", "stenosis"),
    ("neumonía", "pneumonia"), ("infección", "infection"), ("dolor", "pain"), ("riñón", "kidney"),
    ("derecha", "right"), ("II", "2"), ("obesidad", "obesity"), ("esófago", "esophagus"),
])
def test_word_match_recognises_cognates_and_lexicon_words(spanish, english):
    assert word_match(spanish, english) > 0


@pytest.mark.parametrize("spanish, english", [
    ("hipertensión", "hypotension"), ("derecho", "left"), ("dolor", "door"), ("2", "3"),
])
def test_word_match_rejects_look_alikes(spanish, english):
    assert word_match(spanish, english) == 0


def make_task(mention: str, candidate: str, scope: str = "sentence", position: float = 0.5) -> RelocationTask:
    return RelocationTask("doc", mention, "(contexto)", candidate, scope, position)


def test_deterministic_relocator_finds_a_reordered_phrase():
    relocation = DeterministicRelocator().relocate_one(
        make_task("quistes corticales simples en riñón derecho", CANDIDATE, position=0.3))
    assert relocation.status == "exact" and relocation.method == "deterministic"
    assert relocation.english == "simple cortical cysts in the right kidney"
    assert CANDIDATE[relocation.start:relocation.end] == relocation.english


def test_deterministic_relocator_answers_nothing_when_the_translation_lacks_the_mention():
    relocation = DeterministicRelocator().relocate_one(make_task("mareo", CANDIDATE))
    assert relocation == Relocation(None, None, None, "fallback-sentence", "deterministic", "sentence",
                                    relocation.note)
    assert relocation.note
    in_document = DeterministicRelocator().relocate_one(make_task("mareo", CANDIDATE, scope="document"))
    assert in_document.status == "fallback-document"
    empty = DeterministicRelocator().relocate_one(make_task("mareo", "", scope="document"))
    assert empty.status == "failed"


def test_deterministic_relocator_rejects_scattered_words():
    candidate = "The pain was finally controlled after the treatment of the lingual tumour was completed."
    assert not DeterministicRelocator().relocate_one(make_task("dolor lingual", candidate)).exact


def test_deterministic_relocator_does_not_cross_a_sentence_end():
    candidate = "He had severe pain. Abdominal examination was normal."
    assert not DeterministicRelocator().relocate_one(make_task("dolor abdominal", candidate)).exact


def test_deterministic_relocator_keeps_negating_prefixes_out():
    candidate = "A hard, non-painful mass of the tongue."
    relocation = DeterministicRelocator().relocate_one(make_task("dolorosa", candidate))
    assert relocation.english == "painful"


def test_deterministic_relocator_takes_optional_words_only_with_their_companions():
    candidate = "History of hypertension and diabetes."
    relocation = DeterministicRelocator().relocate_one(make_task("hipertensión arterial", candidate))
    assert relocation.english == "hypertension"
    assert not DeterministicRelocator().relocate_one(make_task("tensión arterial", candidate)).exact


def test_every_deterministic_answer_is_an_exact_substring():
    candidates = [CANDIDATE, "A 45-year-old woman with hypertension who reports intense headache and vomiting.",
                  "Colon adenocarcinoma was diagnosed.", "Acute appendicitis was diagnosed."]
    mentions = ["quistes", "riñón izquierdo", "cefalea", "vómitos", "adenocarcinoma de colon",
                "apendicitis aguda", "hipertensión", "colon"]
    relocator = DeterministicRelocator()
    for candidate in candidates:
        for relocation in relocator.relocate([make_task(m, candidate) for m in mentions]):
            if relocation.exact:
                assert candidate[relocation.start:relocation.end] == relocation.english


def test_deterministic_relocator_name_changes_with_its_configuration():
    from fhs.data.relocate.deterministic import DeterministicConfig
    assert DeterministicRelocator().name == DeterministicRelocator().name
    assert DeterministicRelocator().name != DeterministicRelocator(DeterministicConfig(width_slack=5)).name


# --- the LLM relocator with a scripted double ------------------------------------------------


class ScriptedLLM:
    """A test double of the ``fhs.llm.contract.LLM`` protocol: answers from a script, records requests."""

    name = "scripted/double"

    def __init__(self, answers: Sequence[str]) -> None:
        self.answers = list(answers)
        self.batches: list[list[Request]] = []

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        self.batches.append(list(requests))
        return [Response(text=self.answers.pop(0), model=self.name) for _ in requests]


def test_llm_relocator_accepts_a_verbatim_answer_and_builds_the_request():
    llm = ScriptedLLM(['{"english": "simple cortical cysts in the right kidney"}'])
    relocator = LLMRelocator(llm)
    task = make_task("quistes corticales simples en riñón derecho", CANDIDATE)
    [relocation] = relocator.relocate([task])
    assert relocation.status == "exact" and relocation.method == "llm"
    assert CANDIDATE[relocation.start:relocation.end] == "simple cortical cysts in the right kidney"
    [request] = llm.batches[0]
    assert request.temperature == 0.0 and request.max_tokens == 96
    assert request.schema == RELOCATE_SCHEMA and request.purpose == "relocate"
    prompt = request.messages[0].content
    for part in (task.mention, task.spanish_context, task.candidate):
        assert part in prompt


def test_llm_relocator_rejects_an_answer_that_is_not_a_substring():
    llm = ScriptedLLM(['{"english": "simple cortical cysts of the right kidney"}'])
    [relocation] = LLMRelocator(llm).relocate([make_task("quistes corticales", CANDIDATE)])
    assert relocation.status == "fallback-sentence" and relocation.english is None
    assert "not a substring" in relocation.note


@pytest.mark.parametrize("answer, note", [
    ("I think the phrase is cortical cysts", "malformed"),
    ('{"english": "cortical cysts"', "malformed"),
    ('{"phrase": "cortical cysts"}', "malformed"),
    ('{"english": 3}', "malformed"),
    ('{"english": null}', "null answer"),
])
def test_llm_relocator_survives_malformed_output(answer, note):
    [relocation] = LLMRelocator(ScriptedLLM([answer])).relocate([make_task("quistes", CANDIDATE)])
    assert not relocation.exact and note in relocation.note


def test_llm_answers_are_parsed_tolerantly():
    fenced = 'Sure.\n```json\n{"english": "right kidney"}\n```\nDone.'
    assert parse_relocation_answer(fenced) == ("right kidney", "")
    thinking = '<think>maybe {"english": "no"}</think> {"english": "left kidney"}'
    assert parse_relocation_answer(thinking) == ("left kidney", "")
    assert parse_relocation_answer('x {"english": "}{ kidney"} y {"english": "b"}') == ("}{ kidney", "")
    assert parse_relocation_answer("no object here")[0] is None


def test_llm_relocator_sends_batches_in_order():
    answers = ['{"english": "cortical cysts"}', '{"english": "left kidney"}', '{"english": null}']
    llm = ScriptedLLM(answers)
    tasks = [make_task(m, CANDIDATE) for m in ("quistes corticales", "riñón izquierdo", "mareo")]
    relocations = LLMRelocator(llm, batch_size=2).relocate(tasks)
    assert [len(batch) for batch in llm.batches] == [2, 1]
    assert [r.english for r in relocations] == ["cortical cysts", "left kidney", None]


def test_the_prompt_template_fills_every_field():
    template = load_prompt()
    filled = template.format(spanish_mention="M", spanish_context="C", english_text="E")
    assert "{" in filled and '"english"' in filled  # the JSON example survives formatting
    assert "{spanish" not in filled and "{english_text" not in filled


# --- the cache -------------------------------------------------------------------------------


class CountingRelocator:
    name = "counting-v1"
    method = "deterministic"

    def __init__(self) -> None:
        self.seen: list[RelocationTask] = []
        self.inner = DeterministicRelocator()

    def relocate(self, tasks: Sequence[RelocationTask]) -> list[Relocation]:
        self.seen.extend(tasks)
        return self.inner.relocate(tasks)


def test_cache_reuses_answers_for_identical_tasks_only(tmp_path):
    path = tmp_path / "relocation" / "x.jsonl"
    tasks = [make_task("quistes", CANDIDATE), make_task("riñón derecho", CANDIDATE)]
    relocator = CountingRelocator()
    first = relocate_cached(tasks, relocator, path)
    assert len(relocator.seen) == 2
    again = relocate_cached(tasks, relocator, path)
    assert again == first and len(relocator.seen) == 2
    changed = [tasks[0], make_task("riñón derecho", CANDIDATE + " More text.")]
    relocate_cached(changed, relocator, path)
    assert len(relocator.seen) == 3
    assert len(read_relocation_cache(path)) == 3  # old entries are kept
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.jsonl"]  # no temporary files left


def test_cache_ignores_damaged_lines(tmp_path):
    path = tmp_path / "c.jsonl"
    task = make_task("quistes", CANDIDATE)
    relocate_cached([task], CountingRelocator(), path)
    good = path.read_text(encoding="utf-8")
    bad_status = json.loads(good)
    bad_status["relocation"]["status"] = "maybe"
    path.write_text("not json\n" + json.dumps(bad_status) + "\n", encoding="utf-8")
    assert read_relocation_cache(path) == {}
    relocator = CountingRelocator()
    relocate_cached([task], relocator, path)
    assert len(relocator.seen) == 1


def test_cache_path_follows_fhs_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FHS_CACHE", str(tmp_path))
    path = relocation_cache_path("codiesp-test-dp", DeterministicRelocator())
    assert path.parent == tmp_path / "relocation"
    assert path.name.startswith("codiesp-test-dp--deterministic-") and path.suffix == ".jsonl"
    llm_path = relocation_cache_path("codiesp-test-dp", LLMRelocator(ScriptedLLM([])))
    assert "scripted_double" in llm_path.name and llm_path != path


@pytest.mark.model
def test_llm_relocator_with_a_real_model_keeps_only_exact_substrings(tmp_path):
    """SmolLM2-135M relocates the fixture's mentions; whatever it answers, only verbatim spans survive."""
    from fhs.data.datasets.codiesp import load_split
    from fhs.llm.cache import CachedLLM, ResponseCache
    from fhs.llm.factory import make_llm
    from fhs.llm.models import smollm2_path

    fixture = Path(__file__).parent / "fixtures"
    llm = CachedLLM(make_llm("llama_cpp", str(smollm2_path()), n_ctx=2048),
                    ResponseCache(tmp_path / "responses.sqlite"))
    split = load_split(fixture, None, relocator=LLMRelocator(llm), cache=tmp_path / "relocations.jsonl")
    assert split.stats["facts"] == len(split.all_facts) > 0
    for fact in split.facts:
        assert fact.metadata["relocation_method"] == "llm"
        assert fact.value in fact.sentence  # an exact substring of the aligned English text
    for fact in split.unrelocated:
        assert fact.metadata["relocated"] is False
    # a second pass is read back from the relocation cache: same spans, no new model calls
    again = load_split(fixture, None, relocator=LLMRelocator(llm), cache=tmp_path / "relocations.jsonl")
    assert [f.value for f in again.all_facts] == [f.value for f in split.all_facts]
