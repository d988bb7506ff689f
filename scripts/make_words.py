#!/usr/bin/env python
"""Run a command whose arguments include a user's values: the Makefile's way to pass them as data.

    python scripts/make_words.py PROGRAM [ARG | @NAME]...

``@NAME`` stands for the words of the environment variable ``NAME``, split as the shell splits
words (quotes and backslashes group them) but never expanded or run: a `...` or $(...) in a
value stays text. A value that names one existing path, spaces and all, is that one word, so
``make book DATASETS="my specs/a.yaml"`` needs no inner quotes.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path


def words(name: str) -> list[str]:
    value = os.environ.get(name, "").strip()
    if value and Path(value).exists():
        return [value]
    try:
        return shlex.split(value)
    except ValueError as error:  # an unclosed quote
        raise SystemExit(f"make: {name.removeprefix('FHS_MK_')}: {error} in {value!r} (quote a value with "
                         "spaces as the shell does, e.g. \"my specs/a.yaml\" b.yaml)") from None


def main(argv: list[str]) -> None:
    command = [word for arg in argv for word in (words(arg[1:]) if arg.startswith("@") else [arg])]
    if not command:
        raise SystemExit("make_words.py: no command given")
    os.execvp(command[0], command)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except SystemExit as stop:
        if isinstance(stop.code, str):
            print(stop.code, file=sys.stderr)
            sys.exit(2)
        raise
