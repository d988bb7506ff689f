"""One exception type for bad input, so the command line can print one clear line."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


class InputError(ValueError):
    """Bad input: names where it is (file, line, field), what is wrong and what to do.

    The command line prints ``str(error)`` as a single line and exits with status 2.
    """

    def __init__(
        self,
        problem: str,
        *,
        path: str | os.PathLike[str] | None = None,
        line: int | None = None,
        field: str | None = None,
        fix: str | None = None,
    ) -> None:
        self.problem = problem
        self.path = None if path is None else str(path)
        self.line = line
        self.field = field
        self.fix = fix
        super().__init__(self._render())

    def _render(self) -> str:
        where = []
        if self.path:
            where.append(self.path if self.line is None else f"{self.path}:{self.line}")
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.field:
            where.append(f"field '{self.field}'")
        text = ": ".join([", ".join(where), self.problem]) if where else self.problem
        if self.fix:
            text += f" ({self.fix})"
        return text


def shown(value: object, limit: int = 60) -> str:
    """A value as an error quotes it: a scalar's repr, cut at ``limit`` characters; a list or
    mapping by its size only (a YAML alias may make it enormous, and the field names it anyway)."""
    if isinstance(value, Mapping):
        return f"a mapping of {len(value)} key(s)"
    if isinstance(value, (list, tuple, set, frozenset)):
        return f"a list of {len(value)} value(s)"
    if isinstance(value, (str, bytes)) and len(value) > limit:
        return repr(value[:limit]) + f"... ({len(value):,} characters)"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def choose(registry: Mapping[str, T], name: str, what: str) -> T:
    """``registry[name]``, or an InputError naming the field and listing the valid names."""
    try:
        return registry[name]
    except KeyError:
        raise InputError(f"unknown {what} {name!r}", field=what, fix=f"choose one of {', '.join(registry)}") from None


WARNINGS = logging.getLogger("fhs.warnings")  # a handler here takes every warning instead of stderr


def warn(message: str) -> None:
    """One line on stderr that a run goes on despite something the user should know.

    Where a handler is attached to :data:`WARNINGS` (a book's chapter: ``fhs.book.page_warnings``)
    the warning goes to it instead."""
    if WARNINGS.handlers:
        WARNINGS.warning(message)
        return
    import sys

    print(f"fhs: warning: {message}", file=sys.stderr, flush=True)
