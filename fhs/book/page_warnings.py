"""A chapter's warnings: every one into the page's log, one line under the cell that raised them.

A run of chapter 2 on a small model warns once per run and stage that answers could not
be parsed, and a line per warning reads as a wall on the page. While a chapter runs in a
notebook, :func:`fhs.core.errors.warn` hands each warning to :class:`PageWarnings`, which
appends it to ``<runs_dir>/<profile>/logs/<chapter>.log``, and after each cell the page
shows one line: the warning itself when there was one, else how many, the first, and
where the rest are.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from fhs.book.paths import shown_path
from fhs.core.errors import WARNINGS
from fhs.core.files import write_text_atomic

FIRST_CHARS = 200  # how much of the first warning the summary line quotes


def log_path(runs_dir: str | Path, profile: str, chapter: str) -> Path:
    return Path(runs_dir) / profile / "logs" / f"{chapter}.log"


class PageWarnings(logging.Handler):
    """Appends each warning to ``path`` and holds the cell's warnings until :meth:`summary` takes them."""

    def __init__(self, path: Path) -> None:
        super().__init__(level=logging.WARNING)
        self.path = path
        self.pending: list[str] = []
        write_text_atomic(path, "")  # this execution's warnings only

    def emit(self, record: logging.LogRecord) -> None:  # called under the handler's lock
        message = record.getMessage()
        with self.path.open("a", encoding="utf-8") as log:
            log.write(f"fhs: warning: {message}\n")
        self.pending.append(message)

    def summary(self) -> str | None:
        """One line for the warnings since the last call (None when there were none)."""
        self.acquire()
        try:
            taken, self.pending = self.pending, []
        finally:
            self.release()
        if not taken:
            return None
        if len(taken) == 1:
            return f"fhs: warning: {taken[0]}"
        first = taken[0] if len(taken[0]) <= FIRST_CHARS else taken[0][:FIRST_CHARS] + "…"
        return f"fhs: {len(taken)} warnings, the first: {first} (every one in {shown_path(self.path)})"

    def after_cell(self, result: object = None) -> None:
        """IPython's post_run_cell event: the cell's warnings, in one line on its stderr."""
        line = self.summary()
        if line:
            print(line, file=sys.stderr, flush=True)


def collect_warnings(path: Path) -> PageWarnings | None:
    """In a notebook, send ``fhs`` warnings to ``path`` and summarise each cell's in one line under it.

    Outside IPython (a script, a test) nothing changes and None is returned. Opening a page
    again in the same kernel replaces the earlier page's collector."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None:
        return None
    for old in [h for h in WARNINGS.handlers if isinstance(h, PageWarnings)]:
        WARNINGS.removeHandler(old)
        shell.events.unregister("post_run_cell", old.after_cell)
    handler = PageWarnings(path)
    WARNINGS.addHandler(handler)
    WARNINGS.propagate = False  # the page's line stands for them; no second copy through the root logger
    shell.events.register("post_run_cell", handler.after_cell)
    return handler
