"""``fhs data fetch | check | lock``: the data fetched from its publishers and verified against the lock."""

from __future__ import annotations

import argparse
import math
import sys

from fhs.data.datadir import ENV_VAR, SOURCES
from fhs.data.download.pace import FetchLimits
from fhs.data.download.transfer import BASE_URL_ENV

SHOWN = 20  # missing or different files listed by name before a count
DEFAULTS = FetchLimits()


def _number(flag: str, unit: str, *, zero: bool = False):
    """An argparse type: a finite number above 0 (or >= 0 where ``zero``), in ``unit``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"--{flag} expects a number of {unit}, got {text!r}") from None
        if not math.isfinite(value) or value < 0 or (value == 0 and not zero):
            raise argparse.ArgumentTypeError(
                f"--{flag} must be a finite number of {unit} {'>= 0' if zero else 'above 0'}, got {text}"
            )
        return value

    return parse


def add_data_parser(commands) -> None:
    data = commands.add_parser("data", help="fetch the data from its publishers, or check a folder against the lock")
    actions = data.add_subparsers(dest="data_command", required=True)
    fetch = actions.add_parser(
        "fetch",
        help="download what is missing into $FHS_DATA (or --to), verified against the lock",
        description=f"Downloads every file of the lock that the data folder lacks, resuming interrupted downloads "
        f"and verifying each SHA-256 before it is moved into place. The folder is --to, else ${ENV_VAR}, "
        f"else a default under your data directory. ${BASE_URL_ENV}=URL fetches from a mirror laid "
        f"out as <URL>/<host>/<path>.",
    )
    fetch.add_argument(
        "--only", action="append", metavar="SOURCE", help=f"only this source ({', '.join(SOURCES)}); repeatable"
    )
    fetch.add_argument(
        "--to", default=None, help=f"the data folder (default: ${ENV_VAR}, else the user data directory)"
    )
    fetch.add_argument("--lock", default=None, help="a lock file other than the one shipped with fhs")
    fetch.add_argument("--quiet", action="store_true", help="no progress bars")
    fetch.add_argument(
        "--deadline",
        type=_number("deadline", "seconds"),
        default=DEFAULTS.deadline_s,
        metavar="SECONDS",
        help="stop the whole fetch after this long; what arrived is kept and the "
        "next fetch resumes it (default: %(default)g)",
    )
    fetch.add_argument(
        "--min-rate",
        type=_number("min-rate", "KB/s", zero=True),
        default=DEFAULTS.min_rate / 1000,
        metavar="KB/S",
        help=f"stop a download slower than this over {DEFAULTS.rate_window_s:g} s "
        f"(0: no minimum; default: %(default)g)",
    )
    fetch.add_argument(
        "--max-download",
        type=_number("max-download", "MB"),
        default=DEFAULTS.max_download / 1e6,
        metavar="MB",
        help="the most one download may send: a file the lock pins larger is refused, "
        "and one it gives no size (CodiEsp's zip) stops there (default: %(default)g)",
    )
    check = actions.add_parser("check", help="verify a data folder against the lock: what is missing or different")
    check.add_argument(
        "--data", default=None, help=f"the data folder (default: ${ENV_VAR}, else the user data directory)"
    )
    check.add_argument(
        "--only", action="append", metavar="SOURCE", help=f"only this source ({', '.join(SOURCES)}); repeatable"
    )
    check.add_argument("--lock", default=None, help="a lock file other than the one shipped with fhs")
    lock = actions.add_parser("lock", help="write the lock from a complete data folder (maintainers)")
    lock.add_argument("--from", dest="source", required=True, help="a complete data folder, e.g. ../shared/data")
    lock.add_argument(
        "--out",
        required=True,
        help="where to write it (required: the lock shipped with fhs is never rewritten in place; "
        "in a checkout, fhs/data/download/data.lock.json updates it)",
    )


def cmd_data(args: argparse.Namespace) -> int:
    from fhs.data.download.lock import load_lock

    if args.data_command == "lock":
        return _lock(args)
    from fhs.data.download.fetch import target_dir

    root, why = target_dir(args.to if args.data_command == "fetch" else args.data)
    print(f"data directory: {root} ({why})", flush=True)
    lock = load_lock(args.lock)
    if args.data_command == "fetch":
        return _fetch(lock, root, args, defaulted=why.startswith("the default"))
    return _check(lock, root, args.only)


def _fetch(lock, root, args, defaulted: bool) -> int:
    from fhs.data.download.fetch import fetch

    limits = FetchLimits(
        deadline_s=args.deadline, min_rate=args.min_rate * 1000, max_download=max(1, int(args.max_download * 1e6))
    )
    report = fetch(
        lock, root, args.only, say=lambda line: print(line, flush=True), progress=not args.quiet, limits=limits
    )
    total = report.present + report.fetched
    if report.fetched:
        print(
            f"fetched and verified {report.fetched:,} files ({report.bytes / 1e6:,.1f} MB received) in "
            f"{report.seconds:.1f} s; {report.present:,} were already there"
        )
    else:
        print(f"all {total:,} files of the lock are there; nothing to fetch (`fhs data check` verifies them)")
    if defaulted:
        print(f"the book and `fhs run` read ${ENV_VAR}: export {ENV_VAR}={root}")
    return 0


def _check(lock, root, only) -> int:
    from fhs.core.errors import InputError
    from fhs.data.download.check import check

    if root.exists() and not root.is_dir():
        raise InputError(
            "is a file, not a data folder",
            path=root,
            fix=f"point --data or ${ENV_VAR} at the folder `fhs data fetch` filled",
        )
    if not root.is_dir():
        raise InputError(
            "data directory does not exist",
            path=root,
            fix=f"fetch the data with `fhs data fetch`, or point ${ENV_VAR} at a copy",
        )
    result = check(lock, root, only)
    for name, (good, locked) in result.per_source.items():
        print(f"{name}: {good:,} of {locked:,} files verified")
    for path in result.missing[:SHOWN]:
        print(f"missing: {path}")
    for path, why in result.different[:SHOWN]:
        print(f"different: {path}: {why}")
    hidden = max(0, len(result.missing) - SHOWN) + max(0, len(result.different) - SHOWN)
    if hidden:
        print(f"... and {hidden:,} more")
    if result.ok:
        print(f"every file verified: {len(result.verified):,} files match the lock ({lock.path})")
        return 0
    print(
        f"{len(result.missing):,} missing, {len(result.different):,} different: `fhs data fetch` fetches the "
        f"missing ones; delete a different file first to fetch it again",
        file=sys.stderr,
    )
    return 1


def _lock(args) -> int:
    import json
    from pathlib import Path

    from fhs.core.files import write_text_atomic
    from fhs.core.outputs import check_out
    from fhs.data.download.build import ABOUT, build_lock
    from fhs.data.download.lock import dump_lock, parse_lock

    out = Path(args.out).expanduser()
    check_out(out, folders=[(args.source, "the data folder")], reads="the lock is built from")
    lock = build_lock(Path(args.source).expanduser())
    text = dump_lock(lock, ABOUT)
    parse_lock(json.loads(text), out)  # never write a lock that fetch and check would refuse
    write_text_atomic(out, text)
    print(f"{out}: {len(lock.files):,} files of {len(lock.sources)} sources, {out.stat().st_size:,} bytes")
    return 0
