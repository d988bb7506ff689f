"""The suite's set-up: numba's kernels, ours and ranx's, compile once per machine into the user's cache folder.

The notice of a first compile (``fhs.retrieval.jit.FirstCompile``) is for a user's first run;
``tests/test_kernel_cache.py`` checks it, and here it is marked said, so that a test reading
stderr reads the same lines on a machine that has not compiled the kernels yet.
"""

from fhs.retrieval import sparse_top_k
from fhs.retrieval.jit import use_user_cache

use_user_cache()
sparse_top_k.FIRST_SEARCH.done = sparse_top_k.FIRST_BATCH.done = True
