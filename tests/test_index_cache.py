"""The on-disk BM25 index of a user's concept file, keyed by its content."""

from __future__ import annotations

import pytest

from fhs.retrieval.bm25 import RetrievalConfig, Retriever
from fhs.run.digests import file_digest
from fhs.run.inputs import load_experiment_from_files


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))


def concepts(tmp_path, extra=""):
    path = tmp_path / "concepts.csv"
    path.write_text("id,label,datatype\n0DT60ZZ,Resection of Stomach,procedure\n"
                    "0DB60ZZ,Excision of Stomach,procedure\nBW40ZZZ,Ultrasonography of Abdomen,procedure\n" + extra)
    return path


def test_a_second_run_reads_the_index_instead_of_building_it(tmp_path, monkeypatch):
    path = concepts(tmp_path)
    from fhs.data.taxonomies import load_taxonomy_file

    taxonomy = load_taxonomy_file(path)
    first = Retriever(taxonomy, RetrievalConfig(), cache_key=file_digest(path))
    expected = first.search("stomach resection", "procedure")
    assert list((tmp_path / "cache" / "indexes").glob("*.npz"))

    def no_build(*args, **kwargs):
        raise AssertionError("the index should come from the cache")

    monkeypatch.setattr(Retriever, "_build", no_build)
    second = Retriever(taxonomy, RetrievalConfig(), cache_key=file_digest(path))
    assert second.search("stomach resection", "procedure") == expected
    with pytest.raises(AssertionError):  # other parameters, other index
        Retriever(taxonomy, RetrievalConfig(k1=1.2), cache_key=file_digest(path)).search("stomach", "procedure")


def test_an_edited_file_gets_a_new_index_and_a_damaged_one_is_rebuilt(tmp_path):
    path = concepts(tmp_path)
    facts = tmp_path / "facts.jsonl"
    facts.write_text('{"id": "f", "context_id": "c", "modality": "text", "value": "stomach resection", '
                     '"datatype": "procedure", "context": "x", "gold": ["0DT60ZZ"]}\n')
    load_experiment_from_files(facts, path).retriever.search("stomach", "procedure")
    files = set((tmp_path / "cache" / "indexes").glob("*.npz"))
    assert len(files) == 1
    concepts(tmp_path, "0DTJ4ZZ,Resection of Appendix,procedure\n")
    load_experiment_from_files(facts, path).retriever.search("stomach", "procedure")
    assert len(set((tmp_path / "cache" / "indexes").glob("*.npz"))) == 2
    damaged = next(iter(files))
    damaged.write_bytes(b"not an index")
    from fhs.data.taxonomies import load_taxonomy_file

    concepts(tmp_path)
    ranking = Retriever(load_taxonomy_file(path), RetrievalConfig(), file_digest(path)).search("stomach", "procedure")
    assert ranking.ids[0] in {"0DT60ZZ", "0DB60ZZ"}


def test_a_taxonomy_without_a_file_digest_is_kept_on_disk_by_its_content(tmp_path, monkeypatch):
    from fhs.data.taxonomy import Concept, Taxonomy
    from fhs.run import inputs

    def taxonomy(label):
        return Taxonomy.from_concepts("built-in", [Concept("A1", label, datatype="t"), Concept("B2", "Other", datatype="t")])

    first = inputs.cached_retriever(taxonomy("Revenue"), RetrievalConfig())
    expected = first.search("revenue", "t")
    monkeypatch.setattr(Retriever, "_build", lambda *a, **k: pytest.fail("the index should come from the cache"))
    assert inputs.cached_retriever(taxonomy("Revenue"), RetrievalConfig()).search("revenue", "t") == expected
    with pytest.raises(pytest.fail.Exception):  # another content, another index
        inputs.cached_retriever(taxonomy("Revenues and sales"), RetrievalConfig()).search("revenue", "t")


def test_a_hybrid_reads_the_deployed_bm25_index_from_disk(tmp_path, monkeypatch):
    """Coverage is a scoring term: the hybrid's BM25 without it searches the index the deployed one wrote."""
    from fhs.data.taxonomy import Concept, Taxonomy
    from fhs.run import inputs

    taxonomy = Taxonomy.from_concepts("built-in", [Concept("A1", "Revenue", datatype="t"),
                                                   Concept("B2", "Other revenue", datatype="t")])
    inputs.cached_retriever(taxonomy, RetrievalConfig()).warm_up()  # the deployed retriever writes the index
    monkeypatch.setattr(Retriever, "_build", lambda *a, **k: pytest.fail("the index should come from the cache"))
    again = Taxonomy.from_concepts("built-in", list(taxonomy.concepts))  # another object: nothing in memory
    hybrid = inputs.cached_retriever(again, RetrievalConfig(), "hybrid")  # no embedding is made until searched
    assert hybrid.bm25.config.w_cov == 0.0 and hybrid.bm25.search("revenue", "t").ids == ("A1", "B2")
    assert hybrid.bm25 is inputs.cached_retriever(again, RetrievalConfig(w_cov=0.0), "bm25")
