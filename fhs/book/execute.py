"""Execute the book's chapters: Jupytext sources -> papermill -> ``book/<stem>.ipynb``.

The Jupyter Book build itself never executes anything (``execute_notebooks: off``);
this module does, so that the same command works on a laptop (profile ``cpu``)
and on a GPU box (profile ``paper``), with the parameters written down in one
file, ``fhs/book/profiles.yaml``.

Execution is incremental: a chapter is re-executed only when its *key* changed,
a hash of its source, the ``fhs`` package, ``pyproject.toml``, the parameters it
receives, the kernel and the data directory. A "summary" chapter (the
provenance page) also hashes the keys of every chapter before it and the git
commit, so it is redone whenever anything it reports changed. The run log
(``_build/.notebooks/executions.json`` and ``timings.tsv``) records each
execution with its time.

papermill and jupytext are imported only when a notebook actually runs, so the
pure parts (keys, plans; the TOC and profiles are in
:mod:`fhs.book.toc`) are importable and testable without them.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fhs.book.paths import shown_values, without_absolute_paths
from fhs.book.toc import PROFILES, Chapter, ProfileFile, chapters_from_toc, folded, load_profiles, merged
from fhs.core.errors import InputError
from fhs.core.files import write_text_atomic

KEY_VERSION = "1"  # bump to invalidate every stamp when the key's recipe changes
STATE_DIR = Path("_build") / ".notebooks"
BUILTIN_PARAMETERS = ("profile", "run_log")
PACKAGE_SUFFIXES = {".py", ".yaml", ".yml", ".txt", ".md", ".json"}


@dataclass(frozen=True)
class Plan:
    """What a run will do for one chapter, and why."""

    chapter: Chapter
    parameters: dict[str, Any]
    key: str
    reason: str  # "" = up to date

    @property
    def needed(self) -> bool:
        return bool(self.reason)


@dataclass
class RunLog:
    """executions.json: the last successful execution of each chapter."""

    path: Path
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def load(cls, path: Path) -> RunLog:
        if path.is_file():
            try:
                return cls(path, json.loads(path.read_text(encoding="utf-8")))
            except json.JSONDecodeError:
                pass  # a damaged log only costs a re-execution
        return cls(path, {})

    def save(self) -> None:
        write_text_atomic(self.path, json.dumps(self.entries, indent=2, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------- keys


def _hash_files(paths: Iterable[Path], root: Path, digest: hashlib._Hash) -> None:
    for path in sorted(paths):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")


def package_files(root: Path) -> list[Path]:
    """The files of the ``fhs`` package that can change a chapter's output."""
    return [
        p
        for p in (root / "fhs").rglob("*")
        if p.is_file() and p.suffix in PACKAGE_SUFFIXES and "__pycache__" not in p.parts
    ]


def package_digest(root: Path) -> str:
    digest = hashlib.sha256()
    files = package_files(root)
    pyproject = root / "pyproject.toml"
    if pyproject.is_file():
        files.append(pyproject)
    _hash_files(files, root, digest)
    return digest.hexdigest()


def chapter_key(
    chapter: Chapter,
    parameters: Mapping[str, Any],
    *,
    package: str,
    kernel: str,
    data_dir: str,
    extra: Iterable[str] = (),
) -> str:
    """The stamp: any change to what a chapter depends on changes this hash."""
    digest = hashlib.sha256()
    for part in (
        KEY_VERSION,
        chapter.stem,
        package,
        kernel,
        data_dir,
        json.dumps(parameters, sort_keys=True, default=str),
        *extra,
    ):
        digest.update(part.encode())
        digest.update(b"\0")
    digest.update(chapter.source.read_bytes())
    return digest.hexdigest()


def _archive_digest(path: Path) -> str:
    """An archive's SHA-256, once per process and file version (``missing`` when there is none)."""
    if not path.is_file():
        return "missing"
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _ARCHIVE_DIGESTS:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        _ARCHIVE_DIGESTS[key] = digest.hexdigest()
    return _ARCHIVE_DIGESTS[key]


_ARCHIVE_DIGESTS: dict[tuple[str, int, int], str] = {}


def git_commit(root: Path) -> str:
    """HEAD plus ``-dirty`` when tracked files differ; "unknown" outside a git checkout."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("-dirty" if dirty else "")


def plan(
    chapters: list[Chapter],
    profiles: ProfileFile,
    profile: str,
    log: RunLog,
    *,
    root: Path,
    kernel: str,
    overrides: Mapping[str, Any] | None = None,
    force: bool = False,
    declared: Mapping[str, set[str]] | None = None,
) -> list[Plan]:
    """Decide, for each chapter, its parameters, its key and whether it must run.

    ``declared`` maps a chapter to the names in its ``parameters`` cell; only
    those are passed (papermill would otherwise warn about each unknown one), and
    only those enter the key, so a parameter another chapter uses does not force
    this one to re-run.
    """
    package = package_digest(root)
    data_dir = os.environ.get("FHS_DATA", "")
    plans: list[Plan] = []
    # a summary page reports on every other chapter, wherever the TOC lists it, so it runs after them
    for chapter in sorted(chapters, key=lambda c: c.summary):
        parameters = merged(profiles.parameters(profile, chapter.stem), dict(overrides or {}))
        parameters["run_log"] = str(STATE_DIR / "executions.json")  # notebooks run in root
        if declared is not None:
            names = declared.get(chapter.stem, set())
            parameters = {k: v for k, v in folded(parameters, names).items() if k in names}
        extra: list[str] = []
        if chapter.summary:
            extra = [p.key for p in plans] + [git_commit(root)]
        replay = parameters.get("replay") or (parameters.get("server") or {}).get("replay")
        if replay:  # the archive's content, not only its name, decides the answers
            extra.append(_archive_digest(Path(replay)))
        key = chapter_key(chapter, parameters, package=package, kernel=kernel, data_dir=data_dir, extra=extra)
        previous = log.entries.get(chapter.stem, {})
        if force:
            reason = "forced"
        elif not chapter.output.is_file():
            reason = "no output yet"
        elif previous.get("key") != key:
            reason = "source, package or parameters changed" if previous else "never run here"
        else:
            reason = ""
        plans.append(Plan(chapter, parameters, key, reason))
    return plans


# ----------------------------------------------------------------------------- running


def read_source(chapter: Chapter):
    """The Jupytext source as an nbformat notebook."""
    import jupytext

    return jupytext.read(chapter.source)


def declared_parameters(notebook) -> set[str]:
    """Names assigned in the cell tagged ``parameters`` (what papermill may override)."""
    import ast

    for cell in notebook["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            names: set[str] = set()
            for node in ast.parse(cell["source"]).body:
                targets = []
                if isinstance(node, ast.Assign):
                    targets = node.targets
                elif isinstance(node, ast.AnnAssign):
                    targets = [node.target]
                names.update(t.id for t in targets if isinstance(t, ast.Name))
            return names
    return set()


def check_kernel(kernel: str) -> str:
    """Fail early if ``kernel`` would start another Python than this one (no ``fhs`` there)."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec(kernel)
    except NoSuchKernel:
        raise InputError(
            f"no Jupyter kernel named {kernel!r}",
            field="--kernel",
            fix=f"{sys.executable} -m ipykernel install --sys-prefix --name {kernel}",
        ) from None
    program = spec.argv[0] if spec.argv else ""
    # jupyter_client runs a spec whose program is a bare "python[3[.x]]" with sys.executable
    bare = {"python", f"python{sys.version_info[0]}", "python{}.{}".format(*sys.version_info[:2])}
    if program in bare or Path(program) == Path(sys.executable):
        return sys.executable
    raise InputError(
        f"kernel {kernel!r} starts {program}, not this environment's {sys.executable}",
        field="--kernel",
        fix=f"{sys.executable} -m ipykernel install --sys-prefix --name fhs, then --kernel fhs",
    )


class NotebookFailed(RuntimeError):
    """A chapter raised; the message carries the failing cell and its traceback."""


def kernel_environment(profile: str, env: Mapping[str, str]) -> dict[str, str]:
    """The environment a chapter's kernel starts with under ``profile``.

    A profile that runs several facts at once (a GPU server's, 128 threads) gets a
    C heap without per-thread caches of freed blocks, which made up half of a long
    run's growth in memory (``fhs.core.glibc_heap.without_thread_caches``); a one-fact-at-a-time
    profile (the CPU book) runs as it always did.
    """
    from fhs.core.glibc_heap import without_thread_caches
    from fhs.run.profiles import PROFILES

    known = PROFILES.get(profile)
    return without_thread_caches(env) if known is not None and known.workers > 1 else dict(env)


@contextmanager
def _environment(env: Mapping[str, str] | None) -> Iterator[None]:
    """``os.environ`` replaced by ``env`` for the block (a kernel papermill starts inherits it)."""
    if env is None:
        yield
        return
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def execute(
    plan_item: Plan,
    *,
    kernel: str,
    root: Path,
    failed_dir: Path,
    progress_bar: bool = True,
    timeout: int | None = None,
    env: Mapping[str, str] | None = None,
) -> float:
    """Run one chapter with papermill; write its output atomically; return the seconds.

    ``env``: the kernel's environment (default: this process's)."""
    import nbformat
    import papermill
    from papermill.exceptions import PapermillExecutionError

    chapter = plan_item.chapter
    notebook = read_source(chapter)
    # a source without a Jupytext header has no kernel metadata, which papermill needs
    notebook.metadata.setdefault("kernelspec", {"name": kernel, "language": "python", "display_name": "Python 3"})
    notebook.metadata.setdefault("language_info", {"name": "python"})
    # the reader sees the parameters that ran (papermill's injected cell), not the defaults
    for cell in notebook.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "parameters" in tags and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
    work = failed_dir.parent / "work"
    work.mkdir(parents=True, exist_ok=True)
    source_ipynb = work / f"{chapter.stem}.source.ipynb"
    nbformat.write(notebook, source_ipynb)
    partial = work / f"{chapter.stem}.ipynb"
    started = time.perf_counter()
    try:
        with _environment(env), _ipc_kernel() as kernel_config:
            papermill.execute_notebook(
                str(source_ipynb),
                str(partial),
                parameters=plan_item.parameters,
                kernel_name=kernel,
                progress_bar=progress_bar,
                cwd=str(root),
                execution_timeout=timeout,
                **kernel_config,
            )
    except PapermillExecutionError as error:
        failed_dir.mkdir(parents=True, exist_ok=True)
        kept = failed_dir / f"{chapter.stem}.ipynb"
        if partial.is_file():
            partial.replace(kept)
        traceback = _strip_ansi("\n".join(error.traceback))
        raise NotebookFailed(
            f"{chapter.source} failed in cell {error.cell_index} "
            f"(execution count {error.exec_count}):\n"
            f"--- cell source ---\n{error.source}\n--- traceback ---\n{traceback}\n"
            f"--- the executed notebook up to the failure: {kept}"
        ) from None
    seconds = time.perf_counter() - started
    without_absolute_paths(partial, chapter.source, chapter.output, plan_item.parameters, root)
    datasets = plan_item.parameters.get("datasets")
    if isinstance(datasets, list):
        hide_absent_prose(partial, [str(name) for name in datasets])
    chapter.output.parent.mkdir(parents=True, exist_ok=True)
    partial.replace(chapter.output)
    return seconds


@contextmanager
def _ipc_kernel() -> Iterator[dict[str, Any]]:
    """papermill's arguments for a kernel on IPC transport (sockets in a private folder, removed after).

    Over TCP, ipykernel logs a warning per chapter that its traffic is not encrypted; the
    kernel and the runner share one machine, so a local socket is what they need. Where
    there are no Unix sockets the kernel keeps jupyter_client's TCP default."""
    if os.name != "posix":
        yield {}
        return
    import tempfile

    from traitlets.config import Config

    # a short folder: a Unix socket's path must fit in about 100 bytes
    with tempfile.TemporaryDirectory(prefix="fhs-kernel-") as folder:
        yield {"config": Config({"KernelManager": {"transport": "ipc", "ip": str(Path(folder) / "kernel")}})}


def log_entry(plan_item: Plan, profile: str, seconds: float, root: Path) -> dict[str, Any]:
    """A chapter's line in the run log; the Provenance page prints its parameters, so no absolute path."""
    return {
        "key": plan_item.key,
        "profile": profile,
        "seconds": round(seconds, 1),
        "finished": _now(),
        "parameters": shown_values(plan_item.parameters, root),
    }


NEEDS_TAG = "needs-"


def hide_absent_prose(path: Path, datasets: list[str]) -> int:
    """Remove from the page each cell tagged ``needs-X`` for a dataset X it did not run on.

    A paragraph that states what the page shows on FinCL (tag ``needs-fincl``) is false on a
    page without FinCL; the tag keeps it in the source and off such a page. A code cell so tagged
    still runs (it sets what later cells read) but a page without the dataset does not show its
    branches. A cell with several such tags needs all of them. Returns how many cells were hidden."""
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    hidden = 0
    for cell in notebook.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        needs = [tag[len(NEEDS_TAG) :] for tag in tags if tag.startswith(NEEDS_TAG)]
        if needs and not all(need in datasets for need in needs) and "remove-cell" not in tags:
            cell.metadata["tags"] = [*tags, "remove-cell"]
            hidden += 1
    if hidden:
        nbformat.write(notebook, path)
    return hidden


def _strip_ansi(text: str) -> str:
    import re

    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", text)


def append_timing(path: Path, profile: str, stem: str, seconds: float, status: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    with path.open("a", encoding="utf-8") as handle:
        if new:
            handle.write("finished\tprofile\tchapter\tseconds\tstatus\n")
        handle.write(f"{_now()}\t{profile}\t{stem}\t{seconds:.1f}\t{status}\n")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run(
    root: Path,
    profile: str,
    *,
    only: Iterable[str] = (),
    force: bool = False,
    overrides: Mapping[str, Any] | None = None,
    kernel: str = "python3",
    dry_run: bool = False,
    progress_bar: bool = True,
    timeout: int | None = None,
    out=None,
    profiles_file: Path = PROFILES,
) -> int:
    """Plan and execute the book's chapters for ``profile``; return a process exit status."""
    out = out or sys.stdout
    profiles = load_profiles(profiles_file)
    profiles.profile(profile)  # unknown profile: fail before anything else
    chapters = chapters_from_toc(root, summaries=profiles.summaries)
    only = set(only)
    unknown = only - {c.stem for c in chapters}
    if unknown:
        raise InputError(
            f"not a notebook chapter in _toc.yml: {', '.join(sorted(unknown))}",
            field="--only",
            fix=f"choose from {', '.join(c.stem for c in chapters)}",
        )
    state_dir = root / STATE_DIR
    log = RunLog.load(state_dir / "executions.json")
    declared = {c.stem: declared_parameters(read_source(c)) for c in chapters}
    for chapter in chapters:
        if not declared[chapter.stem]:
            raise InputError(
                "no cell tagged 'parameters'",
                path=chapter.source,
                fix='add "# %% tags=[\\"parameters\\"]" above the parameter cell',
            )
    plans = plan(
        chapters, profiles, profile, log, root=root, kernel=kernel, overrides=overrides, force=force, declared=declared
    )
    if only:  # the named chapters, plus the summary page that reports on them
        plans = [p for p in plans if p.chapter.stem in only or p.chapter.summary]
    todo = [p for p in plans if p.needed]
    print(f"profile {profile}: {len(todo)} of {len(plans)} chapter(s) to execute", file=out)
    for p in plans:
        state = f"run ({p.reason})" if p.needed else "up to date"
        print(f"  {p.chapter.stem:<28} {state}", file=out)
        if dry_run and p.needed:
            print(f"      parameters: {json.dumps(p.parameters, sort_keys=True)}", file=out)
    if dry_run or not todo:
        return 0
    check_kernel(kernel)
    env = kernel_environment(profile, os.environ)
    total = 0.0
    for number, p in enumerate(todo, start=1):
        print(f"[{number}/{len(todo)}] {p.chapter.stem} -> {p.chapter.output.relative_to(root)}", file=out, flush=True)
        try:
            seconds = execute(
                p,
                kernel=kernel,
                root=root,
                failed_dir=state_dir / "failed",
                progress_bar=progress_bar,
                timeout=timeout,
                env=env,
            )
        except NotebookFailed as error:
            append_timing(state_dir / "timings.tsv", profile, p.chapter.stem, 0.0, "failed")
            log.entries.pop(p.chapter.stem, None)
            log.save()
            print(f"\nFAILED: {error}", file=sys.stderr, flush=True)
            return 1
        total += seconds
        log.entries[p.chapter.stem] = log_entry(p, profile, seconds, root)
        log.save()
        append_timing(state_dir / "timings.tsv", profile, p.chapter.stem, seconds, "ok")
        print(f"      done in {seconds:.1f} s", file=out, flush=True)
    print(f"executed {len(todo)} chapter(s) in {total:.1f} s; log: {log.path.relative_to(root)}", file=out)
    return 0
