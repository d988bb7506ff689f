"""HTML tables as grids, and the row and column headers of one cell.

A table fact is read the way an analyst reads it: the row label (plus the
section rows above it, such as "Current assets:") says *what* the number is,
the column headers above it say *when* or *for which part* ("2024",
"December 31, 2023", "PPL Electric"). The heuristics follow the authors'
FinTagging preparation (as the authors prepared it):

* colspan and rowspan are expanded into a grid;
* row header = up to 3 preceding single-label section rows that enclose the
  row (skipping sections closed by a "Total" row, and checking indentation
  when the table is styled), stopping at the column-header block, plus the nearest
  label cell left of the value (and the row's first label when they differ),
  ``" | "``;
* column header = the header cells above the value in the nearest block of
  header rows (period headers kept), the last 4 pieces, ``" | "``;
* numbers compare after normalising $, %, commas, parentheses and dashes.

FinTagging's fragments have lost their colspans, so header rows and data rows
no longer line up (``2024`` sits in column 1, its value in column 2). Such a
*ragged* table is aligned by order instead: the k-th value of the row goes
under the k-th header of the header row (or under header ``k*m//n`` when ``m``
headers span ``n`` values evenly). Well-formed tables (every row equally wide
once spans are expanded) use the grid position.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from fhs.core.errors import InputError
from fhs.core.untrusted import LIMITS
from fhs.data.datasets.html_text import inline_text, is_hidden, local_name
from fhs.data.datasets.numbers import mention_offsets, parse_number, values_match

MAX_COLSPAN = 1000  # the clamps HTML itself puts on colspan and rowspan
MAX_ROWSPAN = 65534
ROW_SECTIONS = 3
_CLOSING_WORDS = ("total", "net cash", "cash generated", "cash used", "cash provided")
_PLACEHOLDERS = frozenset({"n/a", "na", "nm", "n.m."})
COLUMN_PIECES = 4

_SYMBOL = re.compile(r"(?:US\$|[$€£¥%()\[\]*,.:;])+")
_PERIOD = re.compile(r"(?:19|20)\d\d")
_OPENERS = re.compile(r"(?:US\$|[$€£¥(])+")
_CLOSERS = re.compile(r"[)%\]]+")


# --- grid ----------------------------------------------------------------------------------


def cell_kind(text: str) -> str:
    """``empty``, ``symbol`` ($, %, parentheses), ``period`` (a bare year), ``value`` or ``label``.

    Placeholders that stand where a value would ("N/A", "NM") count as values.
    """
    if not text:
        return "empty"
    compact = "".join(text.split())
    if _PERIOD.fullmatch(compact):
        return "period"
    if parse_number(text) is not None or compact.casefold() in _PLACEHOLDERS:
        return "value"
    if _SYMBOL.fullmatch(compact):
        return "symbol"
    return "label"


@dataclass(frozen=True, eq=False)
class GridCell:
    """One source cell: its visible text and where it starts in the expanded grid."""

    text: str
    kind: str
    row: int
    col: int
    colspan: int = 1
    rowspan: int = 1
    indent: float = 0.0  # left indentation of a label cell, in points (0 when unstyled)
    element: object = field(default=None, repr=False)


@dataclass(frozen=True, eq=False)
class TableGrid:
    """A table with spans expanded.

    ``rows`` holds each row's source cells in order; ``slots[r][c]`` the cell
    covering column ``c`` of row ``r`` (``None`` past the row's end).
    ``row_kinds`` classifies rows as ``empty``, ``data`` (holds a value),
    ``section`` (one label at the label column) or ``header``.
    """

    rows: tuple[tuple[GridCell, ...], ...]
    slots: tuple[tuple[GridCell | None, ...], ...]
    row_kinds: tuple[str, ...]
    label_col: int
    aligned: bool
    indented: bool
    by_element: Mapping[object, GridCell] = field(repr=False)

    def at(self, row: int, col: int) -> GridCell | None:
        slots = self.slots[row]
        return slots[col] if 0 <= col < len(slots) else None

    def cell_of(self, element) -> GridCell | None:
        """The grid cell of a ``<td>``/``<th>`` element."""
        return self.by_element.get(element)


def _rows(table) -> Iterator:
    """The visible ``<tr>`` rows of this table (not of tables nested in its cells)."""
    for child in table:
        name = local_name(child)
        if name == "tr" and not is_hidden(child):
            yield child
        elif name in ("thead", "tbody", "tfoot") and not is_hidden(child):
            yield from (row for row in child if local_name(row) == "tr" and not is_hidden(row))


def _span(element, name: str, limit: int) -> int:
    try:
        value = int(str(element.get(name, "1")).strip() or 1)
    except ValueError:
        return 1
    return max(1, min(value, limit))


class GridTooLarge(InputError):
    """A table whose expanded grid would pass the cell limit (:class:`fhs.core.untrusted.ReadLimits`)."""

    def __init__(self, limit: int, line: int | None = None) -> None:
        super().__init__(
            f"a table expands to more than {limit:,} cells once colspan and rowspan are applied, "
            f"the limit on one table",
            line=line,
            fix="a table this large is not one table of a report; split it, or check its spans",
        )


_UNIT_PT = {"pt": 1.0, "px": 0.75, "em": 10.0, "rem": 10.0, "in": 72.0, "cm": 28.35, "mm": 2.835, "": 0.75}
_LENGTH = re.compile(r"(-?\d*\.?\d+)(pt|px|em|rem|in|cm|mm)?")


def _points(value: str) -> float:
    match = _LENGTH.fullmatch(value.strip().lower())
    return float(match.group(1)) * _UNIT_PT[match.group(2) or ""] if match else 0.0


def _left_offset(style: str | None) -> float:
    """Left padding + margin + (positive) text-indent declared in a style attribute, in points."""
    if not style:
        return 0.0
    declared: dict[str, str] = {}
    for part in style.split(";"):
        name, _, value = part.partition(":")
        declared[name.strip().lower()] = value.strip()
    total = 0.0
    for box in ("padding", "margin"):
        if f"{box}-left" in declared:
            total += _points(declared[f"{box}-left"])
        elif box in declared:
            values = declared[box].split()
            left = {1: 0, 2: 1, 3: 1, 4: 3}.get(len(values))
            total += _points(values[left]) if left is not None else 0.0
    if "text-indent" in declared:
        total += max(_points(declared["text-indent"]), 0.0)
    return total


def label_indent(cell, depth: int = 3) -> float:
    """How far a label is indented: the cell's style plus its first nested elements' (SEC filings nest divs)."""
    total = _left_offset(cell.get("style"))
    element = cell
    for _ in range(depth):
        children = [child for child in element if isinstance(child.tag, str)]
        if not children:
            break
        element = children[0]
        total += _left_offset(element.get("style"))
    return total


def collapse_repeats(text: str) -> str:
    """``"993 993"`` -> ``"993"``: a cell whose words are one phrase said 2+ times, said once.

    FinTagging's fragments often hold every cell's text twice (an extraction
    artifact); the filing itself shows it once.
    """
    words = text.split()
    n = len(words)
    for period in range(1, n // 2 + 1):
        if n % period == 0 and words == words[:period] * (n // period):
            return " ".join(words[:period])
    return text


def table_grid(table, clean: Callable[[str], str] | None = None, max_cells: int = LIMITS.table_cells) -> TableGrid:
    """Expand a ``<table>`` element (HTML or XHTML) into a :class:`TableGrid`.

    ``clean`` rewrites each cell's visible text (e.g. :func:`collapse_repeats`). Spans are
    clamped as HTML clamps them (colspan 1000, rowspan 65534 and the rows left), and a grid
    of more than ``max_cells`` slots is refused (:class:`GridTooLarge`) before it is built:
    400 rows of forty ``colspan=1000`` cells are a few hundred kilobytes of markup.
    """
    row_elements = list(_rows(table))
    occupied: dict[tuple[int, int], GridCell] = {}
    placed = 0
    rows: list[list[GridCell]] = []
    widths = [0] * len(row_elements)
    by_element: dict[object, GridCell] = {}
    for r, tr in enumerate(row_elements):
        col = 0
        row_cells: list[GridCell] = []
        for td in tr:
            if local_name(td) not in ("td", "th"):
                continue
            while (r, col) in occupied:
                col += 1
            colspan = _span(td, "colspan", MAX_COLSPAN)
            rowspan = _span(td, "rowspan", min(MAX_ROWSPAN, len(row_elements) - r))
            placed += colspan * rowspan
            if placed > max_cells:
                raise GridTooLarge(max_cells, td.sourceline)
            text = "" if is_hidden(td) else inline_text(td)
            if clean is not None and text:
                text = clean(text)
            kind = cell_kind(text)
            indent = label_indent(td) if kind == "label" else 0.0
            cell = GridCell(text, kind, r, col, colspan, rowspan, indent, td)
            for dr in range(rowspan):
                widths[r + dr] = max(widths[r + dr], col + colspan)
                for dc in range(colspan):
                    occupied[(r + dr, col + dc)] = cell
            row_cells.append(cell)
            by_element[td] = cell
            col += colspan
        rows.append(row_cells)
    if sum(widths) > max_cells:  # a wide row above many short ones (a tall cell at column 999)
        raise GridTooLarge(max_cells, table.sourceline)
    slots: list[tuple[GridCell | None, ...]] = []
    for r, width in enumerate(widths):
        slots.append(tuple(occupied.get((r, c)) for c in range(width)))
    row_kinds, label_col = _classify_rows(rows)
    filled_widths = {widths[r] for r, kind in enumerate(row_kinds) if kind != "empty"}
    return TableGrid(
        rows=tuple(tuple(row) for row in rows),
        slots=tuple(slots),
        row_kinds=tuple(row_kinds),
        label_col=label_col,
        aligned=len(filled_widths) <= 1,
        indented=len({round(c.indent) for row in rows for c in row if c.kind == "label"}) > 1,
        by_element=by_element,
    )


def _classify_rows(rows: list[list[GridCell]]) -> tuple[list[str], int]:
    filled = [[cell for cell in row if cell.text] for row in rows]
    is_data = [any(cell.kind == "value" for cell in row) for row in filled]
    starts = [row[0].col for row, data in zip(filled, is_data) if data and row]
    label_col = min(starts) if starts else 0
    kinds = []
    for row, data in zip(filled, is_data):
        if not row:
            kinds.append("empty")
        elif data:
            kinds.append("data")
        elif len(row) == 1 and row[0].kind == "label" and row[0].col <= label_col:
            kinds.append("section")
        else:
            kinds.append("header")
    return kinds, label_col


# --- headers -------------------------------------------------------------------------------


def row_label(grid: TableGrid, cell: GridCell) -> GridCell | None:
    """The nearest label cell left of ``cell`` in its row."""
    labels = _labels_left(grid, cell)
    return labels[-1] if labels else None


def _labels_left(grid: TableGrid, cell: GridCell) -> list[GridCell]:
    slots = grid.slots[cell.row]
    found: list[GridCell] = []
    for col in range(min(cell.col, len(slots))):
        other = slots[col]
        if other is not None and other is not cell and other.kind in ("label", "period") and other not in found:
            found.append(other)
    return found


def row_header(grid: TableGrid, cell: GridCell, sections: int = ROW_SECTIONS) -> str:
    """Up to ``sections`` section rows above the cell plus its row label, ``" | "``.

    Walking up stops at a column-header row. Which section rows enclose the
    cell: a "Total ..." (or "Net cash ...") row closes the section above it, so
    a sibling section ("Current assets:" seen from under "Noncurrent assets:")
    is skipped while an enclosing one is kept; in a styled table (labels
    indented) a section must also sit no further right than the rows it heads,
    and each outer section further left than the inner one. When text cells stand between the row's first label and the
    value ("U.S. treasury securities | Level 1 | 5,979"), both the first and the
    nearest are kept. A value written inside a label cell ("8.875 % notes due
    2031") is its own row label.
    """
    labels = [cell] if cell.kind == "label" else _labels_left(grid, cell)
    pieces: list[str] = []
    closed = 0
    limit = labels[0].indent if labels else 0.0
    deeper = False  # passed a row indented deeper than the cell's: a same-level section no longer encloses it
    for r in range(cell.row - 1, -1, -1):
        kind = grid.row_kinds[r]
        if kind == "header" or len(pieces) >= sections:
            break
        if kind == "data":
            closed += _is_total(grid.rows[r])
            first = next((c for c in grid.rows[r] if c.kind == "label"), None)
            deeper = deeper or (first is not None and first.indent > limit + 0.5)
        elif kind == "section":
            section = next(c for c in grid.rows[r] if c.text)
            if grid.indented:
                # the nearest section may share the rows' indentation; outer ones sit further left
                same_level = abs(section.indent - limit) <= 0.5
                if section.indent > limit + 0.5 or (same_level and (pieces or deeper)):
                    continue
            if closed:
                closed -= 1
                continue
            pieces.append(section.text)
            limit = section.indent
    pieces.reverse()
    for label in (labels[:1] + labels[-1:]) if len(labels) > 1 else labels:
        if label.text not in pieces:
            pieces.append(label.text)
    return " | ".join(pieces)


def _is_total(row: tuple[GridCell, ...]) -> bool:
    label = next((c for c in row if c.kind == "label"), None)
    return label is not None and label.text.casefold().startswith(_CLOSING_WORDS)


def _is_banner(grid: TableGrid, r: int) -> bool:
    """A header row with one cell starting at the label column: it heads every column ("2023")."""
    filled = [c for c in grid.rows[r] if c.text]
    return len(filled) == 1 and filled[0].col <= grid.label_col


def header_rows(grid: TableGrid, row: int) -> list[int]:
    """The header rows that head ``row``, top to bottom.

    The nearest block of column headers (skipping data rows until one is found)
    plus the nearest banner row ("2022" over a repeated sub-table), so a
    sub-table under a banner still gets the column names at the top of the table.
    """
    chosen: list[int] = []
    in_block = banner = False
    for r in range(row - 1, -1, -1):
        kind = grid.row_kinds[r]
        if kind == "header":
            if _is_banner(grid, r):
                if in_block or not banner:
                    chosen.append(r)
                    banner = True
            else:
                chosen.append(r)
                in_block = True
        elif kind == "data" and in_block:
            break
    chosen.reverse()
    return chosen


def _row_values(grid: TableGrid, cell: GridCell) -> list[GridCell]:
    label = row_label(grid, cell)
    start = label.col + label.colspan if label is not None else -1
    return [c for c in grid.rows[cell.row] if c.kind in ("value", "period") and c.col >= start]


def _header_by_position(grid: TableGrid, header_row: int, cell: GridCell) -> str:
    for col in range(cell.col, cell.col + cell.colspan):
        above = grid.at(header_row, col)
        if above is not None and above.kind not in ("empty", "symbol"):
            return above.text
    return ""


def _header_by_order(grid: TableGrid, header_row: int, cell: GridCell) -> str:
    values = _row_values(grid, cell)
    if cell not in values:
        return ""
    k, n = values.index(cell), len(values)
    heads = [c for c in grid.rows[header_row] if c.kind not in ("empty", "symbol")]
    m = len(heads)
    if m > n and heads[0].col <= grid.label_col:
        # The header row also names the label columns ("Description | Location | Cost ..."):
        # its last n cells head the values when the row's own labels make up the difference.
        labels = len(_labels_left(grid, cell))
        if m in (n + 1, n + labels):
            heads, m = heads[-n:], n
    if m == 0 or m > n or n % m:
        return ""
    return heads[k * m // n].text


def column_header(grid: TableGrid, cell: GridCell, pieces: int = COLUMN_PIECES) -> str:
    """The header cells above ``cell`` (see :func:`header_rows`), the last ``pieces``, ``" | "``."""
    found: list[str] = []
    lookup = _header_by_position if grid.aligned else _header_by_order
    for r in header_rows(grid, cell.row):
        text = next(c.text for c in grid.rows[r] if c.text) if _is_banner(grid, r) else lookup(grid, r, cell)
        if text and (not found or found[-1] != text):
            found.append(text)
    return " | ".join(found[-pieces:])


# --- finding and rendering -----------------------------------------------------------------


def find_value_cells(grid: TableGrid, value: str) -> list[GridCell]:
    """Cells outside header rows that display exactly ``value``, in reading order."""
    numeric = parse_number(value) is not None
    found = []
    for r, row in enumerate(grid.rows):
        if numeric and grid.row_kinds[r] in ("header", "empty"):
            continue
        for cell in row:
            if cell.text and (not numeric or cell.kind in ("value", "period")) and values_match(cell.text, value):
                found.append(cell)
    return found


def find_value_in_labels(grid: TableGrid, value: str) -> list[GridCell]:
    """Label cells that mention ``value`` inside their text ("8.875 % notes due 2031")."""
    return [cell for row in grid.rows for cell in row if cell.kind == "label" and mention_offsets(cell.text, value)]


def row_text(row: tuple[GridCell, ...]) -> str:
    """One row as a reader says it: cells ``" | "``, a lone ``$`` joined to the next cell, ``)``/``%`` to the
    previous."""
    pieces: list[str] = []
    opener = ""
    for cell in row:
        text = cell.text
        if not text:
            continue
        compact = "".join(text.split())
        if _OPENERS.fullmatch(compact):
            opener += compact
            continue
        if _CLOSERS.fullmatch(compact) and pieces and not opener:
            pieces[-1] += compact
            continue
        pieces.append(opener + text)
        opener = ""
    if opener:
        pieces.append(opener)
    return " | ".join(pieces)


def table_text(grid: TableGrid) -> str:
    """The visible text of a table: one line per non-empty row."""
    lines = (row_text(row) for row in grid.rows)
    return "\n".join(line for line in lines if line)
