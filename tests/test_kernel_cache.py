"""numba's kernels are cached in the user's cache folder: a read-only install and a second copy elsewhere find them."""

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parent.parent  # the checkout whose fhs the subprocesses import

# A package of one kernel compiled through fhs.retrieval.jit, as sparse_top_k's are: small, so it compiles in a
# second, with a first search wrapped in FirstCompile as bm25.Retriever's is.
KERNEL = '''
from fhs.retrieval.jit import FirstCompile, kernel

FIRST = FirstCompile("the toy kernels", __name__)


@kernel(nogil=True)
def total(values):
    out = 0.0
    for v in values:
        out += v
    return out
'''

RUN = '''
import sys
import numpy as np
from toykernels.sums import FIRST, total
print(FIRST.run(total, np.arange(4.0)))
print(sum(total.stats.cache_hits.values()), sum(total.stats.cache_misses.values()))
'''


def read_only_package(folder: Path) -> Path:
    package = folder / "toykernels"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sums.py").write_text(KERNEL)
    for path in (package / "__init__.py", package / "sums.py", package):
        path.chmod(stat.S_IREAD | stat.S_IEXEC if path.is_dir() else stat.S_IREAD)
    return folder


def run(site: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}  # as a user who set nothing
    env.update(FHS_CACHE=str(cache), PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]))
    return subprocess.run([sys.executable, "-c", RUN], env=env, capture_output=True, text=True, timeout=300)


def test_a_read_only_package_compiles_once_into_the_users_cache_and_a_second_copy_reuses_it(tmp_path):
    cache = tmp_path / "cache"
    first_site, second_site = read_only_package(tmp_path / "one"), read_only_package(tmp_path / "two")
    try:
        first = run(first_site, cache)
        assert first.returncode == 0, first.stderr
        assert first.stdout.split() == ["6.0", "0", "1"]  # compiled: a cache miss
        assert f"fhs: compiling the toy kernels (once: numba caches them in {cache / 'numba'})" in first.stderr
        assert "fhs: compiled the toy kernels in " in first.stderr
        assert list((cache / "numba").glob("*/*.nbi")), "nothing cached in the user's cache folder"
        assert not list((first_site / "toykernels").glob("__pycache__/*.nbi"))  # the package folder is read-only

        again = run(first_site, cache)
        elsewhere = run(second_site, cache)  # another install of the same source: another path, the same kernels
        for done in (again, elsewhere):
            assert done.returncode == 0, done.stderr
            assert done.stdout.split() == ["6.0", "1", "0"]  # loaded from the cache, not compiled
            assert "fhs: compil" not in done.stderr  # nothing to say
    finally:
        for site in (first_site, second_site):
            for path in (site / "toykernels", *(site / "toykernels").iterdir()):
                path.chmod(stat.S_IRWXU)
        shutil.rmtree(tmp_path, ignore_errors=True)


def test_the_notice_names_a_cache_under_home_without_the_home_folder():
    """The notice lands in a chapter's output, which a reader downloads: no absolute home path."""
    from fhs.retrieval.jit import _shown

    assert _shown(str(Path.home() / ".cache" / "fhs" / "numba")) == "~/.cache/fhs/numba"
    assert _shown("/srv/cache/numba") == "/srv/cache/numba"  # a folder the user chose elsewhere is theirs
