"""Located facts from a table of one's own (CSV, TSV or HTML), serialised as the iXBRL extractor does.

An adapter should never hand-write a fact's context: the methods read the table the way
the built-in extractor (:mod:`fhs.data.datasets.ixbrl`) wrote it, so a context written
any other way measures the writing, not the method. This module feeds the table through
the same grid (:func:`~fhs.data.datasets.html_tables.table_grid`), the same flattening
(one line per non-empty row, non-empty cells joined by ``" | "``) and the same row and
column headers (section rows above a cell join its row header).

Which cells are facts, and their gold concepts, comes from one of:

* a ``gold`` column (CSV/TSV): every value cell of that row is a fact of those concepts
  (``;`` between several); the column itself, and a ``datatype`` column, are not part of
  the table;
* ``data-gold`` (and optionally ``data-datatype``) on a ``<td>`` of an HTML table;
* a cell map: a CSV with ``row``, ``column``, ``gold`` and optionally ``datatype`` and
  ``table``, where row and column count source rows and cells from 1, as a spreadsheet
  shows them (``table`` counts the tables of an HTML file from 1; default 1).
"""

from __future__ import annotations

import csv
import html
import io
from dataclasses import dataclass
from pathlib import Path

from fhs.core.errors import InputError
from fhs.core.untrusted import LIMITS, ReadLimits, csv_cell_limit, read_text
from fhs.data.datasets.html_tables import column_header, row_header, table_grid, table_text
from fhs.data.datasets.html_text import local_name, too_deep
from fhs.data.facts import Fact

GOLD_COLUMN = "gold"
DATATYPE_COLUMN = "datatype"


@dataclass(frozen=True)
class CellGold:
    """What one source cell is tagged with."""

    gold: tuple[str, ...]
    datatype: str = ""


def _ids(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in str(text).split(";") if part.strip())


def _delimiter(path: str | Path) -> str:
    return "\t" if str(path).endswith(".tsv") else ","


CELL_CHARS = 131_072  # the csv module's own default limit on one cell


def csv_rows(path: str | Path) -> list[tuple[int, list[str]]]:
    """``(line, cells)`` of every row of a CSV/TSV file, the line where the row starts.

    Read strictly: a quote that never closes would swallow the rest of the file into one
    cell, so it is refused naming the line where it opened; so are text after a closing
    quote and a cell over ``CELL_CHARS`` characters.
    """
    text = read_text(path)
    delimiter = _delimiter(path)
    reader = csv.reader(io.StringIO(text), delimiter=delimiter, strict=True)
    rows: list[tuple[int, list[str]]] = []
    with csv_cell_limit(CELL_CHARS):
        while True:
            start = reader.line_num + 1
            try:
                row = next(reader)
            except StopIteration:
                return rows
            except csv.Error as error:
                raise _csv_error(str(error), text, delimiter, path, start, reader.line_num) from None
            rows.append((start, row))


def _csv_error(message: str, text: str, delimiter: str, path, start: int, line: int) -> InputError:
    if "field larger than field limit" in message:
        return InputError(
            f"a cell holds more than {CELL_CHARS:,} characters, the limit on one cell",
            path=path,
            line=line,
            fix="a table cell holds a value or a label, not a document",
        )
    if "unexpected end of data" in message:
        opened = _open_quote_line(text, start, delimiter)
        return InputError(
            "a quoted cell opens here and never closes, so the rest of the file would be read into it",
            path=path,
            line=opened,
            fix='close the quote, or remove it ("99 -> 99)',
        )
    after = f" (the row starts at line {start})" if start != line else ""
    return InputError(
        f"malformed quoting: {message}{after}",
        path=path,
        line=line,
        fix='a quoted cell is "like this", with a quote inside it doubled ("")',
    )


def _open_quote_line(text: str, start: int, delimiter: str) -> int:
    """The line of the last quote that opens a cell, reading as the csv module does from line ``start``."""
    opened, quoted = start, False
    for number, line in enumerate(text.split("\n")[start - 1 :], start=start):
        at_start = not quoted
        i = 0
        while i < len(line):
            char = line[i]
            if quoted and char == '"':
                if line[i + 1 : i + 2] == '"':
                    i += 1  # a doubled quote stands for one quote
                else:
                    quoted = False
            elif not quoted and char == '"' and at_start:
                quoted, opened = True, number
            at_start = not quoted and char == delimiter
            i += 1
    return opened


def read_cell_map(path: str | Path) -> dict[tuple[int, int, int], CellGold]:
    """A cell map file: ``row``, ``column`` (1-based source positions), ``gold``, optional ``datatype``
    and ``table``; keyed by (table, row, column), the table counted from 0."""
    rows = [(line, row) for line, row in csv_rows(path) if row]
    names = rows[0][1] if rows else []
    missing = {"row", "column", "gold"} - set(names)
    if missing:
        raise InputError(
            f"a cell map needs the columns row, column, gold; missing {', '.join(sorted(missing))}", path=path, line=1
        )
    cells: dict[tuple[int, int, int], CellGold] = {}
    for line, row in rows[1:]:
        record = dict(zip(names, row))
        try:
            key = int(record.get("table") or 1) - 1, int(record["row"]), int(record["column"])
        except (KeyError, TypeError, ValueError):
            raise InputError(
                "row and column are whole numbers counted from 1", path=path, line=line, field="row"
            ) from None
        gold = _ids(record.get("gold") or "")
        if not gold:
            raise InputError("no gold concept id", path=path, line=line, field="gold")
        cells[key] = CellGold(gold, (record.get(DATATYPE_COLUMN) or "").strip())
    return cells


def csv_table(path: str | Path) -> tuple[str, dict[tuple[int, int], CellGold]]:
    """A CSV/TSV file as an HTML ``<table>`` and the gold of its ``gold`` column, per value position.

    The gold of a row applies to each of its cells (which of them are values is the grid's
    call); positions are 1-based over the table without the gold and datatype columns.
    """
    rows = [row for _, row in csv_rows(path)]
    if not rows:
        raise InputError("an empty table", path=path)
    names = [name.strip().casefold() for name in rows[0]]
    gold_at = names.index(GOLD_COLUMN) if GOLD_COLUMN in names else None
    type_at = names.index(DATATYPE_COLUMN) if DATATYPE_COLUMN in names else None
    dropped = {i for i in (gold_at, type_at) if i is not None}
    cells: dict[tuple[int, int], CellGold] = {}
    body = []
    for r, row in enumerate(rows, start=1):
        kept = [cell for i, cell in enumerate(row) if i not in dropped]
        body.append("<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in kept) + "</tr>")
        gold = _ids(row[gold_at]) if gold_at is not None and r > 1 and gold_at < len(row) else ()
        if gold:
            datatype = row[type_at].strip() if type_at is not None and type_at < len(row) else ""
            for c in range(1, len(kept) + 1):
                cells[(r, c)] = CellGold(gold, datatype)
    return "<table>" + "".join(body) + "</table>", cells


def _tables(markup: str, path: str | Path) -> list:
    """The ``<table>`` elements of an HTML file; an empty file, or one nested past the parser's depth
    (which would silently drop what lies deeper), is one line naming it."""
    from lxml import etree
    from lxml import html as lxml_html

    parser = lxml_html.HTMLParser()
    try:
        root = lxml_html.document_fromstring(markup, parser=parser)
    except etree.ParserError as error:  # "Document is empty"
        raise InputError(
            f"no <table> in this file ({error})", path=path, fix="give a CSV, TSV or an HTML file with a table"
        ) from None
    deep = too_deep(parser)
    if deep is not None:
        raise InputError(deep[0], path=path, line=deep[1], fix="give the table without the elements wrapped around it")
    return [element for element in root.iter() if isinstance(element.tag, str) and local_name(element) == "table"]


def facts_from_table(
    path: str | Path,
    *,
    stem: str | None = None,
    cell_map: str | Path | None = None,
    datatype: str = "",
    taxonomy=None,
    limits: ReadLimits = LIMITS,
) -> list[Fact]:
    """The located facts of one CSV, TSV or HTML file (every ``<table>`` of an HTML file).

    A fact's datatype is, in order: the gold concept's in ``taxonomy``, the cell's own
    (``datatype`` column, ``data-datatype``, the cell map), then ``datatype``.
    Ids are ``STEM:tK:rRcC`` and contexts ``STEM#tK`` (K counts tables from 0).
    """
    path = Path(path)
    stem = stem or path.name.split(".")[0]
    mapped = read_cell_map(cell_map) if cell_map is not None else {}
    is_csv = path.suffix.lower() in (".csv", ".tsv")
    if is_csv:
        markup, own = csv_table(path)
        tables = [(_tables(markup, path)[0], own)]
    else:
        tables = [(table, {}) for table in _tables(read_text(path), path)]
        if not tables:
            raise InputError("no <table> in this file", path=path, fix="give a CSV, TSV or an HTML file with a table")
    facts: list[Fact] = []
    for k, (table, own) in enumerate(tables):
        try:
            grid = table_grid(table, max_cells=limits.table_cells)
        except InputError as error:  # the line is the markup's, which a CSV file does not have
            raise InputError(error.problem, path=path, line=None if is_csv else error.line, fix=error.fix) from None
        context = table_text(grid)
        for r, row in enumerate(grid.rows, start=1):
            for c, cell in enumerate(row, start=1):
                tagged = mapped.get((k, r, c)) or _attribute_gold(cell.element)
                if tagged is None and cell.kind == "value":
                    tagged = own.get((r, c))  # a gold column tags a row's values, not its label
                if tagged is None:
                    continue
                if not cell.text:
                    raise InputError(
                        f"table {k + 1}, row {r}, cell {c} is tagged but empty",
                        path=cell_map or path,
                        fix="tag the cell that shows the value",
                    )
                facts.append(_fact(stem, k, r, c, grid, cell, context, tagged, datatype, taxonomy, path))
    if not facts:
        raise InputError(
            "no tagged value cells",
            path=path,
            fix="add a 'gold' column, data-gold on the cells, or a cell map (--cells)",
        )
    return facts


def _attribute_gold(element) -> CellGold | None:
    gold = _ids(element.get("data-gold") or "") if element is not None else ()
    return CellGold(gold, (element.get("data-datatype") or "").strip()) if gold else None


def _fact(stem, k, r, c, grid, cell, context, tagged: CellGold, datatype, taxonomy, path) -> Fact:
    known = [taxonomy.get(g) for g in tagged.gold] if taxonomy is not None else []
    known = [concept for concept in known if concept is not None]
    chosen = (known[0].datatype if known and known[0].datatype else "") or tagged.datatype or datatype
    return Fact(
        id=f"{stem}:t{k}:r{r}c{c}",
        context_id=f"{stem}#t{k}",
        modality="table",
        value=cell.text,
        datatype=chosen,
        context=context,
        gold=tagged.gold,
        row_header=row_header(grid, cell),
        column_header=column_header(grid, cell),
        metadata={"source": "table", "file": path.name, "table": k, "row": r, "column": c},
    )
