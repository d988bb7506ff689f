"""A collapsed block on a page: a one-line summary, and tables that open under it on a click.

A chapter whose model rows ran on a few facts keeps every number reachable without letting
them fill the page: the rows go into one ``<details>`` block (plain HTML, no script, so it
works offline and in any theme), and a console prints the summary and the tables in full.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import pandas as pd

from fhs.book.report import to_html, to_markdown


class Folded:
    """Tables behind one summary line: HTML ``<details>`` in the book, Markdown in a console."""

    def __init__(self, summary: str, tables: Sequence[tuple[pd.DataFrame, str]], notes: Sequence[str] = ()) -> None:
        self.summary = summary
        self.tables = [(frame, caption) for frame, caption in tables if not frame.empty]
        self.notes = list(notes)

    def _repr_html_(self) -> str:
        inner = "".join(to_html(frame, caption) for frame, caption in self.tables)
        notes = "".join(f"<p>{html.escape(note)}</p>" for note in self.notes)
        return f'<details class="fhs-folded"><summary>{html.escape(self.summary)}</summary>{notes}{inner}</details>'

    def _repr_markdown_(self) -> str:
        parts = [self.summary, *self.notes]
        parts += [f"{to_markdown(frame)}\n\n{caption}" for frame, caption in self.tables]
        return "\n\n".join(parts)

    def __repr__(self) -> str:
        return self._repr_markdown_()


def show_folded(summary: str, tables: Sequence[tuple[pd.DataFrame, str]], notes: Sequence[str] = ()) -> None:
    """Display the block (the book), or print it (a console); returns nothing, like ``fhs.book.report.show``."""
    block = Folded(summary, tables, notes)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        print(repr(block))
        return
    if get_ipython() is None:
        print(repr(block))
    else:
        display(block)
