"""Inline-XBRL filings as located facts: every visible us-gaap number, with its gold concept.

An SEC 10-K/10-Q in inline XBRL tags each reported number with its concept
(``<ix:nonFraction name="us-gaap:Revenues" ...>1,234</ix:nonFraction>``), so a
filing is a ready-labelled set of located facts. The markup *is* the answer,
so only what a reader sees reaches a fact: the displayed number, the visible
text of its table (one table) or paragraph (one block), and headers or the
sentence built from that text. Tags, attributes, ``ix:header``/``ix:hidden``
and other hidden boxes are dropped (see :mod:`fhs.data.datasets.html_text`).

Decisions:

* a fact is an ``ix:nonFraction`` whose name resolves (through the element's
  namespace map, not the literal prefix) to a ``fasb.org/us-gaap`` namespace;
* nested ``ix:nonFraction`` elements tag one displayed number with several
  concepts: they form one fact whose gold lists every us-gaap name;
* a fact inside ``ix:header`` or a ``display:none`` box, or with no displayed
  text (``xsi:nil``), is not visible and is skipped (MANIFEST.tsv counts
  display:none rows as visible: 10 facts of mara-20230630);
* ``value`` is the displayed text; ``metadata["number"]`` applies the format,
  ``scale`` and ``sign="-"`` (``"-1234000000"``);
* ``datatype`` comes from the taxonomy; for a concept outside it, from the unit
  (USD -> monetary, shares -> shares, pure -> percent or pure, USD/shares ->
  per share) and ``metadata["in_inventory"]`` is False;
* ``context_id`` is ``<file stem>#t<table index>`` or ``#p<block index>``
  (indexes over all tables / all block elements of the document);
* a fact id is ``<file stem>:<element id>``; an element id used twice (or none)
  still gives each fact its own id (``~2``, ``~3`` appended in document order);
* ``scale`` must be an integer within ``±MAX_SCALE``; anything else is an error
  naming the element's line (10**99999999 has no place in a fact).

Parsing every filing takes a while, so the facts of each filing are cached as
JSONL under ``$FHS_CACHE`` (default ``~/.cache/fhs``), keyed by the file's
SHA-256 and :data:`PARSER_VERSION`; the taxonomy is applied after the cache.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from pathlib import Path

from lxml import etree
from lxml import html as lxml_html
from tqdm import tqdm  # plain text bars: no ipywidgets warning inside notebooks

from fhs.core import files
from fhs.core.errors import InputError
from fhs.core.untrusted import LIMITS, ReadLimits, TooLarge, gunzip, size_text
from fhs.data.datadir import source_dir
from fhs.data.datasets.html_page import visible_text_with_offsets
from fhs.data.datasets.html_tables import TableGrid, column_header, row_header, table_grid, table_text
from fhs.data.datasets.html_text import inline_text, is_hidden, local_name, sentence_at, too_deep
from fhs.data.facts import Fact, fact_from_dict

PARSER_VERSION = 2  # 2: fact ids unique within a filing
MAX_SCALE = 30  # 10**30: far beyond any reported magnitude (SEC filings use -6 to 12)
MANIFEST = "MANIFEST.tsv"
MANIFEST_COLUMNS = ("file", "us_gaap_version")
TEST_VERSIONS = ("2024", "2025")
DEV_VERSIONS = ("2023",)

IX_NAMESPACES = ("http://www.xbrl.org/2013/inlineXBRL", "http://www.xbrl.org/2008/inlineXBRL")
XBRLI = "http://www.xbrl.org/2003/instance"
XSI_NIL = "{http://www.w3.org/2001/XMLSchema-instance}nil"
_US_GAAP_NAMESPACE = re.compile(r"^https?://(?:xbrl\.)?fasb\.org/us-gaap/")
_NONFRACTION = tuple(f"{{{ns}}}nonFraction" for ns in IX_NAMESPACES)
_TEXT_BLOCKS = frozenset({"p", "div", "li", "h1", "h2", "h3", "h4", "h5", "h6", "blockquote", "dd", "dt"})


# --- numbers -------------------------------------------------------------------------------

_SMALL = {
    word: n
    for n, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen".split()
    )
}
_TENS = {
    word: 10 * n for n, word in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()) if n > 1
}
_MULTIPLIERS = {"hundred": 100, "thousand": 1_000, "million": 1_000_000, "billion": 1_000_000_000}


def _words_to_number(text: str) -> Decimal | None:
    words = re.findall(r"[a-z]+", text.lower())
    if not words:
        return None
    if words in (["no"], ["none"], ["nil"]):
        return Decimal(0)
    total = current = 0
    for word in words:
        if word == "and":
            continue
        if word in _SMALL:
            current += _SMALL[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current *= 100
        elif word in _MULTIPLIERS:
            total += current * _MULTIPLIERS[word]
            current = 0
        else:
            return None
    return Decimal(total + current)


def ix_number(displayed: str, fmt: str | None, scale: str | None, sign: str | None) -> str | None:
    """The number a fact reports: the displayed text read by its format, times 10**scale, signed."""
    transform = (fmt or "").rsplit(":", 1)[-1].lower()
    if "zero" in transform:
        number: Decimal | None = Decimal(0)
    elif "words" in transform:
        number = _words_to_number(displayed)
    elif "comma" in transform and "decimal" in transform:
        number = _decimal(re.sub(r"[^\d,]", "", displayed).replace(",", "."))
    else:
        number = _decimal(re.sub(r"[^\d.]", "", displayed))
    exponent = _scale(scale)
    if number is None:
        return None
    number = number.scaleb(exponent)
    if sign == "-":
        number = -number
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def _scale(scale: str | None) -> int:
    """The power of ten a fact is scaled by; ValueError unless an integer within ``±MAX_SCALE``."""
    text = (scale or "0").strip()
    if not re.fullmatch(r"[+-]?\d{1,4}", text) or abs(int(text)) > MAX_SCALE:
        raise ValueError(f"scale {scale!r} is not an integer from -{MAX_SCALE} to {MAX_SCALE}")
    return int(text)


def _decimal(text: str) -> Decimal | None:
    if not text or not any(ch.isdigit() for ch in text):
        return None
    try:
        return Decimal(text)
    except InvalidOperation:
        return None


# --- units and datatypes -------------------------------------------------------------------


def read_units(root) -> dict[str, str]:
    """``unit id -> measure`` (``iso4217:USD``, ``xbrli:shares``, ``iso4217:USD/xbrli:shares``)."""
    units: dict[str, str] = {}
    for unit in root.iter(f"{{{XBRLI}}}unit"):

        def measures(parent) -> str:
            return "*".join((m.text or "").strip() for m in parent.iter(f"{{{XBRLI}}}measure"))

        divide = unit.find(f"{{{XBRLI}}}divide")
        if divide is not None:
            numerator = divide.find(f"{{{XBRLI}}}unitNumerator")
            denominator = divide.find(f"{{{XBRLI}}}unitDenominator")
            units[unit.get("id", "")] = f"{measures(numerator)}/{measures(denominator)}"
        else:
            units[unit.get("id", "")] = measures(unit)
    return units


def datatype_from_unit(measure: str, percent_shown: bool = False) -> str:
    """A datatype guess for a concept the taxonomy lacks, from the fact's unit."""

    def local(m: str) -> str:
        return m.rsplit(":", 1)[-1].lower()

    if "/" in measure:
        numerator, denominator = measure.split("/", 1)
        if numerator.startswith("iso4217:") and local(denominator) == "shares":
            return "perShareItemType"
        return "decimalItemType"
    if measure.startswith("iso4217:"):
        return "monetaryItemType"
    if local(measure) == "shares":
        return "sharesItemType"
    if local(measure) == "pure":
        return "percentItemType" if percent_shown else "pureItemType"
    return "decimalItemType"


# --- extraction ----------------------------------------------------------------------------


@dataclass
class ExtractStats:
    """Counts that let a test reconcile a filing with an independent tally (MANIFEST.tsv)."""

    us_gaap_elements: int = 0  # = hidden + undisplayed + empty + facts + merged
    hidden: int = 0  # inside ix:header (ix:hidden)
    undisplayed: int = 0  # inside a display:none box of the body
    empty: int = 0  # nothing displayed (xsi:nil)
    facts: int = 0
    merged: int = 0  # nested elements folded into an enclosing fact


def parse_document(data: bytes):
    """Parse an inline-XBRL document (XHTML); a document that is not well-formed is recovered."""
    data = data.lstrip()
    try:
        return etree.fromstring(data, etree.XMLParser(huge_tree=True, resolve_entities=False))
    except etree.XMLSyntaxError:
        parser = etree.XMLParser(huge_tree=True, recover=True, resolve_entities=False)
        root = etree.fromstring(data, parser)
        if root is None:
            parser = lxml_html.HTMLParser(huge_tree=True)
            root = lxml_html.document_fromstring(data, parser=parser)
        deep = too_deep(parser)  # recovering, the parser drops what lies deeper and says so only in its log
        if deep is not None:
            raise ValueError(f"{deep[0]} (line {deep[1]})") from None  # the depth is the error, not the syntax
        return root


def _us_gaap_name(element) -> str | None:
    prefix, _, name = (element.get("name") or "").rpartition(":")
    namespace = element.nsmap.get(prefix or None)
    return name if namespace and _US_GAAP_NAMESPACE.match(namespace) else None


def _percent_shown(element, cell) -> bool:
    if (element.tail or "").lstrip().startswith("%"):
        return True
    return cell is not None and "%" in inline_text(cell)


def extract_facts(root, stem: str, limits: ReadLimits = LIMITS) -> tuple[list[Fact], ExtractStats]:
    """Every visible us-gaap ``ix:nonFraction`` of a parsed filing, located, taxonomy-free."""
    stats = ExtractStats()
    units = read_units(root)
    table_index = {t: i for i, t in enumerate(el for el in root.iter() if local_name(el) == "table")}
    block_index: dict | None = None
    grids: dict[object, tuple[TableGrid, str]] = {}
    pending_text: dict[object, list[tuple[object, dict]]] = {}
    records: list[dict] = []

    for element in root.iter(*_NONFRACTION):
        own = _us_gaap_name(element)
        if own is not None:
            stats.us_gaap_elements += 1
        cell = table = block = hidden = None
        if is_hidden(element):
            hidden = element
        nested = False
        for ancestor in element.iterancestors():
            if ancestor.tag in _NONFRACTION:
                nested = True
            if hidden is None and is_hidden(ancestor):
                hidden = ancestor
                break
            name = local_name(ancestor)
            if cell is None and name in ("td", "th"):
                cell = ancestor
            if table is None and name == "table":
                table = ancestor
            if block is None and name in _TEXT_BLOCKS:
                block = ancestor
        if hidden is not None:
            if own is not None and local_name(hidden) in ("header", "hidden"):
                stats.hidden += 1
            elif own is not None:
                stats.undisplayed += 1
            continue
        if nested:
            continue  # part of the fact of its outermost nonFraction
        names = [n for n in (_us_gaap_name(inner) for inner in element.iter(*_NONFRACTION)) if n]
        if not names:
            continue
        displayed = inline_text(element)
        if not displayed or element.get(XSI_NIL) == "true":
            stats.empty += len(names)
            continue
        stats.merged += len(names) - 1
        measure = units.get(element.get("unitRef", ""), "")
        try:
            number = ix_number(displayed, element.get("format"), element.get("scale"), element.get("sign"))
        except ValueError as error:
            raise InputError(
                str(error),
                line=element.sourceline,
                field=f"scale of ix:nonFraction {element.get('id') or names[0]}",
                fix="inline XBRL scales are powers of ten such as 3 (thousands) or 6 (millions)",
            ) from None
        record = {
            "id": f"{stem}:{element.get('id') or 'n' + str(stats.facts)}",
            "value": displayed,
            "datatype": datatype_from_unit(measure, measure.endswith("pure") and _percent_shown(element, cell)),
            "gold": list(dict.fromkeys(names)),
            "row_header": "",
            "column_header": "",
            "sentence": "",
            "metadata": {
                "source": "ixbrl",
                "filing": stem,
                "number": number,
                "unit": measure,
                "scale": element.get("scale", "0"),
                "negated": element.get("sign") == "-",
                "decimals": element.get("decimals", ""),
                "n_elements": len(names),
            },
        }
        stats.facts += 1
        if table is not None:
            if table not in grids:
                grid = table_grid(table, max_cells=limits.table_cells)
                grids[table] = (grid, table_text(grid))
            grid, text = grids[table]
            record["modality"] = "table"
            record["context_id"] = f"{stem}#t{table_index[table]}"
            record["context"] = text
            located = grid.cell_of(cell) if cell is not None else None
            if located is not None:
                record["row_header"] = row_header(grid, located)
                record["column_header"] = column_header(grid, located)
            records.append(record)
        else:
            if block is None:
                block = element.getparent()
            if block_index is None:
                block_index = {el: i for i, el in enumerate(el for el in root.iter() if local_name(el) in _TEXT_BLOCKS)}
            record["modality"] = "text"
            record["context_id"] = f"{stem}#p{block_index.setdefault(block, len(block_index))}"
            pending_text.setdefault(block, []).append((element, record))
            records.append(record)

    _unique_ids(records)
    for block, members in pending_text.items():
        text, offsets = visible_text_with_offsets(block, [element for element, _ in members])
        for element, record in members:
            record["context"] = text
            record["sentence"] = sentence_at(text, offsets.get(element, 0))
    facts = [fact_from_dict(record) for record in records]
    return facts, stats


def _unique_ids(records: list[dict]) -> None:
    """Give a repeated fact id (an element id used twice, or one like ``n3`` we also made) a suffix."""
    seen: set[str] = set()
    for record in records:
        base, number = record["id"], 1
        while record["id"] in seen:
            number += 1
            record["id"] = f"{base}~{number}"
        seen.add(record["id"])


def filing_stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".htm", ".html", ".xhtml"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


# --- cache ---------------------------------------------------------------------------------


def cache_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir``, else ``$FHS_CACHE``, else ``~/.cache/fhs``."""
    return files.cache_dir(root=cache_dir)


def _cache_path(root: Path, stem: str, digest: str) -> Path:
    return root / "ixbrl" / f"{stem}.{digest[:24]}.p{PARSER_VERSION}.jsonl"


def _write_cache(path: Path, facts: list[Fact], stats: ExtractStats, digest: str) -> None:
    contexts: dict[str, str] = {}
    with files.atomic_write(path) as handle:
        header = {"kind": "header", "parser_version": PARSER_VERSION, "sha256": digest, "stats": vars(stats)}
        handle.write(json.dumps(header) + "\n")
        for fact in facts:
            if fact.context_id not in contexts:
                contexts[fact.context_id] = fact.context
                handle.write(
                    json.dumps({"kind": "context", "id": fact.context_id, "text": fact.context}, ensure_ascii=False)
                    + "\n"
                )
            record = fact.to_dict()
            del record["context"]
            handle.write(json.dumps({"kind": "fact", **record}, ensure_ascii=False) + "\n")


def _read_cache(path: Path) -> tuple[list[Fact], ExtractStats] | None:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        header = json.loads(lines[0])
        if header.get("kind") != "header" or header.get("parser_version") != PARSER_VERSION:
            return None
        contexts: dict[str, str] = {}
        facts = []
        for number, line in enumerate(lines[1:], start=2):
            record = json.loads(line)
            kind = record.pop("kind")
            if kind == "context":
                contexts[record["id"]] = record["text"]
            else:
                record["context"] = contexts[record["context_id"]]
                facts.append(fact_from_dict(record, path=path, line=number))
        return facts, ExtractStats(**header["stats"])
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None  # unreadable or stale: parse again


def extract_filing(
    path: str | Path,
    cache_dir: str | os.PathLike | None = None,
    use_cache: bool = True,
    stem: str | None = None,
    limits: ReadLimits = LIMITS,
) -> tuple[list[Fact], ExtractStats]:
    """The taxonomy-free facts of one filing (``.htm`` or ``.htm.gz``), from the cache when possible.

    ``stem`` names the filing in fact and context ids (default: the file name without its suffixes).
    A filing, gunzipped or not, holds at most ``limits.filing_bytes``.
    """
    path = Path(path)
    if not path.is_file():
        raise InputError("no such inline-XBRL file", path=path, fix="pass an .htm or .htm.gz filing")
    limit = limits.filing_bytes
    if path.stat().st_size > limit:
        raise InputError(
            f"is larger than {size_text(limit)}, the limit on a filing",
            path=path,
            fix="pass one filing, not a bundle of them",
        )
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    stem = stem or filing_stem(path)
    cached = _cache_path(cache_root(cache_dir), stem, digest)
    if use_cache and cached.is_file():
        hit = _read_cache(cached)
        if hit is not None:
            return hit
    try:
        data = gunzip(raw, limit) if path.name.endswith(".gz") else raw
    except TooLarge as error:
        raise InputError(
            f"expands to {error}, the limit on a filing's content: a gzip bomb, or not one filing",
            path=path,
            fix="pass one filing, .htm or .htm.gz",
        ) from None
    except ValueError as error:
        raise InputError(
            f"truncated or damaged gzip file ({error})",
            path=path,
            fix="download the filing again (MANIFEST.tsv lists its sha256)",
        ) from None
    try:
        root = parse_document(data)
    except (etree.LxmlError, ValueError) as error:
        raise InputError(f"cannot parse as (X)HTML: {error}", path=path) from None
    try:
        facts, stats = extract_facts(root, stem, limits)
    except InputError as error:  # the element's line and field; the file is known here
        raise InputError(error.problem, path=path, line=error.line, field=error.field, fix=error.fix) from None
    if use_cache:
        try:
            _write_cache(cached, facts, stats, digest)
        except OSError:
            pass  # a read-only cache only costs time
    return facts, stats


# --- taxonomy and loaders ------------------------------------------------------------------


def apply_taxonomy(facts: Iterable[Fact], taxonomy) -> list[Fact]:
    """Take each fact's datatype from the taxonomy and flag gold concepts outside it."""
    out = []
    for fact in facts:
        known = [taxonomy.get(name) for name in fact.gold]
        known = [concept for concept in known if concept is not None]
        metadata = dict(fact.metadata)
        metadata["unit_datatype"] = fact.datatype
        metadata["in_inventory"] = bool(known)
        datatype = known[0].datatype if known and known[0].datatype else fact.datatype
        out.append(replace(fact, datatype=datatype, metadata=metadata))
    return out


def load_filing(
    path: str | Path,
    taxonomy=None,
    *,
    cache_dir: str | os.PathLike | None = None,
    keep_unreachable: bool = True,
    stem: str | None = None,
    limits: ReadLimits = LIMITS,
) -> list[Fact]:
    """The located facts of any inline-XBRL filing a user brings (``.htm`` or ``.htm.gz``).

    With a taxonomy, datatypes come from it and facts whose gold concepts are all
    outside it are flagged (and dropped when ``keep_unreachable`` is False).
    ``stem`` overrides the name the ids start with (see ``extract_filing``).
    """
    facts, _ = extract_filing(path, cache_dir, stem=stem, limits=limits)
    if taxonomy is None:
        return facts
    facts = apply_taxonomy(facts, taxonomy)
    return facts if keep_unreachable else [f for f in facts if f.metadata["in_inventory"]]


@dataclass(frozen=True)
class Filing:
    """One MANIFEST.tsv row."""

    file: str
    path: Path
    us_gaap_version: str
    row: dict


def read_manifest(folder: Path) -> list[Filing]:
    """The filings listed in ``MANIFEST.tsv``; each must exist as ``<file>`` or ``<file>.gz``."""
    path = folder / MANIFEST
    if not path.is_file():
        raise InputError("no manifest", path=path, fix="expected MANIFEST.tsv beside the filings")
    filings = []
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle, delimiter="\t")
        missing = [c for c in MANIFEST_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise InputError("missing column", path=path, line=1, field=missing[0])
        for line, row in enumerate(reader, start=2):
            name, version = (row.get("file") or "").strip(), (row.get("us_gaap_version") or "").strip()
            if not name:
                raise InputError("empty file name", path=path, line=line, field="file")
            if not re.fullmatch(r"\d{4}", version):
                raise InputError(f"expected a year, got {version!r}", path=path, line=line, field="us_gaap_version")
            inside = folder.resolve()
            if inside not in (folder / name).resolve().parents:
                raise InputError(
                    f"file name {name!r} points outside the data folder",
                    path=path,
                    line=line,
                    field="file",
                    fix=f"list plain file names of {folder}",
                )
            candidates = [folder / name, folder / f"{name}.gz"]
            found = next((c for c in candidates if c.is_file()), None)
            if found is None:
                raise InputError(
                    f"listed filing {name} is missing",
                    path=path,
                    line=line,
                    field="file",
                    fix=f"put {name}.gz in {folder}",
                )
            filings.append(Filing(name, found, version, dict(row)))
    return filings


def load_filings(
    filings: Sequence[Filing],
    taxonomy,
    *,
    keep_unreachable: bool = False,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
) -> list[Fact]:
    facts: list[Fact] = []
    for filing in tqdm(filings, desc="iXBRL filings", unit="filing", disable=not progress):
        facts.extend(load_filing(filing.path, taxonomy, cache_dir=cache_dir, keep_unreachable=keep_unreachable))
    return facts


def _load(data_dir, taxonomy, versions, keep_unreachable, cache_dir, progress, files) -> list[Fact]:
    folder = source_dir("ixbrl", data_dir)
    filings = [f for f in read_manifest(folder) if f.us_gaap_version in versions]
    if files is not None:
        wanted = set(files)
        filings = [f for f in filings if f.file in wanted or filing_stem(f.path) in wanted]
    return load_filings(filings, taxonomy, keep_unreachable=keep_unreachable, cache_dir=cache_dir, progress=progress)


def load_test(
    data_dir: Path | None,
    taxonomy,
    *,
    keep_unreachable: bool = False,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    files: Iterable[str] | None = None,
) -> list[Fact]:
    """Test split: filings tagged with us-gaap 2024 or 2025.

    Facts whose gold concepts are all outside ``taxonomy`` (2025 filings may use
    elements newer than the 2024 inventory) cannot be retrieved by any method,
    so they are dropped unless ``keep_unreachable``; kept ones carry
    ``metadata["in_inventory"] = False``.
    """
    return _load(data_dir, taxonomy, TEST_VERSIONS, keep_unreachable, cache_dir, progress, files)


def load_dev(
    data_dir: Path | None,
    taxonomy,
    *,
    keep_unreachable: bool = False,
    cache_dir: str | os.PathLike | None = None,
    progress: bool = True,
    files: Iterable[str] | None = None,
) -> list[Fact]:
    """Development split: filings tagged with us-gaap 2023 (the only iXBRL data to tune on).

    Unreachable facts (gold outside ``taxonomy``: elements deprecated by 2024)
    are dropped unless ``keep_unreachable``, as for the test split.
    """
    return _load(data_dir, taxonomy, DEV_VERSIONS, keep_unreachable, cache_dir, progress, files)
