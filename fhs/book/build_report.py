"""What one build of the book cost, chapter by chapter: seconds, closing checks, new model calls.

A claim like "the cold book takes under an hour on this CPU, with every closing check
OK" needs the same table on every machine it is made on. This module reads it off a
built checkout: the run log (``_build/.notebooks/executions.json``) for each chapter's
seconds, the executed notebooks (``book/<stem>.ipynb``) for the counts line every
closing check prints, and the response cache for the model calls stored while each
chapter ran (a replayed call was stored by an earlier build and counts for none).

    python -m fhs.book.build_report .            # Markdown table of the last build
    python -m dev.cold_book                      # a cold build in a fresh clone, then a record of it
"""

from __future__ import annotations

import argparse
import json
import re
import sqlite3
import sys
from collections.abc import Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

STATUSES = ("OK", "OK*", "FAIL", "NEW")
# The line fhs.book.check prints under its table, e.g. "150 OK, 4 OK*. gap = ours - paper."
_COUNTS_LINE = re.compile(
    r"^(\d+ (?:OK\*?|FAIL|NEW)(?:, \d+ (?:OK\*?|FAIL|NEW))*)\. gap = ours - paper\.$", re.MULTILINE
)


@dataclass(frozen=True)
class ModelCalls:
    """Model calls stored in the response cache within one time window."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    seconds: float = 0.0


@dataclass(frozen=True)
class ChapterCost:
    chapter: str
    seconds: float
    checks: dict[str, int] = field(default_factory=dict)  # status -> count; empty: no closing check printed
    model: ModelCalls = ModelCalls()


def check_counts(text: str) -> dict[str, int]:
    """Every closing-check counts line in ``text``, added up by status."""
    counts = {status: 0 for status in STATUSES}
    for match in _COUNTS_LINE.finditer(text):
        for part in match.group(1).split(", "):
            number, status = part.split(" ", 1)
            counts[status] += int(number)
    return counts if any(counts.values()) else {}


def notebook_text(path: Path) -> str:
    """The text a notebook's cells printed (stream outputs and plain-text results)."""
    cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    pieces = []
    for cell in cells:
        for output in cell.get("outputs", []):
            text = (
                output.get("text")
                if output.get("output_type") == "stream"
                else (output.get("data") or {}).get("text/plain")
            )
            if text:
                pieces.append("".join(text) if isinstance(text, list) else text)
    return "\n".join(pieces)


def model_calls(cache: Path, start: float, end: float) -> ModelCalls:
    """Calls the response cache stored at ``start < created <= end`` (POSIX seconds)."""
    if not cache.is_file():
        return ModelCalls()
    with closing(sqlite3.connect(f"file:{cache}?mode=ro", uri=True)) as db:
        n, tin, tout, sec = db.execute(
            "SELECT COUNT(*), SUM(tokens_in), SUM(tokens_out), SUM(seconds) FROM responses "
            "WHERE created > ? AND created <= ?",
            (start, end),
        ).fetchone()
    return ModelCalls(int(n), int(tin or 0), int(tout or 0), float(sec or 0.0))


def chapter_costs(root: Path, cache: Path | None = None) -> list[ChapterCost]:
    """One row per chapter in the run log, in the order they finished."""
    log_path = root / "_build" / ".notebooks" / "executions.json"
    if not log_path.is_file():
        raise FileNotFoundError(f"{log_path}: no run log; build the book first (make book)")
    log: Mapping[str, Mapping] = json.loads(log_path.read_text(encoding="utf-8"))
    cache = cache or root / ".fhs-cache" / "responses.sqlite"
    rows = []
    for stem, entry in sorted(log.items(), key=lambda item: item[1]["finished"]):
        finished, seconds = datetime.fromisoformat(entry["finished"]).timestamp(), float(entry["seconds"])
        notebook = root / "book" / f"{stem}.ipynb"
        checks = check_counts(notebook_text(notebook)) if notebook.is_file() else {}
        # the log keeps whole seconds: the window reaches one second past the logged finish
        rows.append(ChapterCost(stem, seconds, checks, model_calls(cache, finished - seconds, finished + 1.0)))
    return rows


def checks_cell(checks: Mapping[str, int]) -> str:
    """``{"OK": 150, "OK*": 4}`` as "150 OK, 4 OK*" (as the check prints it); "none" if empty."""
    return ", ".join(f"{n} {s}" for s, n in checks.items() if n) or "none"


def table_rows(rows: Sequence[ChapterCost]) -> list[dict[str, object]]:
    """One plain dict per chapter, for a page's table."""
    return [
        {
            "chapter": r.chapter,
            "seconds": r.seconds,
            "closing checks": checks_cell(r.checks),
            "new model calls": r.model.calls,
            "prompt tokens": r.model.tokens_in,
            "reply tokens": r.model.tokens_out,
            "model-s": round(r.model.seconds, 1),
        }
        for r in rows
    ]


def markdown(rows: Sequence[ChapterCost], extra: Iterable[tuple[str, float]] = ()) -> str:
    """The table, with ``extra`` (label, seconds) steps such as the install, and a total."""
    lines = [
        "| step | seconds | closing checks | new model calls | prompt tokens | reply tokens | model-s |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    extra = list(extra)
    for label, seconds in extra:
        lines.append(f"| {label} | {seconds:.1f} | | | | | |")
    for row in table_rows(rows):
        lines.append(
            f"| {row['chapter']} | {row['seconds']:.1f} | {row['closing checks']} | "
            f"{row['new model calls']} | {row['prompt tokens']:,} | {row['reply tokens']:,} | "
            f"{row['model-s']:.1f} |"
        )
    totals = {s: sum(r.checks.get(s, 0) for r in rows) for s in STATUSES}
    seconds = sum(r.seconds for r in rows) + sum(s for _, s in extra)
    lines.append(
        f"| **total** | **{seconds:.1f}** ({seconds / 60:.1f} min) | {checks_cell(totals)} | "
        f"{sum(r.model.calls for r in rows)} | {sum(r.model.tokens_in for r in rows):,} | "
        f"{sum(r.model.tokens_out for r in rows):,} | {sum(r.model.seconds for r in rows):.1f} |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", default=".", help="the built checkout (default .)")
    parser.add_argument("--cache", default=None, help="response cache (default ROOT/.fhs-cache/responses.sqlite)")
    parser.add_argument(
        "--step",
        action="append",
        default=[],
        metavar="LABEL=SECONDS",
        help="a step outside the run log, listed first (e.g. install=139.2); repeatable",
    )
    args = parser.parse_args(argv)
    extra = []
    for text in args.step:
        label, _, seconds = text.partition("=")
        try:
            extra.append((label, float(seconds)))
        except ValueError:
            parser.error(f"--step {text!r}: expected LABEL=SECONDS, e.g. install=139.2")
    try:
        rows = chapter_costs(Path(args.root), Path(args.cache) if args.cache else None)
    except FileNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(markdown(rows, extra))
    return 0


if __name__ == "__main__":
    sys.exit(main())
