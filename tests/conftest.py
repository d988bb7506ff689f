"""The suite's set-up: numba's kernels, ours and ranx's, compile once per machine into the user's cache folder.

The notice of a first compile (``fhs.retrieval.jit.FirstCompile``) is for a user's first run;
``tests/test_kernel_cache.py`` checks it, and here it is marked said, so that a test reading
stderr reads the same lines on a machine that has not compiled the kernels yet.

A real model's run that several modules read is made once per session here (``smollm2_fhs_run``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

# One OpenBLAS thread per test process, set before numpy loads and inherited by the kernels, servers and commands a
# test starts: the suite's workers and their subprocesses already fill the cores, where a second BLAS thread each
# spins on the exact encoder's small products (chapter 5 of an adapter's book, `python -m dev.suite_time`). The
# vectors do not depend on it (tests/test_minilm_exact.py).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import pytest  # noqa: E402 (after the BLAS setting, which must precede numpy)

from fhs.retrieval import sparse_top_k  # noqa: E402 (likewise)
from fhs.retrieval.jit import use_user_cache  # noqa: E402 (likewise)

use_user_cache()
sparse_top_k.FIRST_SEARCH.done = sparse_top_k.FIRST_BATCH.done = True



@pytest.fixture(scope="session")
def smollm2_fhs_made(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One FinCL fact through FHS on SmolLM2 (smoke profile, a fresh cache), made once per session: its folder,
    its cache and its printed metrics."""
    from fhs.cli import main

    folder = tmp_path_factory.mktemp("smollm2-fhs")
    cache = folder / "cache" / "responses.sqlite"
    printed, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(err):
        code = main(["run", "--dataset", "fincl", "--method", "fhs", "--profile", "smoke", "--limit", "1", "--quiet",
                     "--out", str(folder / "run"), "--cache", str(cache)])
    assert code == 0, err.getvalue()
    return {"run": folder / "run", "cache": cache, "metrics": json.loads(printed.getvalue())}


@pytest.fixture
def smollm2_fhs_run(smollm2_fhs_made: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    """The shared run's folder and cache folder, copied into this test's own folder: a test may write beside them."""
    shutil.copytree(smollm2_fhs_made["run"], tmp_path / "run")
    shutil.copytree(smollm2_fhs_made["cache"].parent, tmp_path / "cache")
    return {"run": tmp_path / "run", "cache": tmp_path / "cache" / smollm2_fhs_made["cache"].name,
            "metrics": smollm2_fhs_made["metrics"]}
