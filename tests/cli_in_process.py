"""``python -m fhs.cli`` run in the test's own process, for tests about what the command says, not the process.

A new interpreter costs each case a second of imports. The result is the ``CompletedProcess`` a subprocess
would give: the exit status ``sys.exit(main())`` would, and an uncaught exception written to stderr as its
traceback (so a test's ``"Traceback" not in stderr`` still sees one). Not collected by pytest (no ``test_``
prefix).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import traceback
from collections.abc import Iterator, Mapping
from pathlib import Path


@contextlib.contextmanager
def environment(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``env`` over it for the block, as a child process given ``{**os.environ, **env}``."""
    before = {name: os.environ.get(name) for name in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def fhs(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess:
    """``fhs ARGS`` run from ``cwd``, its stdout and stderr captured."""
    from fhs.cli import main

    out, err = io.StringIO(), io.StringIO()
    with (contextlib.chdir(cwd), environment(env or {}), contextlib.redirect_stdout(out),
          contextlib.redirect_stderr(err)):
        try:
            code = main(list(args))
        except SystemExit as stop:  # argparse's own usage errors
            code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except Exception:
            traceback.print_exc()
            code = 1
    return subprocess.CompletedProcess(["fhs", *args], code, out.getvalue(), err.getvalue())
