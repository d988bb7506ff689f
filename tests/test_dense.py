"""Dense and hybrid retrieval: ranking, type filter, caching and fusion on tiny fixtures.

A fake encoder (bag of words hashed into a few dimensions) stands in for the
model, so these tests run without onnxruntime; one test marked ``model`` runs
the real all-MiniLM-L6-v2 on a handful of concepts.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

from fhs.core.errors import InputError
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.retrieval.bm25 import Ranking, RetrievalConfig, Retriever
from fhs.retrieval.bm25 import top_k_order
from fhs.retrieval.dense import DenseRetriever, load_or_build_embeddings, save_npy_atomic
from fhs.retrieval.encoders import EXTRA, MODELS, OnnxEncoder, PackagedFile, locate, sha256_file
from fhs.retrieval.fusion import fuse
from fhs.retrieval.hybrid import HybridRetriever
from fhs.retrieval.kinds import make_retriever

WORDS = ["asset", "sale", "revenue", "customer", "tax", "income", "lease", "cash", "debt", "nausea"]


class FakeEncoder:
    """One dimension per known word (plus a catch-all); counts calls and encoded texts."""

    key = "fake-v1"

    def __init__(self) -> None:
        self.calls = 0
        self.encoded = 0

    def encode(self, texts, *, batch_size=32, progress=None, documents=False):
        self.calls += 1
        self.encoded += len(texts)
        rows = np.zeros((len(texts), len(WORDS) + 1), dtype=np.float32)
        for i, text in enumerate(texts):
            lowered = text.lower()
            for j, word in enumerate(WORDS):
                rows[i, j] = lowered.count(word)
            rows[i, -1] = 0.1
        if progress:
            progress(len(texts))
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def taxonomy() -> Taxonomy:
    return Taxonomy.from_concepts("tiny", [
        Concept("AssetsHeldForSale", "Assets held for sale", "Assets held for sale, carrying amount.", "monetary"),
        Concept("Revenue", "Revenue from customers", "Revenue from contracts with customers.", "monetary"),
        Concept("IncomeTaxExpense", "Income tax expense", "Tax on income.", "monetary"),
        Concept("LeaseCount", "Number of leases", "How many leases.", "integer"),
        Concept("CashCount", "Number of cash registers", "Cash registers.", "integer"),
        Concept("Nausea", "Nausea", "Nausea and vomiting.", ""),
    ])


def retriever(tmp_path, **config) -> tuple[DenseRetriever, FakeEncoder]:
    encoder = FakeEncoder()
    cfg = RetrievalConfig(**{"w_cov": 0.0, **config})
    return DenseRetriever(taxonomy(), cfg, encoder=encoder, cache_root=tmp_path, progress=False), encoder


def test_ranks_by_cosine_within_the_datatype(tmp_path):
    dense, _ = retriever(tmp_path)
    ranking = dense.search("revenue from customer contracts", "monetary")
    assert ranking.ids[0] == "Revenue"
    assert set(ranking.ids) == {"AssetsHeldForSale", "Revenue", "IncomeTaxExpense"}  # type filter
    assert ranking.scores[0] == 1.0 and ranking.scores[-1] == 0.0  # range-normalised over the list
    assert list(ranking.scores) == sorted(ranking.scores, reverse=True)


def test_unknown_datatype_searches_everything_and_top_k_cuts(tmp_path):
    dense, _ = retriever(tmp_path, top_k=2)
    ranking = dense.search("nausea", "no-such-type")
    assert ranking.ids[0] == "Nausea" and len(ranking.ids) == 2
    assert len(dense.search("nausea", None, top_k=10).ids) == 6
    unfiltered, _ = retriever(tmp_path, type_filter=False)
    assert "Nausea" in unfiltered.search("lease", "integer").ids


def test_ties_break_by_document_order():
    scores = np.array([0.5, 0.9, 0.5, 0.9, 0.1])
    assert list(top_k_order(scores, 4)) == [1, 3, 0, 2]
    assert list(top_k_order(scores, 10)) == [1, 3, 0, 2, 4]
    assert top_k_order(scores, 0).size == 0


def test_embeddings_are_cached_once_per_texts_and_model(tmp_path):
    first, encoder = retriever(tmp_path)
    first.warm_up()
    assert first.build_info["cache"] == "built" and encoder.encoded == 6
    files = list((tmp_path / "dense").glob("*.npy"))
    assert len(files) == 1 and not list((tmp_path / "dense").glob("*.tmp"))
    second, encoder2 = retriever(tmp_path)
    second.warm_up()
    assert second.build_info["cache"] == "hit" and encoder2.encoded == 0
    np.testing.assert_array_equal(first.matrix, second.matrix)
    # Another concept text -> another key; another model -> another key.
    changed = Taxonomy.from_concepts("tiny", list(taxonomy().concepts[:-1]) + [Concept("Nausea", "Nausea", "", "")])
    other = DenseRetriever(changed, RetrievalConfig(w_cov=0.0), encoder=FakeEncoder(), cache_root=tmp_path,
                           progress=False)
    other.warm_up()
    assert other.build_info["cache"] == "built"
    renamed = FakeEncoder()
    renamed.key = "fake-v2"
    load_or_build_embeddings(taxonomy(), renamed, cache_root=tmp_path, progress=False)
    assert len(list((tmp_path / "dense").glob("*.npy"))) == 3


def test_a_corrupt_cache_file_is_rebuilt(tmp_path):
    dense, _ = retriever(tmp_path)
    dense.warm_up()
    path = next((tmp_path / "dense").glob("*.npy"))
    path.write_bytes(b"not a numpy file")
    again, encoder = retriever(tmp_path)
    again.warm_up()
    assert again.build_info["cache"] == "built" and encoder.encoded == 6


def test_an_interrupted_build_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    import fhs.retrieval.dense as dense_module

    monkeypatch.setattr(dense_module, "CHECKPOINT_EVERY", 2)
    reference, _ = load_or_build_embeddings(taxonomy(), FakeEncoder(), use_cache=False, progress=False)

    class Crashes(FakeEncoder):
        def encode(self, texts, **kw):
            if self.calls == 2:
                raise KeyboardInterrupt
            return super().encode(texts, **kw)

    with pytest.raises(KeyboardInterrupt):
        load_or_build_embeddings(taxonomy(), Crashes(), cache_root=tmp_path, progress=False)
    assert [p.name.endswith(".partial.npy") for p in (tmp_path / "dense").iterdir()] == [True]
    again = FakeEncoder()
    matrix, info = load_or_build_embeddings(taxonomy(), again, cache_root=tmp_path, progress=False)
    assert info["resumed_from"] == 4 and again.encoded == 2  # two chunks of two were kept
    np.testing.assert_allclose(matrix, reference)
    assert [p.name.endswith(".partial.npy") for p in (tmp_path / "dense").iterdir()] == [False]


class ForkableEncoder(FakeEncoder):
    """A fake that, like the ONNX encoder, can make a one-thread copy of itself in a forked process."""

    threads = 2

    def single_threaded(self):
        copy = ForkableEncoder()
        copy.threads = 1
        return copy

    def encode(self, texts, **kw):
        rows = super().encode(texts, **kw)
        rows[:, -1] = os.getpid()  # which process embedded each row
        return rows


def test_a_build_splits_its_chunks_between_forked_processes(tmp_path, monkeypatch):
    import fhs.retrieval.dense as dense_module

    monkeypatch.setattr(dense_module, "CHECKPOINT_EVERY", 2)
    monkeypatch.delenv(dense_module.PROCESSES_ENV, raising=False)
    matrix, info = load_or_build_embeddings(taxonomy(), ForkableEncoder(), cache_root=tmp_path, progress=False)
    assert info["processes"] == 2  # the encoder's two threads, as two one-thread processes
    pids = set(matrix[:, -1].astype(int))
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    # the rows of one process are those the same encoder gives here, in taxonomy order
    here, _ = load_or_build_embeddings(taxonomy(), FakeEncoder(), use_cache=False, progress=False)
    np.testing.assert_array_equal(matrix[:, :-1], here[:, :-1])
    # one process when asked, or when the encoder has no one-thread copy
    monkeypatch.setenv(dense_module.PROCESSES_ENV, "1")
    one, info = load_or_build_embeddings(taxonomy(), ForkableEncoder(), use_cache=False, progress=False)
    assert info["processes"] == 1 and set(one[:, -1].astype(int)) == {os.getpid()}
    assert dense_module.build_processes(FakeEncoder(), chunks=3) == 1
    assert dense_module.build_processes(ForkableEncoder(), chunks=1) == 1
    bar = []
    list(dense_module.embedded_chunks(ForkableEncoder(), [["a", "b"], ["c"]], processes=2, progress=bar.append))
    assert bar == [2, 1]  # the progress bar moves by chunk


def test_a_build_in_processes_resumes_from_its_checkpoint(tmp_path, monkeypatch):
    import fhs.retrieval.dense as dense_module

    monkeypatch.setattr(dense_module, "CHECKPOINT_EVERY", 2)
    reference, _ = load_or_build_embeddings(taxonomy(), FakeEncoder(), use_cache=False, progress=False)
    real_save = dense_module.save_npy_atomic

    def save_then_stop(path, array):  # the second checkpoint is written, then the build is interrupted
        real_save(path, array)
        if array.shape[0] == 4:
            raise KeyboardInterrupt

    monkeypatch.setattr(dense_module, "save_npy_atomic", save_then_stop)
    with pytest.raises(KeyboardInterrupt):
        load_or_build_embeddings(taxonomy(), ForkableEncoder(), cache_root=tmp_path, progress=False)
    monkeypatch.setattr(dense_module, "save_npy_atomic", real_save)
    matrix, info = load_or_build_embeddings(taxonomy(), ForkableEncoder(), cache_root=tmp_path, progress=False)
    assert info["resumed_from"] == 4 and info["processes"] == 1  # one chunk left: one process
    np.testing.assert_array_equal(matrix[:, :-1], reference[:, :-1])


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "x" / "a.npy"
    save_npy_atomic(target, np.arange(3, dtype=np.float32))
    np.testing.assert_array_equal(np.load(target), np.arange(3, dtype=np.float32))
    assert [p.name for p in target.parent.iterdir()] == ["a.npy"]


def test_query_embeddings_are_reused(tmp_path):
    dense, encoder = retriever(tmp_path)
    dense.warm_up()
    calls = encoder.calls
    dense.search("tax on income", "monetary")
    dense.search("tax on income", "monetary", top_k=1)
    assert encoder.calls == calls + 1


def test_recent_cosines_are_reused_by_a_hybrid_search_and_kept_read_only(tmp_path, monkeypatch):
    import fhs.retrieval.dense as dense_module

    dense, _ = retriever(tmp_path)
    hybrid = HybridRetriever(taxonomy(), RetrievalConfig(w_cov=0.0), dense=dense)
    queries = ["assets held for sale", "tax on income", "number of leases"]
    asked = [(q, t) for q in queries for t in ("monetary", "integer", None)]
    first = [(dense.search(q, t), hybrid.search(q, t)) for q, t in asked]
    assert dense.scored == {"computed": len(asked), "reused": len(asked)}  # each hybrid search reused its cosines
    part, cosine = dense.scores(*asked[-1])
    assert not cosine.flags.writeable
    # the same rankings with nothing kept
    monkeypatch.setattr(dense_module, "SCORES_KEPT", 0)
    again, _ = retriever(tmp_path)
    fresh = HybridRetriever(taxonomy(), RetrievalConfig(w_cov=0.0), dense=again)
    assert [(again.search(q, t), fresh.search(q, t)) for q, t in asked] == first
    assert again.scored["reused"] == 0


def test_coverage_variant_adds_eq6_terms(tmp_path):
    dense, _ = retriever(tmp_path, w_cov=1.0)
    ranking = dense.search("income tax expense", "monetary")
    assert ranking.ids[0] == "IncomeTaxExpense"
    assert ranking.scores[0] == pytest.approx(1.0 + 1.0 + 1.0)  # normalised cosine 1 + |Q∩L|/|L| + |Q∩L|/|Q|


def rrf_fuse(rankings, kappa=60):
    """The hybrid's fusion: every candidate, ties by id, normalised over the fused list."""
    return fuse(rankings, kappa=kappa, k=None, ties="id").as_ranking()


def test_rrf_fusion_rule():
    a = Ranking(("x", "y", "z"), (3.0, 2.0, 1.0))
    b = Ranking(("y", "w", "x"), (3.0, 2.0, 1.0))
    fused = rrf_fuse([a, b], kappa=60)
    # y: 1/62 + 1/61, x: 1/61 + 1/63, then w (1/62) and z (1/63)
    assert fused.ids == ("y", "x", "w", "z")
    assert fused.scores[0] == 1.0 and fused.scores[-1] == 0.0
    tie = rrf_fuse([Ranking(("b",), (1.0,)), Ranking(("a",), (1.0,))])
    assert tie.ids == ("a", "b")  # equal fused scores: by id


def test_hybrid_fuses_bm25_without_coverage_and_dense(tmp_path):
    dense, _ = retriever(tmp_path)
    hybrid = HybridRetriever(taxonomy(), RetrievalConfig(w_cov=0.0), dense=dense)
    assert hybrid.bm25.config.w_cov == 0.0
    query = "assets held for sale"
    expected = rrf_fuse([hybrid.bm25.search(query, "monetary", 200), dense.search(query, "monetary", 200)])
    got = hybrid.search(query, "monetary")
    assert got == expected and got.ids[0] == "AssetsHeldForSale"
    with_cov = HybridRetriever(taxonomy(), RetrievalConfig(w_cov=1.0), dense=dense).search(query, "monetary")
    assert with_cov.ids[0] == "AssetsHeldForSale" and with_cov.scores[0] > 1.0


def test_make_retriever_and_shared_interface(tmp_path):
    tax = taxonomy()
    assert isinstance(make_retriever("bm25", tax, RetrievalConfig()), Retriever)
    dense = make_retriever("dense", tax, RetrievalConfig(w_cov=0.0), encoder=FakeEncoder(), cache_root=tmp_path,
                           progress=False)
    for r in (dense, make_retriever("hybrid", tax, RetrievalConfig(w_cov=0.0), dense=dense)):
        ranking = r.search("cash registers", "integer")
        assert isinstance(ranking, Ranking) and ranking.rank_of(["CashCount"]) == 1
        assert r.config.top_k == 200
    with pytest.raises(InputError):
        make_retriever("colbert", tax, RetrievalConfig())


def test_missing_package_or_bad_hash_names_the_package(tmp_path, monkeypatch):
    with pytest.raises(InputError, match="not-a-real-package==1.0"):
        locate(PackagedFile("not_a_real_package_xyz", "not-a-real-package==1.0", "m.onnx", "0" * 64))
    pkg = tmp_path / "fakepkg_dense"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.onnx").write_bytes(b"weights")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(InputError, match="fakepkg==2.0"):
        locate(PackagedFile("fakepkg_dense", "fakepkg==2.0", "m.onnx", "0" * 64))
    good = sha256_file(pkg / "m.onnx")
    assert locate(PackagedFile("fakepkg_dense", "fakepkg==2.0", "m.onnx", good)) == pkg / "m.onnx"


def test_missing_runtime_is_one_line_naming_the_extra(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "onnxruntime", None)  # as if not installed
    with pytest.raises(InputError) as caught:
        OnnxEncoder(MODELS["minilm-int8"])
    message = str(caught.value)
    assert "\n" not in message and f"fhs[{EXTRA}]" in message and "onnxruntime" in message


def test_import_does_not_load_the_runtime():
    import subprocess
    import sys

    code = "import sys, fhs, fhs.retrieval.kinds; print(any(m in sys.modules for m in ('onnxruntime', 'torch', 'tokenizers')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.model
def test_real_model_ranks_a_handful_of_concepts(tmp_path):
    tax = taxonomy()
    dense = DenseRetriever(tax, RetrievalConfig(w_cov=0.0), cache_root=tmp_path, progress=False)
    dense.warm_up()
    assert dense.matrix.shape == (6, 384)
    np.testing.assert_allclose(np.linalg.norm(dense.matrix, axis=1), 1.0, atol=1e-5)
    assert dense.search("sales to clients under contracts", "monetary").ids[0] == "Revenue"
    assert dense.search("patient feels sick and throws up", None).ids[0] == "Nausea"



@pytest.mark.model
def test_the_int8_vectors_do_not_depend_on_the_thread_count():
    """The runtime uses every core by default; a book built on 2 or 16 cores must embed alike."""
    from fhs.retrieval.encoders import OnnxEncoder

    texts = [f"{c.label}. {c.definition}" for c in taxonomy().concepts] * 12  # several batches, mixed lengths
    one = OnnxEncoder(threads=1).encode(texts, batch_size=8)
    two = OnnxEncoder(threads=2).encode(texts, batch_size=8)
    assert np.array_equal(one, two)
    # two batches at once, one thread each (the vectors land in the order given, and match)
    streamed = OnnxEncoder(threads=2, streams=2).encode(texts, batch_size=8, documents=True)
    assert np.array_equal(streamed, OnnxEncoder(threads=1).encode(texts, batch_size=8, documents=True))


@pytest.mark.model
def test_a_build_in_two_processes_gives_the_vectors_of_one(monkeypatch):
    """Forked one-thread sessions embed each chunk exactly as one two-thread session does."""
    import fhs.retrieval.dense as dense_module

    monkeypatch.setattr(dense_module, "CHECKPOINT_EVERY", 7)
    concepts = [Concept(f"C{i}", f"{c.label} {'and more ' * (i % 5)}", c.definition, c.datatype)
                for i, c in enumerate(taxonomy().concepts * 5)]
    tax = Taxonomy.from_concepts("mixed", concepts)
    model = MODELS["minilm-int8-d32"]
    one, info = load_or_build_embeddings(tax, OnnxEncoder(model, threads=2), use_cache=False, progress=False,
                                         processes=1)
    two, info2 = load_or_build_embeddings(tax, OnnxEncoder(model, threads=2), use_cache=False, progress=False)
    assert (info["processes"], info2["processes"]) == (1, 2)
    assert np.array_equal(one, two)


@pytest.mark.model
def test_the_cpu_variant_cuts_concept_texts_only(tmp_path):
    """minilm-int8-d64 embeds a concept as its first 64 word pieces; a query keeps 256."""
    whole = OnnxEncoder(MODELS["minilm-int8"])
    cut = OnnxEncoder(MODELS["minilm-int8-d64"])
    long_text = " ".join(f"liability{i} of the reporting entity" for i in range(40))  # > 64 word pieces
    head = whole.tokenizer.decode(whole.tokenizer.encode(long_text).ids[1:63])  # the 62 pieces between [CLS] and [SEP]
    assert np.array_equal(cut.encode([long_text], documents=True), whole.encode([head]))
    assert np.array_equal(cut.encode([long_text]), whole.encode([long_text]))  # the query side
    assert not np.array_equal(cut.encode([long_text], documents=True), cut.encode([long_text]))
    assert cut.key != whole.key and cut.key.endswith("-D64")
    shorter = OnnxEncoder(MODELS["minilm-int8-d32"])
    head = whole.tokenizer.decode(whole.tokenizer.encode(long_text).ids[1:31])
    assert np.array_equal(shorter.encode([long_text], documents=True), whole.encode([head]))
    assert shorter.key.endswith("-D32")


def test_the_cpu_profile_cuts_icd_10_cm_shorter_than_us_gaap():
    from fhs.run.profiles import PROFILES

    cpu, paper = PROFILES["cpu"], PROFILES["paper"]
    assert cpu.dense_model_for("icd-10-cm") == "minilm-int8-d32"
    assert cpu.dense_model_for("us-gaap-2024") == cpu.dense_model == "minilm-int8-d64"
    assert paper.dense_model_for("icd-10-cm") == paper.dense_model == "minilm-int8"  # whole texts


def test_batches_follow_the_token_count_and_pad_with_zeros():
    from fhs.retrieval.encoders import padded, token_batches

    lengths = [5, 2, 9, 2, 7]
    assert token_batches(lengths, 2) == [[1, 3], [0, 4], [2]]  # shortest first, ties by position
    ids, mask = padded([[101, 7, 102], [101, 102]])
    assert ids.tolist() == [[101, 7, 102], [101, 102, 0]]
    assert mask.tolist() == [[1, 1, 1], [1, 1, 0]]
    assert ids.dtype == mask.dtype == np.int64


@pytest.mark.model
def test_length_sorted_batches_give_the_vectors_of_unpadded_texts():
    """Batches formed by token count pad less; the vectors are those of each text embedded alone."""
    encoder = OnnxEncoder(MODELS["minilm-int8-d64"], threads=1)
    concepts = taxonomy().concepts
    texts = [f"{c.id}. {c.label}. {c.definition}" * (1 + i % 4) for i, c in enumerate(concepts * 4)]
    lengths = [len(encoder.document_tokenizer.encode(t).ids) for t in texts]
    assert len(set(lengths)) > 4  # mixed lengths, so batching by order would pad
    batched = encoder.encode(texts, batch_size=5, documents=True)
    alone = np.vstack([encoder.encode([t], documents=True) for t in texts])
    np.testing.assert_allclose(batched, alone, atol=2e-6)
    # the order given does not matter: the same batches form from a shuffled list
    shuffled = list(reversed(range(len(texts))))
    again = encoder.encode([texts[i] for i in shuffled], batch_size=5, documents=True)
    np.testing.assert_allclose(again, batched[shuffled], atol=2e-6)


@pytest.mark.model
def test_dense_and_hybrid_runs_in_forked_processes_give_the_records_of_one(tmp_path, monkeypatch):
    """The real encoder: a forked child remakes its session and ranks as the parent does."""
    from fhs.data.facts import Fact
    from fhs.method.context import MethodContext
    from fhs.run import runner
    from fhs.run.records import read_records

    monkeypatch.setattr(runner, "FORK_MIN_FACTS", 8)
    words = ["assets held for sale", "revenue from customers", "income tax", "number of leases", "nausea",
             "cash registers", "vomiting", "tax on income"]
    facts = [Fact(id=f"f{i}", context_id=f"c{i}", modality="text", value=str(i), datatype="",
                  context=f"{words[i % 8]} and {words[(i * 3) % 8]} ({i})", gold=("Revenue",),
                  row_header=words[i % 8]) for i in range(24)]
    dense = DenseRetriever(taxonomy(), RetrievalConfig(w_cov=0.0), cache_root=tmp_path, progress=False)
    hybrid = HybridRetriever(taxonomy(), RetrievalConfig(w_cov=0.0), dense=dense)
    assert dense.fork_safe and hybrid.fork_safe
    assert not retriever(tmp_path)[0].fork_safe  # an encoder handed in cannot be remade in a child
    forks = []
    forked = runner._forked
    monkeypatch.setattr(runner, "_forked", lambda *a: forks.append(a[2]) or forked(*a))
    for processes in ("1", "2"):
        monkeypatch.setenv(runner.PROCESSES_ENV, processes)
        for name, searcher in (("dense", dense), ("hybrid", hybrid)):
            ctx = MethodContext(taxonomy=taxonomy(), retriever=searcher)
            runner.run_method(facts, "direct", ctx, tmp_path / processes / name, progress=False)
    assert forks == [2, 2]
    for name in ("dense", "hybrid"):
        one, two = (read_records(tmp_path / p / name / "records.jsonl") for p in ("1", "2"))
        for record in one + two:
            record.pop("wall_seconds")
        assert two == one and len(one) == 24
