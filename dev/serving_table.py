"""``python -m dev.serving_table``: the recorded plans of :mod:`fhs.book.serving_table` made (``--run``: a dry run of
the ``paper`` profile; ``--from``: a saved plan), stamped with this checkout's commit, then the block rendered.

    python -m dev.serving_table --run              # dry-run the paper profile, write the records, render
    python -m dev.serving_table --from PLAN.json   # the same from a saved `fhs plan --json --gpu ...`
    python -m dev.serving_table [--check]          # re-render the block (or check it) from the records
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from fhs.book import serving_table as book
from fhs.book.serving_table import BEGIN, CLASSES, END, MAX_MODEL_LEN, PROFILE, records_from_plan, write_records

ROOT = Path(__file__).resolve().parent.parent
RECORDS = ROOT / book.RECORDS
PAGE = ROOT / book.PAGE

__all__ = ["BEGIN", "CLASSES", "END", "MAX_MODEL_LEN", "PAGE", "RECORDS", "load_records", "main", "records_from_plan"]


def load_records(folder: Path = RECORDS) -> list[dict]:
    """This checkout's recorded plans (:func:`fhs.book.serving_table.load_records`)."""
    return book.load_records(folder)


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return done.stdout.strip() or "unknown"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.serving_table", description=__doc__.split("\n")[0])
    parser.add_argument("--run", action="store_true", help="dry-run the paper profile first and write the records")
    parser.add_argument("--from", dest="source", default=None, help="a saved `fhs plan --json --gpu ...` output")
    parser.add_argument("--sample", type=int, default=20, help="with --run: facts sampled per dataset (default 20)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the block is out of date")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.run or args.source:
        if args.source:
            plan = json.loads(Path(args.source).read_text(encoding="utf-8"))
        else:
            from fhs.book.manifest import plan_profile

            plan, _ = plan_profile(PROFILE, sample=args.sample, server=CLASSES[0].server())
        write_records(records_from_plan(plan, _commit(), date.today().isoformat()), RECORDS)
    return book.main(["--records", str(RECORDS), "--page", str(PAGE), *(["--check"] if args.check else [])])


if __name__ == "__main__":
    sys.exit(main())
