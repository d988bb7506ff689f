"""The dense lists chapter 5's LLM sample sends to the model, recomputed on the CPU that runs the tests.

``tests/fixtures/dense_sample_cpu.json`` holds, for every query the `cpu` book's dense LLM
runs searched (``dev/dense_sample.py`` wrote it from a cold build), the concept ids of its
list and the digest of the query's exact vector. Here each query and each listed concept is
embedded again by the exact encoder: the query's vector must be the same bits, the list
ordered by exact cosine (ties by taxonomy order) must be the recorded order, and ONNX
Runtime's fast vectors must lie within the drift the exact rankings rely on. A kernel that
changed a vector fails here, on the developer's machine, instead of in a newcomer's
`make book` (issue 46). Which concepts make the list at all follows from that drift bound
(``fhs.retrieval.exact_dense``), tested with perturbed fast vectors in test_minilm_exact.py.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("numba")
pytest.importorskip("onnxruntime")

FIXTURE = Path(__file__).parent / "fixtures" / "dense_sample_cpu.json"
SAMPLE = json.loads(FIXTURE.read_text()) if FIXTURE.is_file() else {"datasets": {}}


def test_the_sample_is_recorded_for_both_datasets():
    assert set(SAMPLE["datasets"]) == {"fincl", "codiesp"}, f"record it: dev/dense_sample.py --out {FIXTURE}"


@pytest.mark.data
@pytest.mark.model
@pytest.mark.slow
@pytest.mark.parametrize("dataset", sorted(SAMPLE["datasets"]))
def test_chapter_5_dense_lists_are_recomputed_to_the_bit(dataset):
    from fhs.retrieval.dense import concept_texts
    from fhs.retrieval.encoders import make_encoder, make_exact_encoder
    from fhs.retrieval.exact_dense import DRIFT, exact_scores
    from fhs.run.inputs import load_experiment

    entry = SAMPLE["datasets"][dataset]
    taxonomy = load_experiment(dataset, progress=False).taxonomy
    assert taxonomy.name == entry["taxonomy"]
    position = {concept.id: i for i, concept in enumerate(taxonomy.concepts)}
    listed = sorted({position[c] for query in entry["queries"] for c in query["ids"]})
    texts = concept_texts(taxonomy)
    exact = make_exact_encoder(entry["model"])
    vectors = dict(zip(listed, exact.encode([texts[i] for i in listed], documents=True)))
    fast = make_encoder(entry["model"]).encode([texts[i] for i in listed], documents=True)
    drift = np.linalg.norm(fast.astype(np.float64) - np.stack([vectors[i] for i in listed]), axis=1)
    assert drift.max() <= DRIFT / 4, f"fast vectors stray {drift.max():.2e} from the exact ones"

    queries = exact.encode([query["query"] for query in entry["queries"]])
    for query, vector in zip(entry["queries"], queries):
        assert hashlib.sha256(vector.tobytes()).hexdigest() == query["query_sha256"], query["query"][:60]
        rows = np.asarray([position[c] for c in query["ids"]])
        scores = exact_scores(np.stack([vectors[i] for i in rows]), vector)
        order = np.lexsort((rows, -scores))
        assert [query["ids"][i] for i in order] == query["ids"], query["query"][:60]
