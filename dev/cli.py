"""What the developers' benchmarks share on their command lines: names and numbers from a comma list."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fhs.core.errors import InputError
from fhs.run.records import write_json_atomic

ROOT = Path(__file__).resolve().parent.parent  # the checkout: a child process imports dev from here


def names(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def numbers(text: str, flag: str) -> list[int]:
    try:
        values = [int(part) for part in names(text)]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        raise InputError(f"{text!r} is not a list of numbers", field=flag, fix="e.g. --n-batch 128,512")
    return values


def write_json(path: str | Path | None, result: Any) -> None:
    if path:
        write_json_atomic(path, result)


def request_stream_parser(prog: str, description: str, *, datasets: str, methods: Sequence[str],
                          facts: int) -> argparse.ArgumentParser:
    """The options of the benchmarks that build a request stream from methods run on a sample of facts."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--dataset", action="append", default=None, help=f"repeat for several (default {datasets})")
    parser.add_argument("--methods", default=",".join(methods), help="comma-separated method names")
    parser.add_argument("--facts", type=int, default=facts, help="facts per dataset, whole contexts")
    parser.add_argument("--data", default=None, help="data directory (default: $FHS_DATA)")
    parser.add_argument("--out", default=None, help="also write the result as JSON here")
    return parser
