"""US-GAAP 2024 from FinTagging's concept inventory, with FASB definitions merged where names match.

The inventory (17,388 rows ``{us_gaap_tag, entity_type, text}``) has names and
datatypes but no definitions. The XBRL terminology sheet has 6,507 FASB
label -> definition pairs from an older taxonomy year, keyed by the standard
label ("Long-term Construction Loan, Current"), not by the element name
(``LongTermConstructionLoanCurrent``). FASB builds element names from the
standard label, so we match on a key both sides share:

1. exact: the label's letters and digits, apostrophes dropped, lower-cased and
   concatenated (= the element name rebuilt from the label, case-insensitively),
   against the lower-cased name;
2. plural-insensitive: the same after the tokenizer's light plural rule on every
   word, used only when it names exactly one concept (``DepositAssets`` and
   ``DepositsAssets`` both exist, so a plural key can be ambiguous);
3. versioned: when FASB changes an element's type or meaning it retires the
   name and issues ``<Name>1`` under the same label (``ConcentrationRiskPercentage1``),
   so an exact key plus one trailing digit is accepted when it names exactly one
   concept.

Labels that FASB renamed, or whose element name abbreviates the label (e.g.
"Loans and Leases Receivable, Net Amount" is ``...NetReportedAmount``), stay
unmatched: guessing there would attach a definition to the wrong concept.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from fhs.core.errors import InputError
from fhs.core.jsonl import iter_objects
from fhs.core.text import camel_split, token_set
from fhs.data.datadir import source_dir
from fhs.data.taxonomy import Concept, Taxonomy

TAXONOMY_NAME = "us-gaap-2024"
INVENTORY_FILE = "us_gaap_2024_BM25.jsonl"
TERMINOLOGY_FILE = "XBRL_Terminology.xlsx"
LABEL_SOURCES = ("name", "fasb")

# Name suffixes FASB gives structural elements (none is a suffix of another).
# Members, axes, domains, tables and line items shape dimensions, abstracts only
# group other elements, text blocks tag whole notes: none tags a number.
ELEMENT_KINDS: tuple[tuple[str, str], ...] = (
    ("TextBlock", "text_block"),
    ("LineItems", "line_items"),
    ("Abstract", "abstract"),
    ("Member", "member"),
    ("Domain", "domain"),
    ("Table", "table"),
    ("Axis", "axis"),
)

_WORD = re.compile(r"[A-Za-z0-9]+")
_VERSION_SUFFIX = re.compile(r"(?<=[A-Za-z])[1-9]$")
_APOSTROPHES = re.compile(r"['\u2019]")
_EXCEL_ERRORS = frozenset({"#NAME?", "#VALUE!", "#REF!", "#N/A"})


def element_kind(name: str) -> str:
    """``member``/``axis``/``abstract``/``text_block``/``domain``/``table``/``line_items``, else ``item``."""
    for suffix, kind in ELEMENT_KINDS:
        if name.endswith(suffix):
            return kind
    return "item"


def xbrl_metadata(name: str, datatype: str, label: str, **extra: str) -> dict[str, str]:
    """Metadata later chapters read, shared by this loader and the FASB-file loader."""
    metadata = {
        "datatype": datatype,
        "kind": element_kind(name),
        "label_tokens": str(len(token_set(label or name))),
    }
    metadata.update(extra)
    return metadata


def _words(text: str) -> list[str]:
    return [word.lower() for word in _WORD.findall(camel_split(_APOSTROPHES.sub("", text)))]


def _singular(word: str) -> str:
    """The tokenizer's plural rule (fhs.core.text), without its stopword removal."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def exact_key(text: str) -> str:
    """``"Stockholders' Equity, Other"`` and ``StockholdersEquityOther`` -> ``stockholdersequityother``."""
    return "".join(_words(text))


def _keys(text: str) -> tuple[str, str]:
    """``(exact key, plural key)``: the plural key applies the plural rule to every word first."""
    words = _words(text)
    return "".join(words), "".join(_singular(word) for word in words)


@dataclass(frozen=True)
class TermRow:
    """One usable row of the terminology sheet (``line`` is the spreadsheet row number)."""

    line: int
    term: str
    definition: str


@dataclass(frozen=True)
class DefinitionMatch:
    tag: str
    row: TermRow
    how: str  # "exact", "plural" or "versioned"


@dataclass(frozen=True)
class MergeReport:
    """What the definition merge did, for the book and the final report."""

    matches: Mapping[str, DefinitionMatch]
    unmatched: tuple[TermRow, ...]
    ambiguous: tuple[TermRow, ...] = ()
    shadowed: tuple[TermRow, ...] = ()  # matched a concept that an earlier/better row already defined
    skipped_rows: int = 0  # blank rows and Excel error cells ("#NAME?")
    by_how: Mapping[str, int] = field(default_factory=dict)

    @property
    def matched_concepts(self) -> int:
        return len(self.matches)


def read_inventory(path: Path) -> list[tuple[str, str, str]]:
    """``(tag, datatype, camel-split text)`` per row of FinTagging's inventory, prefix removed."""
    rows = []
    for line_number, record in iter_objects(path):
        values = []
        for key in ("us_gaap_tag", "entity_type", "text"):
            value = record.get(key)
            if not isinstance(value, str) or not value.strip():
                raise InputError(
                    "missing or empty field",
                    path=path,
                    line=line_number,
                    field=key,
                    fix="each row needs us_gaap_tag, entity_type and text",
                )
            values.append(value.strip())
        tag, datatype, text = values
        rows.append((tag.split(":", 1)[-1], datatype, text))
    return rows


def read_terminology(path: Path) -> tuple[list[TermRow], int]:
    """Usable ``Term``/``Explanation`` rows of the sheet, and how many rows were skipped."""
    import openpyxl  # only this loader needs it

    try:
        workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    except Exception as error:  # openpyxl raises several unrelated types for a bad file
        raise InputError(f"cannot read spreadsheet: {error}", path=path) from None
    try:
        sheet = workbook.worksheets[0]
        rows = sheet.iter_rows(values_only=True)
        header = [str(cell).strip() if cell is not None else "" for cell in next(rows, ())]
        try:
            term_column, definition_column = header.index("Term"), header.index("Explanation")
        except ValueError:
            raise InputError("first row must name the columns Term and Explanation", path=path, line=1) from None
        usable, skipped = [], 0
        for line, row in enumerate(rows, start=2):
            cells = list(row) + [None] * 2
            term = _cell_text(cells[term_column])
            definition = _cell_text(cells[definition_column])
            if not term or not definition or term in _EXCEL_ERRORS or definition in _EXCEL_ERRORS:
                skipped += 1
                continue
            usable.append(TermRow(line, term, definition))
        return usable, skipped
    finally:
        workbook.close()


def _cell_text(value: object) -> str:
    return " ".join(str(value).split()) if value is not None else ""


def match_definitions(tags: Iterable[str], rows: Sequence[TermRow], skipped_rows: int = 0) -> MergeReport:
    """Attach each terminology row to at most one concept (see the module docstring)."""
    tags = list(tags)
    by_exact: dict[str, list[str]] = {}
    by_plural: dict[str, list[str]] = {}
    by_versioned: dict[str, list[str]] = {}
    for tag in tags:
        exact_term, plural_term = _keys(tag)
        by_exact.setdefault(exact_term, []).append(tag)
        by_plural.setdefault(plural_term, []).append(tag)
        if _VERSION_SUFFIX.search(tag):
            by_versioned.setdefault(exact_key(_VERSION_SUFFIX.sub("", tag)), []).append(tag)

    candidates: list[DefinitionMatch] = []
    unmatched, ambiguous = [], []
    for row in rows:
        exact_term, plural_term = _keys(row.term)
        exact = by_exact.get(exact_term, [])
        plural = by_plural.get(plural_term, [])
        versioned = by_versioned.get(exact_term, [])
        if len(exact) == 1:
            candidates.append(DefinitionMatch(exact[0], row, "exact"))
        elif len(exact) > 1 or len(plural) > 1:
            ambiguous.append(row)
        elif len(plural) == 1:
            candidates.append(DefinitionMatch(plural[0], row, "plural"))
        elif len(versioned) == 1:
            candidates.append(DefinitionMatch(versioned[0], row, "versioned"))
        elif versioned:
            ambiguous.append(row)
        else:
            unmatched.append(row)

    # An exact match beats a plural one, which beats a versioned one; among equals the first row wins.
    rank = {"exact": 0, "plural": 1, "versioned": 2}
    matches: dict[str, DefinitionMatch] = {}
    shadowed = []
    for candidate in sorted(candidates, key=lambda match: (rank[match.how], match.row.line)):
        if candidate.tag in matches:
            shadowed.append(candidate.row)
        else:
            matches[candidate.tag] = candidate
    by_how: dict[str, int] = {}
    for match in matches.values():
        by_how[match.how] = by_how.get(match.how, 0) + 1
    ordered = {tag: matches[tag] for tag in tags if tag in matches}
    return MergeReport(
        matches=ordered,
        unmatched=tuple(unmatched),
        ambiguous=tuple(ambiguous),
        shadowed=tuple(sorted(shadowed, key=lambda row: row.line)),
        skipped_rows=skipped_rows,
        by_how=by_how,
    )


def build_us_gaap(
    inventory: Path,
    terminology: Path | None = None,
    *,
    label_source: str = "name",
    name: str = TAXONOMY_NAME,
) -> tuple[Taxonomy, MergeReport | None]:
    """The taxonomy from explicit files, and the merge report (None without a terminology file).

    ``label_source="name"`` keeps the inventory's camel-split name as the label
    (what FinTagging and the paper index); ``"fasb"`` uses the FASB standard
    label where a terminology row matched.
    """
    if label_source not in LABEL_SOURCES:
        raise InputError(
            f"unknown label_source {label_source!r}",
            field="label_source",
            fix=f"choose one of {', '.join(LABEL_SOURCES)}",
        )
    rows = read_inventory(inventory)
    report = None
    if terminology is not None:
        terms, skipped = read_terminology(terminology)
        report = match_definitions((tag for tag, _, _ in rows), terms, skipped)
    concepts = []
    for tag, datatype, text in rows:
        match = report.matches.get(tag) if report else None
        label = match.row.term if (match and label_source == "fasb") else text
        extra = {"fasb_label": match.row.term, "definition_match": match.how} if match else {}
        concepts.append(
            Concept(
                id=tag,
                label=label,
                definition=match.row.definition if match else "",
                datatype=datatype,
                metadata=xbrl_metadata(tag, datatype, label, **extra),
            )
        )
    try:
        return Taxonomy.from_concepts(name, concepts), report
    except ValueError as error:
        raise InputError(str(error), path=inventory, field="us_gaap_tag") from None


def load_us_gaap_2024(
    data_dir: str | Path | None = None, *, label_source: str = "name", definitions: bool = True
) -> Taxonomy:
    """US-GAAP 2024 from ``$FHS_DATA`` (or ``data_dir``): FinTagging's inventory plus FASB definitions."""
    inventory = source_dir("fintagging", data_dir) / INVENTORY_FILE
    terminology = source_dir("xbrl-terminology", data_dir) / TERMINOLOGY_FILE if definitions else None
    taxonomy, _ = build_us_gaap(inventory, terminology, label_source=label_source)
    return taxonomy


def merge_report(data_dir: str | Path | None = None) -> MergeReport:
    """The definition-merge report for the real files (the book's data chapter prints it)."""
    inventory = source_dir("fintagging", data_dir) / INVENTORY_FILE
    terminology = source_dir("xbrl-terminology", data_dir) / TERMINOLOGY_FILE
    _, report = build_us_gaap(inventory, terminology)
    assert report is not None
    return report
