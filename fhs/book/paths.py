"""How a built page names a file: never by the machine's absolute path.

A reader downloads the executed notebooks, so whatever a page prints or carries in its
metadata (papermill's paths and parameters, a check's regression file) is shown relative
to the folder the chapter ran in or to the checkout, ``~/...`` under the home folder, else
by its last two parts.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from fhs.core.urls import public_url

CHECKOUT = Path(__file__).resolve().parents[2]  # the folder holding the fhs package


def shown_path(path: str | os.PathLike, root: str | os.PathLike | None = None) -> str:
    """``path`` as a page may print it: relative to ``root`` (default: the working folder) or the checkout
    when inside one of them, ``~/...`` under the home folder, else ``…/`` and its last two parts."""
    resolved = Path(path).expanduser().resolve()
    bases = ((Path(root or Path.cwd()).resolve(), ""), (CHECKOUT, ""), (Path.home().resolve(), "~/"))
    for base, prefix in bases:
        if resolved.is_relative_to(base):
            return prefix + (str(resolved.relative_to(base)) if resolved != base else ".")
    return "…/" + "/".join(resolved.parts[-2:])


def shown_values(value: Any, root: str | os.PathLike | None = None) -> Any:
    """``value`` with every absolute path in it (a string, in a list or mapping at any depth) shown as
    :func:`shown_path` shows it, and every URL without its user info (a server's password in
    ``base_url``); anything else is left as it is."""
    if isinstance(value, str):
        return shown_path(value, root) if os.path.isabs(value) else public_url(value)
    if isinstance(value, Mapping):
        return {key: shown_values(item, root) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(shown_values(item, root) for item in value)
    return value


def without_absolute_paths(
    notebook_path: Path, source: Path, output: Path, parameters: Mapping[str, Any], root: Path
) -> None:
    """Rewrite papermill's record of a run in an executed notebook so that it names no absolute path.

    papermill stores its input and output paths and the parameters (a replay archive, a
    dataset spec given by its absolute path) in the notebook's metadata and in the cell it
    injects; a reader downloads that notebook, so each is shown as :func:`shown_path` shows
    it: ``source`` (the chapter's Jupytext file) and ``output`` (its page) relative to
    ``root`` or the checkout."""
    import nbformat

    notebook = nbformat.read(notebook_path, as_version=4)
    record = notebook.metadata.get("papermill")
    if record is not None:
        record["input_path"] = shown_path(source, root)
        record["output_path"] = shown_path(output, root)
        record["parameters"] = shown_values(record.get("parameters") or {}, root)
    replaced = {value: shown_values(value, root) for value in _strings(parameters)}
    replaced = {value: shown for value, shown in replaced.items() if shown != value}
    for cell in notebook.cells:
        if "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            for value in sorted(replaced, key=len, reverse=True):  # a longer path before its own prefix
                cell.source = cell.source.replace(value, replaced[value])
    nbformat.write(notebook, notebook_path)


def _strings(value: Any) -> Iterator[str]:
    """Every string in ``value``, at any depth of its lists and mappings."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
