"""The ``fhs`` command line: run a method on a dataset, check a domain file, or benchmark retrieval.

Bad input of any kind ends in one line on stderr that names the file, line or
field and the fix, and exit status 2.
"""

from __future__ import annotations

import sys

from fhs.cli.commands import cmd_archive, cmd_bench, cmd_domain, cmd_facts, cmd_plan, cmd_run, cmd_show, cmd_taxonomy
from fhs.cli.data_command import cmd_data
from fhs.cli.parser import build_parser
from fhs.core.errors import InputError
from fhs.llm.contract import BackendError

__all__ = ["build_parser", "main"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except InputError as error:
        print(f"fhs: error: {error}", file=sys.stderr)
        return 2
    kept = (
        f"; finished facts are kept in {args.out}, run the same command again to continue"
        if getattr(args, "out", None) and args.command != "archive"
        else ""
    )
    try:
        if args.command == "run":
            cmd_run(args)
        elif args.command == "bench":
            cmd_bench(args)
        elif args.command == "plan":
            cmd_plan(args)
        elif args.command == "archive":
            cmd_archive(args)
        elif args.command == "show":
            cmd_show(args)
        elif args.command == "taxonomy":
            cmd_taxonomy(args)
        elif args.command == "facts":
            cmd_facts(args)
        elif args.command == "domain":
            return cmd_domain(args)
        elif args.command == "data":
            return cmd_data(args)
    except InputError as error:
        print(f"fhs: error: {error}", file=sys.stderr)
        return 2
    except BackendError as error:
        print(f"fhs: error: {error}{kept}", file=sys.stderr)
        return 3
    except OSError as error:  # the disk, not the input: --out unwritable, full, or not a directory
        where = f"{error.filename}: " if error.filename else ""
        print(f"fhs: error: {where}{error.strerror or error}{kept}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fhs: stopped{kept.replace('; finished', ': finished')}" if kept else "fhs: stopped", file=sys.stderr)
        return 130
    return 0
