"""The CPU-independent encoder and the exact dense rankings built on it.

- its kernels: exp and erf against the standard library, fixed-point rows, the fixed-order dot;
- the encoder against ONNX Runtime on the same weights (the reference it re-implements);
- the same bits under other BLAS kernels (OpenBLAS's SSE, AVX2 and AVX-512 cores), another
  code generation of the numba kernels (a generic x86-64 target) and, where the CPU allows it,
  CPUID masked to AVX2 -- each in a process of its own;
- exact rankings: the same lists whatever the fast vectors' rounding, and a loud stop when the
  fast vectors are not the same model's.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fhs.data.taxonomy import Concept, Taxonomy
from fhs.retrieval.bm25 import RetrievalConfig

pytest.importorskip("numba")
pytest.importorskip("onnxruntime")

from fhs.retrieval import exact_math  # noqa: E402

TEXTS = [
    "A00.0. Cholera due to Vibrio cholerae 01, biovar cholerae. Intestinal infectious diseases",
    "R11.2. Nausea with vomiting, unspecified. Symptoms and signs involving the digestive system",
    "AssetsHeldForSale. Assets held for sale. Carrying amount of assets held for sale as of the balance sheet date.",
    "Revenue from contracts with customers, excluding assessed tax",
    "Income tax expense (benefit)",
    "Number of operating leases of the lessee",
    "fracture of the left femur after a fall from a ladder at home",
    "x",
]


def test_exp_matches_the_standard_library_to_two_ulps():
    x = -np.concatenate([np.linspace(0, 50, 20001), np.geomspace(1e-12, 700, 2001)])
    out = np.empty_like(x)
    exact_math.exp_nonpositive(x, x.size, out, np.empty(x.size, np.int64))
    reference = np.array([math.exp(v) for v in x])
    assert np.max(np.abs(out - reference) / reference) < 4.5e-16
    tiny = np.array([-709.0, -800.0, -np.inf])
    exact_math.exp_nonpositive(tiny, 3, out[:3], np.empty(3, np.int64))
    assert out[:3].tolist() == [0.0, 0.0, 0.0]


def test_erf_matches_the_standard_library():
    a = np.concatenate([np.linspace(0, 7, 70001), [6.0, 1e300, np.inf]])
    out = np.empty_like(a)
    exact_math.erf_abs(a, out, np.empty(a.size, np.int64))
    reference = np.array([math.erf(v) for v in a])
    assert np.max(np.abs(out - reference)) < 4e-16


def test_fixed_rows_are_integers_below_the_bound_times_a_power_of_two():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((50, 384)) * rng.choice([1e-8, 1.0, 300.0], size=(50, 1))
    x[3] = 0.0
    ints, back = np.empty_like(x), np.empty(50)
    exact_math.to_fixed(x, ints, back)
    assert np.all(ints == np.rint(ints)) and np.abs(ints).max() <= 2 ** exact_math.FIXED_BITS
    assert np.all(np.frexp(back)[0] == 0.5)  # powers of two
    assert np.max(np.abs(ints * back[:, None] - x) / np.abs(x).max(axis=1, keepdims=True).clip(1e-300)) \
        <= 2.0 ** -exact_math.FIXED_BITS
    # the bound that makes every product exact: 2**34 * 127 * 1536 < 2**53
    assert 2 ** exact_math.FIXED_BITS * 127 * 1536 < exact_math.LARGEST_EXACT


def test_a_product_of_fixed_rows_and_int8_weights_is_the_same_in_any_order():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 1536)) * 5
    ints, back = np.empty_like(x), np.empty(64)
    exact_math.to_fixed(x, ints, back)
    weights = rng.integers(-127, 128, size=(1536, 384)).astype(np.float64)
    blas = ints @ weights
    exact = (ints.astype(object) @ weights.astype(int).astype(object))  # Python integers: no rounding at all
    assert np.array_equal(blas, exact.astype(np.float64))
    assert np.array_equal(blas, (ints[:, ::-1] @ weights[::-1]))  # summed the other way round


def encoder():
    from fhs.retrieval.encoders import make_exact_encoder

    return make_exact_encoder("minilm-int8")


@pytest.mark.model
def test_the_exact_encoder_agrees_with_onnx_runtime_on_the_same_weights():
    from fhs.retrieval.encoders import make_encoder

    exact = encoder().encode(TEXTS)
    reference = make_encoder("minilm-int8").encode(TEXTS)
    assert exact.dtype == np.float32 and exact.shape == (len(TEXTS), 384)
    assert np.allclose(np.linalg.norm(exact, axis=1), 1.0, atol=1e-6)
    assert np.abs(exact - reference).max() < 2e-6
    assert np.linalg.norm(exact.astype(np.float64) - reference, axis=1).max() < 5e-6  # drift well inside DRIFT
    # a text embedded alone is the same bits as in a batch (padding is masked out)
    assert np.array_equal(encoder().encode(TEXTS[3:4])[0], exact[3])


SCRIPT = """
import hashlib, json, sys
from fhs.retrieval.encoders import make_exact_encoder
texts = json.loads(sys.argv[1])
a = make_exact_encoder("minilm-int8").encode(texts)
b = make_exact_encoder("minilm-int8-d32").encode(texts, documents=True)
print(hashlib.sha256(a.tobytes() + b.tobytes()).hexdigest())
"""


def digest_in(env: dict[str, str]) -> str:
    """The vectors' digest in a process with ``env``, over OpenBLAS's own thread count (not the suite's one)."""
    base = {name: value for name, value in os.environ.items() if name != "OPENBLAS_NUM_THREADS"}
    run = subprocess.run([sys.executable, "-c", SCRIPT, json.dumps(TEXTS)], env={**base, **env},
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    return run.stdout.strip().splitlines()[-1]


@pytest.mark.model
@pytest.mark.slow
def test_the_same_bits_under_other_blas_kernels_and_code_generation(tmp_path):
    """OpenBLAS picks its GEMM kernels from the CPU (SSE without FMA, AVX2, AVX-512) and numba compiles
    for the CPU it runs on; none of them may change a bit of the vectors."""
    here = digest_in({})
    variants = {"OpenBLAS SSE (no FMA)": {"OPENBLAS_CORETYPE": "Prescott"},
                "OpenBLAS AVX2": {"OPENBLAS_CORETYPE": "Haswell"},
                "OpenBLAS AVX-512": {"OPENBLAS_CORETYPE": "SkylakeX"},
                "numba for a generic x86-64": {"NUMBA_CPU_NAME": "generic", "NUMBA_CACHE_DIR": str(tmp_path)},
                "one BLAS thread": {"OPENBLAS_NUM_THREADS": "1"}}
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("the kernels named here are x86-64 OpenBLAS's")
    for name, env in variants.items():
        assert digest_in(env) == here, name


@pytest.mark.model
@pytest.mark.slow
def test_the_same_bits_with_cpuid_masked_to_avx2(tmp_path):
    from dev.cpuid_mask import can_mask, x86_64_v3_library

    if not can_mask():
        pytest.skip("this CPU cannot mask CPUID (no cpuid_fault)")
    library = x86_64_v3_library(tmp_path)
    assert digest_in({"LD_PRELOAD": str(library)}) == digest_in({})


CONCEPTS = [Concept(f"C{i:03d}", label, label + ".", "t") for i, label in enumerate([
    "Cholera due to Vibrio cholerae", "Nausea with vomiting", "Vomiting of pregnancy", "Nausea",
    "Fracture of femur", "Fracture of left femur", "Fall from ladder", "Assets held for sale",
    "Revenue from customers", "Income tax expense", "Number of leases", "Cash and cash equivalents",
    "Acute nausea", "Chronic vomiting", "Femur, closed fracture", "Revenue, net"])]


def tiny() -> Taxonomy:
    return Taxonomy.from_concepts("tiny-exact", CONCEPTS)


def retriever(tmp_path, fast_noise: float = 0.0):
    from fhs.retrieval.dense import DenseRetriever, concept_texts

    dense = DenseRetriever(tiny(), RetrievalConfig(w_cov=0.0, top_k=6), model="minilm-int8", cache_root=tmp_path,
                           progress=False)
    matrix = dense.matrix
    if fast_noise:  # the fast vectors as another CPU's kernels would round them
        rng = np.random.default_rng(7)
        noise = rng.standard_normal(matrix.shape)
        matrix = (matrix + fast_noise * noise / np.linalg.norm(noise, axis=1, keepdims=True)).astype(np.float32)
        dense._matrix = matrix
    assert len(concept_texts(tiny())) == len(CONCEPTS)
    return dense


@pytest.mark.model
def test_exact_rankings_are_the_brute_force_order_of_exact_vectors(tmp_path):
    from fhs.retrieval.dense import concept_texts

    dense = retriever(tmp_path)
    vectors = encoder().encode(concept_texts(tiny()), documents=True)
    for query in ("nausea and vomiting", "broken thigh bone", "money from clients"):
        q = encoder().encode([query])[0]
        cosine = vectors.astype(np.float64) @ q.astype(np.float64)
        brute = [CONCEPTS[i].id for i in np.lexsort((np.arange(len(CONCEPTS)), -cosine))[:6]]
        assert list(dense.search(query, exact=True).ids) == brute
    # only the candidates a list can hold were embedded exactly, and they were kept on disk
    assert 0 < dense.exact_vectors().computed <= len(CONCEPTS)
    again = retriever(tmp_path)
    again.search("nausea and vomiting", exact=True)
    assert again.exact_vectors().computed == 0


@pytest.mark.model
def test_exact_rankings_do_not_move_with_the_fast_vectors_rounding(tmp_path):
    queries = ("nausea and vomiting", "broken thigh bone", "money from clients", "leases")
    plain = retriever(tmp_path / "a")
    shaken = retriever(tmp_path / "b", fast_noise=1e-6)
    for query in queries:
        first, second = plain.search(query, exact=True), shaken.search(query, exact=True)
        assert first == second  # ids and scores, to the bit


@pytest.mark.model
def test_fast_vectors_of_another_model_stop_an_exact_ranking(tmp_path):
    shaken = retriever(tmp_path, fast_noise=1e-3)
    with pytest.raises(RuntimeError, match="allowance"):
        shaken.search("nausea and vomiting", exact=True)


def _field(number: int, wire: int, payload: bytes | int) -> bytes:
    """One protobuf field: a varint (wire 0) or length-delimited bytes (wire 2)."""
    key = bytes([number << 3 | wire])
    return key + (bytes([payload]) if isinstance(payload, int) else bytes([len(payload)]) + payload)


def test_an_onnx_bytes_field_holding_a_number_is_refused(tmp_path):
    from fhs.core.errors import InputError
    from fhs.retrieval.onnx_tensors import read_graph

    # a float tensor "w" of shape (0,) whose raw_data (field 9) is written as the number 0, not as bytes
    tensor = _field(8, 2, b"w") + _field(1, 0, 0) + _field(2, 0, 1) + _field(9, 0, 0)
    path = tmp_path / "model.onnx"
    path.write_bytes(_field(7, 2, _field(5, 2, tensor)))
    with pytest.raises(InputError, match="a bytes field holds a number"):
        read_graph(path)
