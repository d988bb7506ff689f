"""Prompt order (shared parts first), token budgets and clipping (JSON parsing is tested in test_jsonout.py)."""

from __future__ import annotations

import dataclasses
import json
import random
from collections.abc import Callable

import pytest

from fhs.data.domain import load_domain
from fhs.data.facts import Fact
from fhs.data.relocate.contract import RelocationTask
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.contract import Message, Request, Response
from fhs.llm.kv_states import common_prefix
from fhs.llm.line_tokens import LineCounter, LineTokenizer
from fhs.llm.tokens import CharEstimate, count_messages, default_counter
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext, call_record
from fhs.method.decomposed import SLOTS
from fhs.method.feedback_refine import feedback_request
from fhs.method.free_text import free_text_request
from fhs.method.hypotheses import Hypothesis, generator_prompt, hypothesis_requests
from fhs.method.parallel import parallel_requests
from fhs.method.parallel_diverse import diverse_request
from fhs.method.prompting import (Budget, PromptTooLong, clip, context_ladder, distinct_rungs, fact_messages,
                                  fit_to_budget)
from fhs.method.revision import Tally, revision_request
from fhs.method.rewrite import Query, rewrite_request
from fhs.method.selector import selector_request
from fhs.method.self_refine import critique_request
from fhs.method.verifier import build_window, verifier_request
from fhs.retrieval.bm25 import Ranking, RetrievalConfig, Retriever
from fhs.run.relocation import LLMRelocator
from fhs.run.runner import run_method
from scripted_llm import ScriptedLLM

DOMAIN = load_domain("us-gaap")
TAXONOMY = Taxonomy.from_concepts("toy", [
    Concept("Revenues", "Revenues", "Amount of revenue recognized from goods sold and services rendered.",
            "monetaryItemType"),
    Concept("RevenueNotFromContractWithCustomerOther", "Revenue Not From Contract With Customer Other",
            "Amount of revenue classified as other, not from contracts with customers.", "monetaryItemType"),
    Concept("CostOfRevenue", "Cost Of Revenue", "Cost of goods and services sold.", "monetaryItemType"),
])
IDS = [c.id for c in TAXONOMY]
TABLE = ("2024 | 2023 | 2022 (In millions) Electric — Other revenues | $25 | $22 | $19 "
         "Gas — Other revenues | $11 | $8 | $7")
# Two facts of one table: everything up to the value must be the same prompt text.
FACT_A = Fact(id="a", context_id="t", modality="table", value="19", datatype="monetaryItemType", context=TABLE,
              gold=("RevenueNotFromContractWithCustomerOther",), row_header="Electric — Other revenues",
              column_header="2022 | (In millions)")
FACT_B = Fact(id="b", context_id="t", modality="table", value="8", datatype="monetaryItemType", context=TABLE,
              gold=("RevenueNotFromContractWithCustomerOther",), row_header="Gas — Other revenues",
              column_header="2023 | (In millions)")
H1 = Hypothesis(dimensions=tuple((d, "Revenues" if d == "FAMILY" else "UNRESOLVED") for d in DOMAIN.dimension_names),
                retrieval_query="Amount of other revenue.")
H2 = Hypothesis(dimensions=tuple((d, "Other revenue" if d == "ROLE" else "UNRESOLVED") for d in DOMAIN.dimension_names),
                retrieval_query="Other revenues for the period.", sample_index=1)
CONFIG = FHSConfig(context_chars=2_000)


def ctx(config: FHSConfig) -> MethodContext:
    return MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()), domain=DOMAIN,
                         config=config)


def last_query() -> Query:
    return Query("19 monetaryItemType other revenue", "model", Ranking(ids=tuple(IDS), scores=(3.0, 2.0, 1.0)))


WINDOW = build_window(IDS, TAXONOMY, DOMAIN, k_v=3)
READING = "Other revenue of the period."
# Every stage's request for a fact under a configuration.
STAGES: dict[str, Callable[[Fact, FHSConfig], Request]] = {
    "generator": lambda f, c: hypothesis_requests(f, c, DOMAIN)[0],
    "verifier": lambda f, c: verifier_request(f, H1, WINDOW, TAXONOMY, DOMAIN, c),
    "selector": lambda f, c: selector_request(f, IDS, TAXONOMY, DOMAIN, c)[0],
    "free-text": lambda f, c: free_text_request(f, DOMAIN, c),
    "instructed": lambda f, c: parallel_requests(f, DOMAIN, c, instructed=True)[1],
    "decomposed": lambda f, c: rewrite_request("decomposed", f, DOMAIN, c, purpose="decomposed", fields=SLOTS),
    "diverse": lambda f, c: diverse_request(f, DOMAIN, c, ["Other revenue of the electric segment."], 1),
    "critique": lambda f, c: critique_request(f, ctx(c), READING, last_query())[0],
    "feedback": lambda f, c: feedback_request(f, ctx(c), READING, last_query())[0],
    "revise": lambda f, c: revision_request(f, H1, "ROLE", Tally(1, 2, 0), WINDOW.ids,
                                            {"Revenues": {"ROLE": "contradict"}}, TAXONOMY, DOMAIN, c),
}


def chat_text(request: Request) -> str:
    """The request as the server's chat template lays it out (what a prefix cache sees)."""
    return "".join(f"<|im_start|>{m.role}\n{m.content}<|im_end|>\n" for m in request.messages)


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_two_facts_of_one_table_share_instructions_and_context_before_any_fact_text(stage):
    a, b = (chat_text(STAGES[stage](fact, CONFIG)) for fact in (FACT_A, FACT_B))
    shared = common_prefix(a, b)
    context_line = f"Source context: {TABLE}\n"
    # the fixed instructions (task, rules, answer format) come before the evidence ...
    assert a.index("Task: ") < a.index("Answer with JSON") < a.index(context_line)
    # ... the whole source context is shared, and the first difference is the located value itself
    assert a.index(context_line) + len(context_line) < shared
    assert shared == a.index("\nValue: ") + len("\nValue: ")


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_the_authors_order_puts_the_fields_and_context_before_the_task(stage):
    text = chat_text(STAGES[stage](FACT_A, CONFIG.replace(prompt_order="evidence-first")))
    assert text.index("Value: 19") < text.index("Source context:") < text.index("Answer with JSON")
    assert "Task: " not in text.split("Source context:")[0]


def test_the_verifier_calls_of_one_fact_share_the_candidates_before_the_hypothesis():
    first = chat_text(verifier_request(FACT_A, H1, WINDOW, TAXONOMY, DOMAIN, CONFIG))
    second = chat_text(verifier_request(FACT_A, H2, WINDOW, TAXONOMY, DOMAIN, CONFIG))
    shared = common_prefix(first, second)
    assert first.index("[3] ") < first.index("Interpretation of the located value (UNRESOLVED") < shared


def test_relocation_shows_the_english_document_before_the_mention():
    english = "Patient with simple cortical cysts in the right kidney and hepatomegaly."
    one = RelocationTask("doc", "quistes corticales", "Quistes corticales en riñón derecho.", english, "document")
    two = RelocationTask("doc", "hepatomegalia", "Se observa hepatomegalia.", english, "document")
    relocator = LLMRelocator(ScriptedLLM({}))
    a, b = (relocator.request(task).messages[-1].content for task in (one, two))
    shared = common_prefix(a, b)
    assert a.index("Answer with JSON") < a.index(english) < a.index(english) + len(english) < shared
    assert shared <= a.index("Spanish sentence: ") + len("Spanish sentence: ")
    authors = LLMRelocator(ScriptedLLM({}), order="evidence-first").request(one).messages[-1].content
    assert authors.index("Spanish sentence:") < authors.index(english) < authors.index("Answer with JSON")


# ---- budgets in tokens -----------------------------------------------------------------

def messages(n: int) -> tuple[Message, ...]:
    return (Message("user", "word " * n),)


def test_fit_to_budget_takes_the_first_rung_that_fits_in_tokens_and_says_which():
    counter = CharEstimate(5.0)  # "word " is one token
    tokens = lambda n: count_messages(counter, messages(n))  # noqa: E731
    fitted = fit_to_budget(messages, [{"n": 100}, {"n": 50}, {"n": 10}], Budget(tokens(60), 0), what="w",
                           counter=counter)
    assert (fitted.rung, fitted.setting, fitted.tokens) == (1, {"n": 50}, tokens(50))
    assert fitted.shortened == {"rung": 1, "of": 2, "n": 50, "tokens": tokens(50), "limit": tokens(60)}
    first = fit_to_budget(messages, [{"n": 100}, {"n": 50}], Budget(tokens(100), 0), what="w", counter=counter)
    assert first.rung == 0 and first.shortened is None
    with pytest.raises(PromptTooLong, match=r"fact x: \d+ prompt tokens even at the shortest of 2 budget rungs"):
        fit_to_budget(messages, [{"n": 100}, {"n": 50}], Budget(tokens(49), 0), what="fact x", counter=counter)


def test_counting_line_by_line_gives_the_whole_texts_count():
    """The budget counter's shortcut is exact: real prompts of every stage, and adversarial whitespace."""
    counter = default_counter()
    lines = LineCounter(counter)
    texts = [m.content for stage in STAGES.values() for fact in (FACT_A, FACT_B) for m in stage(fact, CONFIG).messages]
    rng = random.Random(7)
    atoms = ["word", " word", "  ", "\n", "\n\n", " \n", "\t", ":\n", "12", "[3]", " -", "é", "日本", "'s", "—",
             "$1,229", "   - x", "\n \n", "!!", "\r\n", "\xa0", "\n\xa0x", "\r", " \r\n ",
             "]", "] ", "[17] ", "]]", "a]", " ]", "]\n"]
    texts += ["".join(rng.choice(atoms) for _ in range(rng.randint(1, 40))) for _ in range(300)]
    for text in texts:
        whole = counter.count(text)
        # an estimate rounds each line up, so it may only over-count
        assert lines.count(text) == whole if counter.exact else lines.count(text) >= whole, repr(text)
    if counter.exact:  # the token ids too, for measuring shared prefixes (dev/prefix_reuse.py)
        ids = LineTokenizer(counter.tokenize)
        assert all(ids(text) == counter.tokenize(text) for text in texts)


class Spy:
    """A counter that records what it was asked to count."""

    name, exact = "spy", True

    def __init__(self, bytes_bound: bool) -> None:
        self.bytes_bound, self.asked = bytes_bound, []

    def count(self, text: str) -> int:
        self.asked.append(text)
        return len(text.split())


def test_a_prompt_whose_bytes_fit_is_not_counted_and_one_near_its_budget_is():
    short = [{"n": 10}, {"n": 5}]
    for bound, counted in ((True, False), (False, True)):
        spy = Spy(bound)
        fitted = fit_to_budget(messages, short, Budget(1_000, 0), what="w", counter=spy)
        assert (fitted.rung, bool(spy.asked)) == (0, counted)
    spy = Spy(True)  # 300 words: 1,500 bytes, over a budget of 1,000, so it is counted (and fits)
    fitted = fit_to_budget(messages, [{"n": 300}], Budget(1_000, 0), what="w", counter=spy)
    assert spy.asked and (fitted.rung, fitted.tokens) == (0, count_messages(Spy(False), messages(300)))


def test_the_bytes_shortcut_chooses_the_rung_counting_would_on_real_prompts():
    counter = default_counter()
    long_fact = dataclasses.replace(FACT_A, context=" ".join(f"line {i}: revenue {i} | {i + 1}" for i in range(1_500)))
    for fact in (FACT_A, FACT_B, long_fact):
        for budget in (200, 2_000, 4_000, 8_000, 30_000):
            build = lambda context_chars: fact_messages(generator_prompt(fact, DOMAIN, context_chars))  # noqa: E731
            ladder = context_ladder(12_000)
            results = []
            for shortcut in (True, False):
                try:
                    fitted = fit_to_budget(build, ladder, Budget(budget, 0), what="w",
                                           counter=counter if shortcut else _NoBound(counter))
                    results.append((fitted.rung, fitted.messages))
                except PromptTooLong:
                    results.append(None)
            assert results[0] == results[1], (fact.id, budget)


class _NoBound:
    """``counter`` without its bytes bound: every prompt is counted."""

    def __init__(self, counter) -> None:
        self.counter, self.name, self.exact = counter, counter.name, counter.exact

    def count(self, text: str) -> int:
        return self.counter.count(text)


def test_the_window_less_the_reply_caps_the_stage_budget():
    assert Budget(30_000, 512).limit == 30_000
    assert Budget(30_000, 512, window=40_960).limit == 30_000
    assert Budget(30_000, 2_816, window=32_768).limit == 29_952
    assert "32,768-token context less 2,816 for the reply" in Budget(30_000, 2_816, window=32_768).describe()
    assert distinct_rungs([{"c": 2}, {"c": 2}, {"c": 1}]) == [{"c": 2}, {"c": 1}]


@pytest.mark.model
def test_a_prompt_over_its_budget_is_shortened_and_marked_in_its_call_record():
    long_fact = dataclasses.replace(FACT_A, context=" ".join(f"line {i}: revenue {i} | {i + 1}" for i in range(1_500)))
    config = CONFIG.replace(context_chars=12_000)
    full = hypothesis_requests(long_fact, config, DOMAIN)[0]
    assert full.shortened is None and "line 1499" in full.messages[-1].content
    at_8000 = count_messages(default_counter(), fact_messages(generator_prompt(long_fact, DOMAIN, 8_000)))
    request = hypothesis_requests(long_fact, config.replace(generator_prompt_tokens=at_8000), DOMAIN)[0]
    assert request.shortened == {"rung": 1, "of": 5, "context_chars": 8_000, "tokens": at_8000, "limit": at_8000}
    assert request.messages == fact_messages(generator_prompt(long_fact, DOMAIN, 8_000))
    record = call_record(request, Response(text="{}"), parsed=True)
    assert record["shortened"] == request.shortened
    assert "shortened" not in call_record(full, Response(text="{}"), parsed=True)


def test_a_fact_whose_prompt_fits_no_rung_fails_with_a_message_and_nothing_is_sent(tmp_path):
    long_fact = Fact(id="long", context_id="t", modality="table", value="19", datatype="monetaryItemType",
                     context=TABLE, gold=("Revenues",), row_header="Electric — Other revenues")
    llm = ScriptedLLM({"free-text": [json.dumps({"query": "other revenue"})]})
    context = MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()), llm=llm,
                            domain=DOMAIN, config=CONFIG.replace(context_tokens=700, max_tokens_hypothesis=600))
    from fhs.run.runner import AllFactsFailed

    with pytest.raises(AllFactsFailed, match="all 1 facts failed"):  # the run's only fact: no metric
        run_method([long_fact], "free-text", context, tmp_path / "run", progress=False)
    assert llm.requests == []
    line = json.loads((tmp_path / "run" / "records.jsonl").read_text().splitlines()[0])
    assert "fact long: the free-text prompt:" in line["failed"]
    assert "100 tokens (the model's 700-token context less 600 for the reply)" in line["failed"]


def test_clip():
    assert clip("a  b\nc", 10) == "a b c"
    assert clip("abcdefghij", 6) == "abc..."
    assert clip("abc", 0) == ""


@pytest.mark.model
def test_the_vocabulary_tokenizes_as_llama_cpp_pythons_own_call():
    """QwenVocab calls llama.cpp's tokenizer directly (a buffer a byte long): the same ids as
    ``Llama.tokenize``, on empty, whitespace, non-ASCII and long text."""
    from fhs.llm.tokens import QwenVocab

    vocab = QwenVocab(copies=1)
    llama = vocab._free.get()
    vocab._free.put(llama)
    texts = ["", " ", "\n\n", "héllo wörld ✓ 中文 🙂", "[12] A01.1 | Paratyphoid fever A\n" * 40,
             "Revenue From Contract With Customer Excluding Assessed Tax " * 300]
    for text in texts:
        own = list(llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))
        assert vocab.tokenize(text) == own
        assert vocab.count(text) == len(own)


# ---- real data: the paper's selector over 200 candidates fits a 32k window --------------------

@pytest.mark.model
@pytest.mark.data
@pytest.mark.parametrize("dataset", ["fincl", "codiesp"])
def test_a_real_selector_prompt_of_200_candidates_fits_a_32k_window_counted_exactly(dataset):
    from fhs.llm.tokens import QwenVocab
    from fhs.run.inputs import load_experiment

    experiment = load_experiment(dataset, progress=False)
    domain = load_domain(experiment.spec.domain)
    fact = max(experiment.facts, key=lambda f: len(f.context))  # the longest source context
    # the worst case: the 200 concepts with the longest labels and definitions
    longest = sorted(experiment.taxonomy, key=lambda c: (-(len(c.label) + min(len(c.definition), 320)), c.id))
    ids = [c.id for c in longest[:200]]
    config = FHSConfig(context_tokens=32_768)  # the paper's budgets and 200 candidates
    request, fitted = selector_request(fact, ids, experiment.taxonomy, domain, config)
    exact = count_messages(QwenVocab(), request.messages)
    assert fitted.tokens == exact <= 32_768 - config.max_tokens_selector
    assert exact <= config.selector_prompt_tokens
    assert request.messages[-1].content.count("\n[") == 200
