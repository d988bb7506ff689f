"""Reading JSON-lines files whose every line must be an object, with errors that name the line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.core.files import utf8_error


def iter_objects(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line; a bad line is an InputError naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise utf8_error(path) from None
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(
                f"not valid JSON ({error.msg} at column {error.colno})",
                path=path,
                line=number,
                fix="write one JSON object per line",
            ) from None
        if not isinstance(record, dict):
            raise InputError(
                f"expected a JSON object, got {type(record).__name__}",
                path=path,
                line=number,
                fix="write one JSON object per line",
            )
        yield number, record
