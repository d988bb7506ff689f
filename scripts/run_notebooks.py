#!/usr/bin/env python
"""Execute the book's notebook chapters with papermill for one profile.

    python scripts/run_notebooks.py --profile cpu            # what `make notebooks` runs
    python scripts/run_notebooks.py --profile paper -p base_url=http://gpu:8000/v1
    python scripts/run_notebooks.py --profile paper --replay paper.fhsa     # a GPU run, no GPU
    python scripts/run_notebooks.py --only 01_readiness_gap --force
    python scripts/run_notebooks.py --dry-run                # what would run, and why

Chapters come from _toc.yml (book/X backed by notebooks/X.py), parameters from
fhs/book/profiles.yaml; outputs go to book/X.ipynb. Unchanged chapters are
skipped (see fhs/book/execute.py for what "unchanged" means).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout even before `pip install -e .`

from fhs.book.execute import run  # noqa: E402
from fhs.book.registry import REGISTRY  # noqa: E402
from fhs.book.toc import PROFILES, check_chapters, load_profiles, parse_assignment, parse_mapping  # noqa: E402
from fhs.core.errors import InputError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    profiles = ", ".join(load_profiles(PROFILES).profiles)
    parser.add_argument("--profile", default="cpu", help=f"{profiles} (fhs/book/profiles.yaml; default cpu)")
    parser.add_argument("--only", action="append", default=[], metavar="STEM",
                        help="execute only this chapter (repeatable); the provenance page follows")
    parser.add_argument("--force", action="store_true", help="re-execute even if unchanged")
    parser.add_argument("-p", "--parameter", action="append", default=[], metavar="NAME=VALUE",
                        help="override a chapter parameter (value read as YAML); a key of the server or sample "
                             "mapping may be given alone (-p base_url=URL) or dotted (-p server.base_url=URL); "
                             "repeatable")
    parser.add_argument("-y", "--yaml", action="append", default=[], metavar="YAML",
                        help="override parameters with a YAML mapping, as papermill's -y does "
                             "(-y 'datasets: [my.yaml]'); repeatable")
    parser.add_argument("--kernel", default="python3",
                        help="Jupyter kernel; must run this Python (default python3)")
    parser.add_argument("--timeout", type=int, default=None,
                        help="seconds one cell may take (default: no limit)")
    parser.add_argument("--replay", default=None, metavar="ARCHIVE",
                        help="answer every model call from an `fhs archive` file, with no server")
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop")
    parser.add_argument("--no-progress", action="store_true", help="no per-cell progress bar")
    args = parser.parse_args(argv)
    try:
        overrides = {}
        for text in args.yaml:
            overrides.update(parse_mapping(text))
        overrides.update(parse_assignment(text) for text in args.parameter)
        if args.replay:
            overrides["replay"] = str(Path(args.replay).resolve())
        check_chapters(ROOT / "_toc.yml", REGISTRY.stems)  # a chapter the registry lacks is planned by nothing
        return run(ROOT, args.profile, only=args.only, force=args.force, overrides=overrides,
                   kernel=args.kernel, dry_run=args.dry_run, progress_bar=not args.no_progress,
                   timeout=args.timeout)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
