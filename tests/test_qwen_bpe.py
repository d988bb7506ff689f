"""Qwen's vocabulary from the shipped merges (fhs.llm.qwen_bpe): llama.cpp's counts and ids, without llama.cpp."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from fhs.llm import tokens
from fhs.llm.qwen_bpe import QwenBPE

ROOT = Path(__file__).resolve().parent.parent
# counts and first ids as llama.cpp gives them for the Qwen GGUF (QwenVocab)
KNOWN = [("Hello world", 2, [9707, 1879]),
         ("NetIncomeLoss | Net Income (Loss) Attributable to Parent\n", 15, [6954, 58898, 39838]),
         ("  don't  stop\n\n  x²  ", 10, [220, 1513, 944]),
         ("El paciente presentó fiebre 38,5ºC y disnea.", 17, [6582, 72412, 3042]),
         ("中文 测试 123456", 10, [104811, 98313, 66635]),
         ("[12] us-gaap:Revenues | Revenues | monetary", 16, [58, 16, 17])]


@pytest.fixture(scope="module")
def bpe() -> QwenBPE:
    return QwenBPE()


@pytest.mark.parametrize("text,count,first", KNOWN)
def test_the_shipped_merges_count_as_llama_cpp_does(bpe, text, count, first):
    assert bpe.count(text) == count
    assert bpe.tokenize(text)[:3] == first and len(bpe.tokenize(text)) == count


def test_a_base_install_counts_with_the_shipped_merges_not_an_estimate(monkeypatch):
    """Without llama-cpp-python the default counter is the vocabulary's merges, exact, not characters / 3."""
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import llama_cpp raises ImportError
    monkeypatch.setattr(tokens, "_DEFAULT", [])
    counter = tokens.default_counter()
    assert isinstance(counter, QwenBPE) and counter.exact
    assert counter.count(KNOWN[1][0]) == KNOWN[1][1]


def test_a_model_without_a_cached_tokenizer_counts_with_the_qwen_vocabulary(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(tokens, "_DEFAULT", [QwenBPE()])
    assert isinstance(tokens.counter_for("Qwen/Qwen3-32B"), QwenBPE)


def test_a_cached_model_tokenizer_is_used_where_present(monkeypatch, tmp_path):
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, models, pre_tokenizers

    word = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    word.pre_tokenizer = pre_tokenizers.Whitespace()
    folder = tmp_path / "models--Org--Tiny" / "snapshots" / "abc"
    folder.mkdir(parents=True)
    word.save(str(folder / "tokenizer.json"))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    counter = tokens.counter_for("Org/Tiny")
    assert isinstance(counter, tokens.ModelTokens) and counter.count("a b a c") == 4


@pytest.mark.model
def test_the_shipped_merges_agree_with_llama_cpp_on_prompts_and_odd_text(bpe):
    """Every prompt template, and random text of letters, digits, marks, spaces and line breaks."""
    vocab = tokens.QwenVocab()
    texts = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "fhs" / "method" / "prompts").rglob("*.txt"))]
    rng = random.Random(7)
    alphabet = "aZ9 \n\t\r'’-_.,;:!?()[]{}|/\\\"éñ中ß²½ºΩ😀\u0301\u00a0\u2028"
    texts += ["".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 80))) for _ in range(2000)]
    for text in texts:
        assert bpe.tokenize(text) == vocab.tokenize(text), repr(text[:80])


@pytest.mark.model
def test_the_shipped_file_is_the_ggufs_merges():
    from dev import qwen_merges

    assert qwen_merges.main(["--check"]) == 0


@pytest.mark.model
def test_a_plan_counts_the_same_tokens_without_llama_cpp(bpe):
    """A base install's plan (the shipped merges) against llama.cpp's vocabulary: the same totals."""
    from fhs.plan.dry_run import PlannedRun, dry_run
    from fhs.run.profiles import get_profile
    from test_plan import fixture_experiment

    runs = [PlannedRun("02", "toy", method) for method in ("direct", "fhs", "structured")]
    experiment = fixture_experiment()

    def totals(counter):
        rows = dry_run(runs, get_profile("paper"), lambda name: experiment, sample=3, counter=counter, progress=False)
        return [(row.prompt_tokens, row.output_tokens) for row in rows]

    assert totals(bpe) == totals(tokens.QwenVocab())
