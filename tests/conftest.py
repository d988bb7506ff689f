"""The suite's set-up: numba's kernels, ours and ranx's, compile once per machine into the user's cache folder.

The notice of a first compile (``fhs.retrieval.jit.FirstCompile``) is for a user's first run;
``tests/test_kernel_cache.py`` checks it, and here it is marked said, so that a test reading
stderr reads the same lines on a machine that has not compiled the kernels yet.

A real model's run that several modules read is made once per session here (``smollm2_fhs_run``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

# One OpenBLAS thread per test process, set before numpy loads and inherited by the kernels, servers and commands a
# test starts: the suite's workers and their subprocesses already fill the cores, where a second BLAS thread each
# spins on the exact encoder's small products (chapter 5 of an adapter's book, `python -m dev.suite_time`). The
# vectors do not depend on it (tests/test_minilm_exact.py).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402 (after the BLAS setting, which must precede numpy)
from cli_in_process import fhs  # noqa: E402 (likewise)
from run_copy import copy_folder  # noqa: E402 (likewise)

from fhs.retrieval import sparse_top_k  # noqa: E402 (likewise)
from fhs.retrieval.jit import use_user_cache  # noqa: E402 (likewise)

use_user_cache()
sparse_top_k.FIRST_SEARCH.done = sparse_top_k.FIRST_BATCH.done = True


@pytest.fixture(scope="session")
def smollm2_fhs_made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One FinCL fact through FHS on SmolLM2 (smoke profile, a fresh cache), made once per session (once per
    pytest-xdist worker): its folder, its cache and its printed metrics."""
    folder = tmp_path_factory.mktemp("smollm2-fhs")
    cache = folder / "cache" / "responses.sqlite"
    done = fhs("run", "--dataset", "fincl", "--method", "fhs", "--profile", "smoke", "--limit", "1", "--quiet",
               "--out", str(folder / "run"), "--cache", str(cache), cwd=folder)
    assert done.returncode == 0, done.stderr
    return {"run": folder / "run", "cache": cache, "metrics": json.loads(done.stdout)}


@pytest.fixture
def smollm2_fhs_run(smollm2_fhs_made: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The shared run's folder and cache folder, copied into this test's own folder: a test may write beside them."""
    cache = copy_folder(smollm2_fhs_made["cache"].parent, tmp_path / "cache") / smollm2_fhs_made["cache"].name
    return {"run": copy_folder(smollm2_fhs_made["run"], tmp_path / "run"), "cache": cache,
            "metrics": smollm2_fhs_made["metrics"]}
