"""Options renamed for a clearer word: the former spelling is accepted for one release, said so in
``--help``, and a one-line note on stderr tells whoever uses it the new one."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_renamed(parser: Any, new: str, old: str, *, help: str, **kw: Any) -> argparse.Action:
    """``parser.add_argument(new, old, ...)``: the option under its new name, its old one still accepted."""
    base = parser._registry_get("action", kw.pop("action", None), argparse._StoreAction)
    return parser.add_argument(new, old, action=_noting(base), help=f"{help} (old spelling {old} still accepted)", **kw)


def _noting(base: type[argparse.Action]) -> type[argparse.Action]:
    class Noting(base):  # type: ignore[valid-type, misc]  # argparse's action classes are chosen at run time
        def __call__(
            self,
            parser: argparse.ArgumentParser,
            namespace: argparse.Namespace,
            values: Any,
            option_string: str | None = None,
        ) -> None:
            new = self.option_strings[0]
            if option_string is not None and option_string != new:
                print(f"fhs: {option_string} is now {new}; the old spelling goes in the next release", file=sys.stderr)
            super().__call__(parser, namespace, values, option_string)

    return Noting
