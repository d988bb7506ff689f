"""numba's compiled kernels: cached once per machine in the user's cache folder, and announced when they compile.

numba caches a kernel beside its source (``__pycache__``) where that folder is writable, so
every new virtual environment compiled the kernels afresh, and a read-only install fell back
to a folder of numba's own. :func:`use_user_cache` points numba at
``fhs.core.files.cache_dir("numba")`` (``$FHS_CACHE/numba``; a ``NUMBA_CACHE_DIR`` the user
set is kept), for our kernels and any other package's compiled after it (ranx's, in the
tests), and names each source file's cache folder by its path inside its package and its
content, not by where it is installed: a new clone or virtual environment finds the kernels
another compiled, and an edited file gets a folder of its own.

:class:`FirstCompile` says on stderr, even under ``--quiet``, that the search kernels are
compiling and how long that took: it happens once per machine, takes about a minute, and
would otherwise look like a hung run.
"""

from __future__ import annotations

import functools
import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fhs.core.files import cache_dir

CACHE_ENV = "NUMBA_CACHE_DIR"


def use_user_cache() -> Path:
    """Point numba's cache at the user's cache folder (before or after numba is imported); the folder."""
    if not os.environ.get(CACHE_ENV):
        os.environ[CACHE_ENV] = str(cache_dir("numba"))
    folder = os.environ[CACHE_ENV]
    config = sys.modules.get("numba.core.config")
    if config is not None:  # numba read the environment at import: tell it too
        config.CACHE_DIR = folder  # type: ignore[attr-defined]  # numba's config module, found at run time
    _install_locator()
    return Path(folder)


@functools.cache
def _subpath(py_file: str) -> str:
    """``<folder>_<sha1 of the file's path inside its package and its bytes>``."""
    path = Path(py_file).resolve()
    top = path.parent
    while (top / "__init__.py").exists() and top.parent != top:
        top = top.parent
    digest = hashlib.sha1(path.relative_to(top).as_posix().encode() + b"\0" + path.read_bytes()).hexdigest()
    return f"{path.parent.name}_{digest}"


@functools.cache
def _install_locator() -> None:
    """Put a locator first in numba's list that keys the user cache by package path and content."""
    try:
        from numba.core import caching
    except ImportError:  # numba is optional for what does not search
        return

    class ByContent(caching.UserProvidedCacheLocator):
        @classmethod
        def get_suitable_cache_subpath(cls, py_file):
            return _subpath(py_file)

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)  # numba >= 0.68, older
    classes = getattr(impl, "_locator_classes", None)
    if isinstance(classes, list):  # else numba's own user-cache locator, keyed by the install path
        classes.insert(0, ByContent)


KERNELS: list = []  # every kernel compiled through :func:`kernel`, for :class:`FirstCompile`'s counts


def kernel(**options: Any) -> Callable:
    """``numba.njit(cache=True, **options)``, cached in the user's cache folder and listed in ``KERNELS``."""
    use_user_cache()
    from numba import njit

    compile_ = njit(cache=True, **options)

    def register(function: Callable) -> Any:
        dispatcher = compile_(function)
        KERNELS.append(dispatcher)
        return dispatcher

    return register


def kernels_of(module: str) -> list:
    """The kernels defined in ``module`` (a dotted name)."""
    return [d for d in KERNELS if getattr(d, "py_func", None) is not None and d.py_func.__module__ == module]


class FirstCompile:
    """Runs the first call of a search path, saying on stderr when it compiles kernels and how long that took.

    ``done`` turns true after the first call; callers test it before calling :meth:`run`, so a
    search afterwards costs one attribute read.
    """

    def __init__(self, what: str, module: str) -> None:
        self.what, self.module = what, module
        self.done = False
        self._lock = threading.Lock()

    def run(self, work: Callable, *args: Any) -> Any:
        with self._lock:  # threads that search at once wait for one compile
            if self.done:
                return work(*args)
            dispatchers = kernels_of(self.module)
            if not all(_cached(d) for d in dispatchers):
                print(
                    f"fhs: compiling {self.what} (once: numba caches them in {_shown(cache_folder())})",
                    file=sys.stderr,
                    flush=True,
                )
            before, started = _misses(dispatchers), time.perf_counter()
            result = work(*args)
            compiled = _misses(dispatchers) - before
            if compiled:
                print(
                    f"fhs: compiled {self.what} in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True
                )
            self.done = True
            return result


def cache_folder() -> str:
    return os.environ.get(CACHE_ENV) or str(cache_dir("numba"))


def _shown(folder: str) -> str:
    """``~/...`` for a folder under the home folder: the notice lands in built pages a reader downloads."""
    path, home = Path(folder), Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else folder


def _cached(dispatcher: Any) -> bool:
    """Whether numba has an index for the kernel in its cache (it may still compile a new signature)."""
    index = getattr(getattr(getattr(dispatcher, "_cache", None), "_cache_file", None), "_index_path", None)
    return index is None or os.path.exists(index)


def _misses(dispatchers: list) -> int:
    """Signatures compiled so far (numba counts a compile as a cache miss)."""
    return sum(sum(d.stats.cache_misses.values()) for d in dispatchers if hasattr(d, "stats"))
