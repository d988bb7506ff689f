"""all-MiniLM-L6-v2 computed so that its vectors are the same bits on every CPU.

The weights are those of the int8 ONNX export (``fhs.retrieval.encoders.MODELS``):
int8 matrices with a float32 scale per output column. ONNX Runtime multiplies them in
float32 with kernels chosen from the CPU (AVX-512, AVX2, ...), and those round
differently: vectors move by about 1e-7 from one CPU to another, and now and then a
near-tie in a candidate list swaps. Here each product is exact instead
(``fhs.retrieval.exact_math``: rows as integers below 2**34 times int8 weights, summed in
float64 below 2**53), and everything else is a fixed sequence of IEEE operations, so the
vectors depend on the text alone. They agree with ONNX Runtime's to about 1e-6
(``tests/test_minilm_exact.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from fhs.core.errors import InputError
from fhs.retrieval import exact_math as X
from fhs.retrieval.batching import padded, token_batches
from fhs.retrieval.onnx_tensors import Graph, read_graph

HEADS = 12
EPS = 9.999999960041972e-13  # the export's LayerNormalization epsilon (1e-12 in float32)
ATTENTION_SCALE = 0.4204482138156891  # applied to queries and keys alike: (1/sqrt(32)) ** 0.5
ROOT2 = 1.4142135381698608  # sqrt(2) as the export stores it (float32)


@dataclass(frozen=True)
class Linear:
    """``x @ W + bias`` with W = ``ints`` (int8 values, held as float64) times ``scale`` per column."""

    ints: np.ndarray
    scale: np.ndarray
    bias: np.ndarray

    def __call__(self, x: np.ndarray) -> np.ndarray:
        fixed = np.empty_like(x)
        back = np.empty(x.shape[0])
        X.to_fixed(x, fixed, back)
        product = fixed @ self.ints  # exact: integers below 2**53 in any order
        X.from_fixed(product, back, self.scale, self.bias)
        return product


@dataclass(frozen=True)
class Layer:
    qkv: Linear  # query, key and value projections side by side
    output: Linear
    norm1: tuple[np.ndarray, np.ndarray]
    up: Linear
    down: Linear
    norm2: tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class Weights:
    words: np.ndarray  # (vocabulary, width) float64
    positions: np.ndarray
    token_type: np.ndarray  # type 0's row: every text is one segment
    norm: tuple[np.ndarray, np.ndarray]
    layers: tuple[Layer, ...]


def _dequantized(graph: Graph, name: str) -> np.ndarray:
    """An embedding table as the export computes it: int8 times its float32 scale, in float32."""
    return (graph.tensors[name + "_q"].astype(np.float32) * graph.tensors[name + "_scale"]).astype(np.float64)


def load_weights(path: Path) -> Weights:
    """The export's weights, each projection found by the bias its product feeds (``...query.bias``)."""
    graph = read_graph(path)
    tensors = graph.tensors
    feeds = {name: node for node in graph.nodes for name in node.inputs}
    linears: dict[str, Linear] = {}
    for node in graph.nodes:
        weight = node.inputs[1] if node.op_type == "MatMul" and len(node.inputs) == 2 else ""
        if weight + "_q" not in tensors:
            continue
        add = feeds.get(node.outputs[0])
        bias = next((name for name in (add.inputs if add else []) if name.endswith(".bias")), None)
        if bias is None:
            raise InputError(
                f"no bias follows the product with {weight}",
                path=path,
                field="dense model",
                fix="use the pinned all-MiniLM-L6-v2 export (fhs.retrieval.encoders.MODELS)",
            )
        linears[bias[: -len(".bias")]] = Linear(
            tensors[weight + "_q"].astype(np.float64),
            tensors[weight + "_scale"].reshape(-1).astype(np.float64),
            tensors[bias].astype(np.float64),
        )
    prefix = "inner.encoder.layer."
    layers = []
    for index in range(sum(1 for key in linears if key.startswith(prefix) and key.endswith("self.query"))):
        at = f"{prefix}{index}."
        q, k, v = (linears[at + f"attention.self.{part}"] for part in ("query", "key", "value"))
        layers.append(
            Layer(
                qkv=Linear(
                    np.ascontiguousarray(np.hstack([q.ints, k.ints, v.ints])),
                    np.concatenate([q.scale, k.scale, v.scale]),
                    np.concatenate([q.bias, k.bias, v.bias]),
                ),
                output=linears[at + "attention.output.dense"],
                norm1=_norm(tensors, at + "attention.output.LayerNorm"),
                up=linears[at + "intermediate.dense"],
                down=linears[at + "output.dense"],
                norm2=_norm(tensors, at + "output.LayerNorm"),
            )
        )
    return Weights(
        words=_dequantized(graph, "inner.embeddings.word_embeddings.weight"),
        positions=_dequantized(graph, "inner.embeddings.position_embeddings.weight"),
        token_type=tensors["inner.embeddings.token_type_embeddings.weight"][0].astype(np.float64),
        norm=_norm(tensors, "inner.embeddings.LayerNorm"),
        layers=tuple(layers),
    )


def _norm(tensors: dict[str, np.ndarray], name: str) -> tuple[np.ndarray, np.ndarray]:
    return tensors[name + ".weight"].astype(np.float64), tensors[name + ".bias"].astype(np.float64)


def _layer_norm(a: np.ndarray, b: np.ndarray | None, norm: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    out = np.empty_like(a)
    X.add_layer_norm(a, b, norm[0], norm[1], EPS, out)
    return out


def embed(weights: Weights, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Unit float32 vectors of a padded batch: BERT's layers, then the mean of the unmasked tokens."""
    batch, length = ids.shape
    x = (weights.words[ids] + weights.token_type) + weights.positions[:length]
    x = _layer_norm(x.reshape(batch * length, -1), None, weights.norm)
    for layer in weights.layers:
        qkv = layer.qkv(x)
        context = np.empty_like(x)
        X.attention(qkv, mask, HEADS, ATTENTION_SCALE, context)
        x = _layer_norm(layer.output(context), x, layer.norm1)
        hidden = layer.up(x)
        X.gelu(hidden, ROOT2)
        x = _layer_norm(layer.down(hidden), x, layer.norm2)
    out = np.empty((batch, x.shape[1]), dtype=np.float32)
    X.mean_pool_unit(x, mask.astype(np.bool_), out)
    return out


class ExactEncoder:
    """The int8 all-MiniLM-L6-v2 with CPU-independent vectors (same interface as ``OnnxEncoder``)."""

    def __init__(self, spec, *, key: str, weights: Path, tokenizer, document_tokenizer) -> None:
        self.spec = spec  # fhs.retrieval.encoders.ModelSpec: the windows and the width
        self.key = key
        self.weights = load_weights(weights)
        self.tokenizer = tokenizer
        self.document_tokenizer = document_tokenizer

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Callable[[int], object] | None = None,
        documents: bool = False,
    ) -> np.ndarray:
        tokenizer = self.document_tokenizer if documents else self.tokenizer
        out = np.zeros((len(texts), self.spec.dim), dtype=np.float32)
        encodings = [e.ids for e in tokenizer.encode_batch(list(texts))] if texts else []
        for batch in token_batches([len(ids) for ids in encodings], batch_size):
            ids, mask = padded([encodings[i] for i in batch])
            out[batch] = embed(self.weights, ids, mask)
            if progress:
                progress(len(batch))
        return out
