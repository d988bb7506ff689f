"""One exception type for bad input, so the command line can print one clear line."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
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
        path: str | Path | None = None,
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
        text = (": ".join([", ".join(where), self.problem]) if where else self.problem)
        if self.fix:
            text += f" ({self.fix})"
        return text


def choose(registry: Mapping[str, T], name: str, what: str) -> T:
    """``registry[name]``, or an InputError naming the field and listing the valid names."""
    try:
        return registry[name]
    except KeyError:
        raise InputError(f"unknown {what} {name!r}", field=what,
                         fix=f"choose one of {', '.join(registry)}") from None


def warn(message: str) -> None:
    """One line on stderr that a run goes on despite something the user should know."""
    import sys

    print(f"fhs: warning: {message}", file=sys.stderr, flush=True)
