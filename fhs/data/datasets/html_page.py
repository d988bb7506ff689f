"""The visible text of a page: prose from ``html_text``, tables row by row from ``html_tables``.

``html_tables`` builds on ``html_text`` (a cell's text is inline text), so the
text of a whole page, which needs both, lives here rather than in either.
"""

from __future__ import annotations

from collections.abc import Collection

from fhs.data.datasets.html_tables import table_grid, table_text
from fhs.data.datasets.html_text import parse_fragment, text_with_offsets


def render_table(table) -> str:
    """A ``<table>`` as one line per row, cells joined by ``" | "``."""
    return table_text(table_grid(table))


def visible_text_with_offsets(element, marks: Collection = (), *, tables: bool = True) -> tuple[str, dict]:
    """Visible text of ``element`` and the offset in it where each marked element starts.

    With ``tables=True`` a nested ``<table>`` is rendered row by row (see
    :func:`render_table`); with ``False`` its cells are plain space-separated text.
    """
    return text_with_offsets(element, marks, render_table=render_table if tables else None)


def visible_text(source, *, tables: bool = True) -> str:
    """Visible text of an element or an HTML string: whitespace collapsed, one line per block/row."""
    if isinstance(source, str):
        source = parse_fragment(source)
    return visible_text_with_offsets(source, (), tables=tables)[0]
