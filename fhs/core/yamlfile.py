"""YAML a user wrote (spec, domain, profile and regression files, option values), read within bounds.

PyYAML shares an aliased value instead of copying it, so parsing an alias bomb
(anchors nested a few levels deep, each referenced ten times) is quick; what
explodes is every later walk that copies or prints the value: a stamp's
``asdict``, a JSON dump, an error message. A document is therefore refused
before any of it is used when its aliases would add more than
``MAX_ALIAS_VALUES`` values to it, when an alias refers to itself, or when it
nests deeper than Python can walk; a file is refused above ``MAX_YAML_BYTES``
(the largest file the project ships is about 50 KB).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from fhs.core.errors import InputError

MAX_YAML_BYTES = 1 << 20
MAX_ALIAS_VALUES = 10_000
# libyaml's parser where PyYAML was built with it: the same nodes and values, several times faster (a book
# build and the suite read the regression files hundreds of times)
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml_file(path: str | os.PathLike, *, limit: int = MAX_YAML_BYTES, tree: bool = False) -> Any:
    """The parsed file (with ``tree``: also its node tree, which knows every key's line).

    Errors are one :class:`InputError` naming the file and, where YAML knows it, the line.
    """
    path = Path(path)
    with open(path, "rb") as handle:  # at most limit + 1 bytes, whatever the file claims to be
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputError(
            f"larger than {limit / (1 << 20):g} MiB, far more than such a file holds",
            path=path,
            fix="pass the YAML file meant here",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise InputError(
            f"not UTF-8 text (byte offset {error.start}: {data[error.start : error.start + 1]!r})",
            path=path,
            line=line,
            fix="save the file as UTF-8",
        ) from None
    return parse_yaml(text, path=path, tree=tree)


def parse_yaml(
    text: str, *, path: str | os.PathLike | None = None, field: str | None = None, tree: bool = False
) -> Any:
    """``text`` parsed with the safe loader and the alias bound (``tree``: also its node tree)."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_expansion(node, path, field)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        if "nesting depth" in problem:  # libyaml's own bound on what Python would not walk either
            raise InputError("not usable YAML: nested too deeply", path=path, field=field) from None
        raise InputError(
            f"not valid YAML ({problem})",
            path=path,
            field=field,
            line=None if mark is None or path is None else mark.line + 1,
        ) from None
    except RecursionError:
        raise InputError("not usable YAML: nested too deeply", path=path, field=field) from None
    finally:
        loader.dispose()
    return (data, node) if tree else data


def _check_expansion(root: yaml.Node, path, field) -> None:
    """Refuse a recursive alias, or aliases that would add more than ``MAX_ALIAS_VALUES`` values.

    Walks the node graph once (iteratively, each node once): a node's expanded size
    is itself plus its children's, counted again wherever an alias repeats it.
    """
    size: dict[int, int] = {}
    distinct = 0
    on_path: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            on_path.discard(key)
            size[key] = 1 + sum(size[id(child)] for child in _children(node))
            # the values this node expands to, beyond every distinct value met so far: a lower bound
            # of what aliases add to the whole document
            if size[key] - distinct > MAX_ALIAS_VALUES:
                raise InputError(
                    f"not usable YAML: its aliases (*name) would repeat more than {MAX_ALIAS_VALUES:,} values",
                    path=path,
                    field=field,
                    fix="write the values out, or use fewer aliases",
                )
            continue
        if key in size:
            continue
        if key in on_path:
            raise InputError(
                "not usable YAML: an alias refers to a value that contains it",
                path=path,
                field=field,
                line=node.start_mark.line + 1 if path is not None else None,
            )
        on_path.add(key)
        distinct += 1
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in size)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []
