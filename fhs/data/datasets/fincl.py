"""FinTagging's FinCL eval subset: 500 located facts from 10-K tables and paragraphs.

Each CSV row gives the HTML context, the value (``entity``, written without
separators or sign), its datatype, FinTagging's own serialization (``query``:
the fact's table row or its paragraph) and the gold concept. FinTagging does
not say *which* cell holds the value, so we locate it: the cells showing the
value (or, failing that, label cells that mention it: "8.875 % notes"),
narrowed to the row that ``query`` quotes when the value occurs more than once.
Many FinTagging tables hold every cell's text twice ("993 993"); cells are
read once (:func:`~fhs.data.datasets.html_tables.collapse_repeats`), as the filing shows them. A fact keeps how
sure that location is in ``metadata["match_status"]``:

* ``exact_cell`` / ``exact_sentence``: one cell (one sentence) shows the value;
* ``ambiguous``: several do; the first in reading order is used;
* ``unmatched``: none does; headers (sentence) are left empty.

Gold ids outside the 2024 inventory are kept (they count as misses) and
flagged with ``metadata["gold_in_inventory"] = False``.
"""

from __future__ import annotations

import csv
import hashlib
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fhs.core.errors import InputError
from fhs.core.untrusted import csv_cell_limit
from fhs.data.datadir import source_dir
from fhs.data.datasets.html_page import visible_text
from fhs.data.datasets.html_tables import (
    TableGrid,
    collapse_repeats,
    column_header,
    find_value_cells,
    find_value_in_labels,
    row_header,
    table_grid,
    table_text,
)
from fhs.data.datasets.html_text import local_name, parse_fragment, sentence_at
from fhs.data.datasets.numbers import INVISIBLE, mention_offsets
from fhs.data.facts import Fact

FILE_NAME = "FinCL-eval-subset.csv"
COLUMNS = ("context", "category", "entity", "entity_type", "query", "answer")
CATEGORIES = ("table", "text")
_GOLD = re.compile(r"[A-Za-z][\w.-]*:[A-Za-z_][\w.-]*")
_QUERY_CONTEXT = re.compile(r"<context>(.*)</context>", re.DOTALL)


@dataclass(frozen=True)
class FinclRow:
    """One CSV record, checked; ``line`` is where it starts in the file."""

    index: int
    line: int
    context: str
    category: str
    entity: str
    entity_type: str
    query: str
    answer: str


def read_rows(path: str | Path) -> list[FinclRow]:
    """Read and check the CSV; a bad record raises ``InputError`` naming its line and field."""
    path = Path(path)
    if not path.is_file():
        raise InputError("no such FinCL file", path=path, fix=f"expected {FILE_NAME} from FinTagging's subdata/")
    rows: list[FinclRow] = []
    # contexts run to tens of kilobytes
    with csv_cell_limit(min(sys.maxsize, 2**31 - 1)), path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise InputError(
                "empty file", path=path, line=1, fix=f"expected the columns {', '.join(COLUMNS)}"
            ) from None
        missing = [name for name in COLUMNS if name not in header]
        if missing:
            raise InputError(
                "missing column", path=path, line=1, field=missing[0], fix=f"expected the columns {', '.join(COLUMNS)}"
            )
        position = {name: header.index(name) for name in COLUMNS}
        start = reader.line_num + 1
        while True:
            try:
                record = next(reader)
            except StopIteration:
                break
            except csv.Error as error:
                raise InputError(f"malformed CSV ({error})", path=path, line=start) from None
            if record:
                rows.append(_check(record, header, position, len(rows), start, path))
            start = reader.line_num + 1
    return rows


def _check(
    record: list[str], header: list[str], position: dict[str, int], index: int, line: int, path: Path
) -> FinclRow:
    if len(record) != len(header):
        field = header[len(record)] if len(record) < len(header) else None
        raise InputError(
            f"expected {len(header)} fields, got {len(record)}",
            path=path,
            line=line,
            field=field,
            fix="quote fields that hold commas or newlines",
        )
    values = {name: record[position[name]] for name in COLUMNS}
    for name in ("context", "entity", "entity_type", "answer"):
        if not values[name].strip():
            raise InputError("empty value", path=path, line=line, field=name)
    if values["category"] not in CATEGORIES:
        raise InputError(
            f"expected one of {CATEGORIES}, got {values['category']!r}", path=path, line=line, field="category"
        )
    if not _GOLD.fullmatch(values["answer"].strip()):
        raise InputError(
            f"expected a prefixed concept such as us-gaap:Assets, got {values['answer']!r}",
            path=path,
            line=line,
            field="answer",
        )
    return FinclRow(index=index, line=line, **values)


def context_id(markup: str) -> str:
    """A stable short id for a context: the first 12 hex digits of its HTML's SHA-1."""
    return "fincl-" + hashlib.sha1(markup.encode("utf-8")).hexdigest()[:12]


def quoted_context(query: str) -> str:
    """The row or sentence FinTagging quotes inside ``<context>...</context>`` (``""`` for ``None``)."""
    match = _QUERY_CONTEXT.search(query)
    text = match.group(1).strip() if match else ""
    return "" if text == "None" else text


def _row_key(pieces: Iterable[str]) -> str:
    """A row's non-empty cells, each read once and without whitespace, joined by ``|``."""
    kept = ("".join(collapse_repeats(piece.translate(INVISIBLE)).split()) for piece in pieces)
    return "|".join(piece for piece in kept if piece)


@dataclass(frozen=True)
class Location:
    status: str
    n_candidates: int
    row_found: bool
    row_header: str = ""
    column_header: str = ""
    cell_text: str = ""
    sentence: str = ""


def locate_in_table(grid: TableGrid, value: str, quoted_row: str = "") -> Location:
    """Find the cell showing ``value``; ``quoted_row`` (``"label | $ | 25 | ..."``) narrows the search."""
    candidates = find_value_cells(grid, value) or find_value_in_labels(grid, value)
    row_found = False
    if quoted_row:
        key = _row_key(quoted_row.split("|"))
        rows = {r for r, row in enumerate(grid.rows) if _row_key(cell.text for cell in row) == key}
        in_row = [cell for cell in candidates if cell.row in rows]
        row_found = bool(rows)
        if in_row:
            candidates = in_row
    if not candidates:
        return Location("unmatched", 0, row_found)
    cell = candidates[0]
    return Location(
        status="exact_cell" if len(candidates) == 1 else "ambiguous",
        n_candidates=len(candidates),
        row_found=row_found,
        row_header=row_header(grid, cell),
        column_header=column_header(grid, cell),
        cell_text=cell.text,
    )


def locate_in_text(text: str, value: str) -> Location:
    """The sentence holding ``value``; ambiguous when it occurs in several sentences."""
    offsets = mention_offsets(text, value)
    sentences = list(dict.fromkeys(sentence_at(text, offset) for offset in offsets))
    if not sentences:
        return Location("unmatched", 0, False)
    return Location(
        status="exact_sentence" if len(sentences) == 1 else "ambiguous",
        n_candidates=len(sentences),
        row_found=False,
        sentence=sentences[0],
    )


def facts_from_rows(rows: Iterable[FinclRow], taxonomy=None) -> list[Fact]:
    """Locate every row's value in its context and build the facts (contexts parsed once each)."""
    parsed: dict[str, tuple[str, TableGrid | None]] = {}
    facts = []
    for row in rows:
        if row.context not in parsed:
            fragment = parse_fragment(row.context)
            table = next((el for el in fragment.iter() if local_name(el) == "table"), None)
            if row.category == "table" and table is not None:
                built = table_grid(table, clean=collapse_repeats)
                parsed[row.context] = (table_text(built), built)
            else:
                parsed[row.context] = (visible_text(fragment), None)
        text, grid = parsed[row.context]
        if row.category == "table" and grid is not None:
            where = locate_in_table(grid, row.entity, quoted_context(row.query))
        else:
            where = locate_in_text(text, row.entity)
        gold = row.answer.strip().split(":", 1)[1]
        concept = taxonomy.get(gold) if taxonomy is not None else None
        metadata = {
            "source": "fincl",
            "row": row.index,
            "line": row.line,
            "match_status": where.status,
            "n_candidates": where.n_candidates,
            "query_row_found": where.row_found,
            "cell_text": where.cell_text,
        }
        if taxonomy is not None:
            metadata["gold_in_inventory"] = concept is not None
            metadata["taxonomy_datatype"] = concept.datatype if concept is not None else ""
        facts.append(
            Fact(
                id=f"fincl-{row.index:04d}",
                context_id=context_id(row.context),
                modality=row.category,
                value=row.entity.strip(),
                datatype=row.entity_type.strip(),
                context=text,
                gold=(gold,),
                row_header=where.row_header,
                column_header=where.column_header,
                sentence=where.sentence,
                metadata=metadata,
            )
        )
    return facts


def load_file(path: str | Path, taxonomy=None) -> list[Fact]:
    """The facts of a FinCL-format CSV (the same columns as FinTagging's subdata files)."""
    return facts_from_rows(read_rows(path), taxonomy)


def load(data_dir: Path | None, taxonomy) -> list[Fact]:
    """The 500 FinCL facts, in file order, with gold ids checked against ``taxonomy``."""
    folder = source_dir("fintagging", data_dir)
    return load_file(folder / FILE_NAME, taxonomy)
