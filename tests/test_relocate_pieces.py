"""Discontinuous mentions relocated piece by piece, a user's lexicon file, and CodiEsp's procedure track."""

from __future__ import annotations

from pathlib import Path

import pytest

from fhs.core.errors import InputError
from fhs.data.datasets.codiesp import load_split
from fhs.data.relocate.contract import RelocationTask
from fhs.data.relocate.deterministic import DeterministicRelocator
from fhs.data.relocate.pieces import PIECE_JOIN
from fhs.data.relocate.user_lexicon import read_lexicon_file
from fhs.data.taxonomy import Concept, Taxonomy

SPANISH = ("Varón de 60 años con diverticulitis. Se practicó una resección quirúrgica del colon sigmoide "
           "sin complicaciones. Se realizó una ecografía abdominal.\n")
ENGLISH = ("60-year-old male with diverticulitis.\nThe sigmoid colon underwent a resection without complications.\n"
           "An abdominal ultrasound was performed.\n")


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))


def span(word: str) -> str:
    start = SPANISH.index(word)
    return f"{start} {start + len(word)}"


def corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "codiesp" / "test"
    (folder / "text_files").mkdir(parents=True, exist_ok=True)
    (folder / "text_files_en").mkdir(exist_ok=True)
    (folder / "text_files" / "S1.txt").write_text(SPANISH, encoding="utf-8")
    (folder / "text_files_en" / "S1.txt").write_text(ENGLISH, encoding="utf-8")
    rows = [
        ("PROCEDIMIENTO", "0dtn", "resección sigmoide", f"{span('resección')};{span('sigmoide')}"),
        ("PROCEDIMIENTO", "bw40zzz", "ecografía abdominal", span("ecografía abdominal")),
        ("PROCEDIMIENTO", "0wjg4zz", "laparoscopia", span("diverticulitis")),  # not in the taxonomy below
        ("DIAGNOSTICO", "k57.32", "diverticulitis", span("diverticulitis")),
    ]
    (folder / "testX.tsv").write_text("".join(f"S1\t{label}\t{code}\t{text}\t{offsets}\n"
                                              for label, code, text, offsets in rows), encoding="utf-8")
    return tmp_path


TAXONOMY = Taxonomy.from_concepts("pcs", [
    Concept("0DTN0ZZ", "Resection of Sigmoid Colon, Open Approach", datatype="procedure"),
    Concept("0DTN4ZZ", "Resection of Sigmoid Colon, Percutaneous Endoscopic Approach", datatype="procedure"),
    Concept("BW40ZZZ", "Ultrasonography of Abdomen", datatype="procedure"),
])


def test_procedure_track_reads_procimiento_rows_with_prefix_golds(tmp_path):
    result = load_split(corpus(tmp_path), TAXONOMY, track="procedure")
    assert result.stats["procedure_rows"] == 3 and result.stats["facts"] == 2  # 0WJG4ZZ has no concept
    by_gold = {fact.gold[0]: fact for fact in result.all_facts}
    prefix = by_gold["0DTN"]
    assert prefix.datatype == "procedure" and prefix.id.startswith("codiesp-P-test:S1:")
    assert prefix.metadata["gold_match"] == "prefix"
    assert "gold_match" not in by_gold["BW40ZZZ"].metadata
    # whole mentions only by default: neither is found (no lexicon word for ecografía, pieces off)
    assert result.facts == []
    diagnosis = load_split(corpus(tmp_path), None)
    assert [f.gold for f in diagnosis.all_facts] == [("K57.32",)] and diagnosis.all_facts[0].datatype == "diagnosis"


def test_pieces_find_a_discontinuous_mention_the_whole_misses(tmp_path):
    result = load_split(corpus(tmp_path), TAXONOMY, track="procedure", pieces=True)
    fact = next(f for f in result.facts if f.gold == ("0DTN",))
    assert fact.value == "sigmoid colon underwent a resection"  # the covering stretch, an exact substring
    assert fact.metadata["relocation_status"] == "exact" and fact.value in fact.context
    assert [fact.context[a:b] for a, b in fact.metadata["pieces"]] == ["sigmoid", "resection"]
    assert result.stats["found_by_pieces"] == 1 and result.stats["discontinuous"] == 1
    apart = load_split(corpus(tmp_path), TAXONOMY, track="procedure", pieces=True, max_cover_words=3)
    fact = next(f for f in apart.facts if f.gold == ("0DTN",))
    assert fact.metadata["relocation_status"] == "exact-pieces" and fact.value == f"sigmoid{PIECE_JOIN}resection"
    assert fact.metadata["span"] is None


def test_a_lexicon_file_adds_words_and_changes_the_cache_name(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("# procedures\necografía: ultrasound sonography\n", encoding="utf-8")
    plain, extended = DeterministicRelocator(), DeterministicRelocator(extra_lexicon=words)
    assert plain.name != extended.name and extended.name.startswith(plain.name + "-lex-")
    task = RelocationTask("S1", "ecografía abdominal", "(contexto)", "An abdominal ultrasound was performed.",
                          "sentence")
    assert not plain.relocate_one(task).exact
    assert extended.relocate_one(task).english == "abdominal ultrasound"
    result = load_split(corpus(tmp_path), TAXONOMY, relocator=DeterministicRelocator(extra_lexicon=words),
                        track="procedure")
    assert [f.value for f in result.facts] == ["abdominal ultrasound"]


def test_a_malformed_lexicon_line_is_named(tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("ecografia: ultrasound\nresonancia magnetica\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"words.txt:2: expected 'spanish: english"):
        read_lexicon_file(words)
    with pytest.raises(InputError, match="no such lexicon file"):
        DeterministicRelocator(extra_lexicon=tmp_path / "missing.txt")


def test_the_facts_builder_writes_a_facts_file_fhs_run_reads(tmp_path, capsys):
    from fhs.data.datasets.codiesp import main
    from fhs.data.facts import read_facts

    concepts = tmp_path / "concepts.tsv"
    concepts.write_text("id\tlabel\tdatatype\n" + "".join(f"{c.id}\t{c.label}\tprocedure\n" for c in TAXONOMY))
    words = tmp_path / "words.txt"
    words.write_text("ecografia: ultrasound\n", encoding="utf-8")
    out = tmp_path / "facts.jsonl"
    main(["--data", str(corpus(tmp_path)), "--track", "procedure", "--pieces", "--lexicon", str(words),
          "--taxonomy", str(concepts), "--out", str(out)])
    facts = read_facts(out)
    assert sorted(f.value for f in facts) == ["abdominal ultrasound", "sigmoid colon underwent a resection"]
    assert {f.metadata.get("gold_match") for f in facts} == {"prefix", None}
    assert '"found_by_pieces": 1' in capsys.readouterr().out


def test_a_piece_found_as_pieces_is_refused_by_name():
    from fhs.data.relocate.contract import Relocation, RelocationTask
    from fhs.data.relocate.pieces import combine_pieces

    task = RelocationTask("S1", "dolor toracico", "dolor toracico agudo", "acute chest pain", "sentence")
    piece = Relocation("chest pain", None, None, "exact-pieces", "deterministic", "sentence",
                       pieces=((6, 10), (11, 15)))
    with pytest.raises(ValueError, match="found as exact-pieces"):
        combine_pieces(task, [piece])
