"""What a reader sees in an HTML fragment: visible text, sentences, offsets.

Both financial sources are HTML (FinTagging's table and paragraph fragments,
and inline-XBRL filings), and a method may only read what a reader of the page
reads. So every context, header and sentence handed to a method is built here
from text nodes alone: tags and attributes (where inline XBRL keeps its gold
concept names) never reach the output, and hidden parts (``ix:header``,
``display:none``, scripts) are skipped.

Everything here is whitespace-collapsed text with a newline between block
elements. Tables are rendered by :mod:`fhs.data.datasets.html_tables` (one line
per row, cells joined by ``" | "``), and :mod:`fhs.data.datasets.html_page`
puts the two together into the text of a page.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from lxml import html as lxml_html

from fhs.data.datasets.numbers import INVISIBLE

IX_NAMESPACE_PREFIX = "http://www.xbrl.org/"

# Elements whose content is never shown.
SKIPPED = frozenset({"script", "style", "head", "title", "meta", "link", "noscript", "template"})
# Elements that start a new line.
BLOCKS = frozenset(
    {
        "p",
        "div",
        "li",
        "ul",
        "ol",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "section",
        "article",
        "blockquote",
        "center",
        "dd",
        "dt",
        "dl",
        "hr",
        "pre",
        "address",
        "header",
        "footer",
        "table",
        "tr",
        "caption",
        "body",
        "html",
        "form",
        "figure",
        "figcaption",
        "nav",
        "main",
    }
)

_NONE, _SPACE, _NEWLINE = 0, 1, 2


def local_name(element) -> str:
    """The tag without namespace, lower-cased; ``""`` for comments and processing instructions."""
    tag = element.tag
    if not isinstance(tag, str):
        return ""
    return tag.rsplit("}", 1)[-1].lower()


def is_hidden(element) -> bool:
    """Inline-XBRL header (hidden facts, contexts, units), scripts, and ``display:none`` boxes."""
    name = local_name(element)
    if name in SKIPPED or not name:
        return True
    tag = element.tag
    if name in ("header", "hidden") and tag.startswith("{") and tag[1:].startswith(IX_NAMESPACE_PREFIX):
        return True
    style = element.get("style")
    if style and "display" in style and "none" in style:
        return re.search(r"display\s*:\s*none", style, re.IGNORECASE) is not None
    return False


def too_deep(parser) -> tuple[str, int | None] | None:
    """What the parser said, and where, if elements nested past its depth limit: it then drops what
    lies deeper without an error, so a caller refuses the file instead (``None`` when all was read)."""
    for entry in parser.error_log:
        if entry.type_name == "ERR_RESOURCE_LIMIT":
            depth = re.search(r"depth in document: (\d+)", entry.message)
            limit = f" of {depth.group(1)} levels" if depth else ""
            return (
                f"elements nest deeper than the parser's limit{limit}, so what lies deeper would be lost",
                entry.line,
            )
    return None


def parse_fragment(markup: str):
    """Parse an HTML fragment (table or paragraphs) into one ``<div>`` element."""
    return lxml_html.fragment_fromstring(markup or "", create_parent="div")


class TextBuilder:
    """Collapses whitespace while text is appended, so offsets are final as they are taken.

    A run of whitespace becomes one space, a block boundary one newline, and
    nothing is emitted before the first visible character.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._length = 0
        self._pending = _NONE

    def text(self, raw: str | None) -> None:
        if not raw:
            return
        raw = raw.translate(INVISIBLE)
        if not raw:
            return
        words = raw.split()
        if not words:
            self._pending = max(self._pending, _SPACE)
            return
        if raw[0].isspace():
            self._pending = max(self._pending, _SPACE)
        self._flush()
        joined = " ".join(words)
        self._parts.append(joined)
        self._length += len(joined)
        self._pending = _SPACE if raw[-1].isspace() else _NONE

    def lines(self, raw: str) -> None:
        """Append text whose line breaks must survive (a rendered table)."""
        for line in raw.split("\n"):
            self.newline()
            self.text(line)
        self.newline()

    def space(self) -> None:
        self._pending = max(self._pending, _SPACE)

    def newline(self) -> None:
        self._pending = _NEWLINE

    def offset(self) -> int:
        """Where the next visible character will land."""
        return self._length + (1 if self._pending and self._length else 0)

    def _flush(self) -> None:
        if self._pending and self._length:
            sep = "\n" if self._pending == _NEWLINE else " "
            self._parts.append(sep)
            self._length += 1
        self._pending = _NONE

    def result(self) -> str:
        return "".join(self._parts)


TableRenderer = Callable[[object], str]


def _walk(root, out: TextBuilder, marks: Collection, offsets: dict, render_table: TableRenderer | None) -> None:
    """Visit ``root`` and its visible descendants in document order, with an explicit stack.

    A hostile page may nest elements thousands deep; recursion would stop at
    Python's limit, so each element pushes its own close and its children's tails.
    """
    stack: list[tuple[str, Any]] = [("open", root)]  # an element to open, a tag to close or a tail text
    while stack:
        step, item = stack.pop()
        if step == "tail":
            out.text(item)
            continue
        if step == "close":
            if item in BLOCKS:
                out.newline()
            elif item in ("td", "th"):
                out.space()
            continue
        element = item
        if element in marks and element not in offsets:
            offsets[element] = out.offset()
        name = local_name(element)
        if name == "br":
            out.space()
            continue
        if name == "table" and render_table is not None:
            # Facts inside a rendered table get no offsets; they are located by cell.
            out.lines(render_table(element))
            continue
        if name in BLOCKS:
            out.newline()
        elif name in ("td", "th"):
            out.space()
        out.text(element.text)
        stack.append(("close", name))
        for child in reversed(element):
            stack.append(("tail", child.tail))
            if not is_hidden(child):
                stack.append(("open", child))


def text_with_offsets(
    element, marks: Collection = (), *, render_table: TableRenderer | None = None
) -> tuple[str, dict]:
    """Visible text of ``element`` and the offset in it where each marked element starts.

    A nested ``<table>`` is rendered by ``render_table`` when one is given (the
    page text of :mod:`fhs.data.datasets.html_page` renders it row by row);
    without one its cells are plain space-separated text (the text inside one
    cell).
    """
    out = TextBuilder()
    offsets: dict = {}
    marks = set(marks)
    if not is_hidden(element):
        _walk(element, out, marks, offsets, render_table)
    return out.result(), offsets


def inline_text(element) -> str:
    """Visible text inside one element (a table cell) on a single line."""
    return " ".join(text_with_offsets(element, ())[0].split())


# --- sentences -----------------------------------------------------------------------------

_ABBREVIATIONS = frozenset(
    """
    u.s u.k inc corp co ltd llc l.p lp n.a s.a no nos mr mrs ms dr jr sr st vs e.g i.e etc approx
    jan feb mar apr jun jul aug sep sept oct nov dec fig figs dept est
""".split()
)
_BOUNDARY = re.compile(r"[.!?][\"'”’)\]]*\s+(?=[\"'“‘(\[]?[A-Z0-9$])|\n+")


@dataclass(frozen=True)
class Span:
    start: int
    end: int


def sentence_spans(text: str) -> list[Span]:
    """Sentence spans of ``text``: split after . ! ? before a capital or digit, and at newlines.

    A period after a known abbreviation (``U.S.``, ``Inc.``) or a single initial does not end a sentence.
    """
    spans: list[Span] = []
    start = 0
    for match in _BOUNDARY.finditer(text):
        if match.group().startswith("."):
            word = re.search(r"([A-Za-z.]+)$", text[start : match.start()])
            token = (word.group(1) if word else "").lower().strip(".")
            if token in _ABBREVIATIONS or (len(token) == 1 and token.isalpha()):
                continue
        end = match.start() + len(match.group().rstrip())
        if text[start:end].strip():
            spans.append(Span(start, end))
        start = match.end()
    if text[start:].strip():
        spans.append(Span(start, len(text)))
    return spans


def sentence_at(text: str, offset: int) -> str:
    """The sentence of ``text`` that holds character ``offset`` (the next one if it falls between two)."""
    spans = sentence_spans(text)
    for span in spans:
        if offset < span.end:
            return text[span.start : span.end].strip()
    return text[spans[-1].start : spans[-1].end].strip() if spans else ""
