"""Check that a built book loads nothing from the network.

    python -m fhs.book.offline _build/html

The book must open from a USB stick on a machine with no network. This scans what a
browser loads when it opens a page:

- in every HTML file, the tags that fetch a resource (script, stylesheet and icon
  links, images, frames, media, objects), CSS ``url()`` and ``@import`` in ``<style>``
  blocks and ``style`` attributes, and any absolute URL inside an inline ``<script>``
  (that is how a CDN address hides in a config snippet);
- in every CSS file, ``url()`` and ``@import``;
- on every page with math, that MathJax is loaded from the book itself and exists.

Plain links (``<a href>``) are fine: they load nothing until clicked. JavaScript files
are not scanned: MathJax's own bundle names CDN addresses for optional features that
load only when a reader turns them on in its menu.

Exit status 0 when clean, 1 with one line per problem otherwise.
"""

from __future__ import annotations

import re
import sys
from html.parser import HTMLParser
from pathlib import Path

ABSOLUTE = re.compile(r"^\s*(?:https?:)?//", re.IGNORECASE)
URL_IN_TEXT = re.compile(r"(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s\"'<>)]*")
CSS_LOAD = re.compile(r"""(?:url\(\s*["']?|@import\s+(?:url\(\s*)?["']?)\s*((?:https?:)?//[^"')\s;]+)""", re.IGNORECASE)
# tag -> attributes that make the browser fetch something
FETCHING = {
    "script": ("src",),
    "img": ("src", "srcset"),
    "iframe": ("src",),
    "frame": ("src",),
    "source": ("src", "srcset"),
    "video": ("src", "poster"),
    "audio": ("src",),
    "track": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
}
FETCHING_LINK_RELS = {
    "stylesheet",
    "preload",
    "modulepreload",
    "prefetch",
    "preconnect",
    "dns-prefetch",
    "icon",
    "shortcut",
    "apple-touch-icon",
    "manifest",
    "mask-icon",
}


class _PageScanner(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.problems: list[str] = []
        self.scripts: list[str] = []  # src of every script tag
        self.has_math = False
        self._in: str | None = None  # "script" or "style" while inside an inline block

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        for name in FETCHING.get(tag, ()):
            for url in _urls(values.get(name, ""), srcset=name == "srcset"):
                if ABSOLUTE.match(url):
                    self.problems.append(f"<{tag} {name}> loads {url}")
        if tag == "link":
            rels = set(values.get("rel", "").lower().split())
            if rels & FETCHING_LINK_RELS and ABSOLUTE.match(values.get("href", "")):
                self.problems.append(f"<link rel={values.get('rel')}> loads {values['href']}")
        if "style" in values:
            self.problems += [f"style attribute loads {u}" for u in CSS_LOAD.findall(values["style"])]
        if tag == "script":
            if values.get("src"):
                self.scripts.append(values["src"])
            else:
                self._in = "script"
        elif tag == "style":
            self._in = "style"
        classes = values.get("class", "").split()
        if "math" in classes:
            self.has_math = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "style":
            self.problems += [f"<style> loads {u}" for u in CSS_LOAD.findall(data)]
        elif self._in == "script":
            self.problems += [f"inline <script> names {u}" for u in URL_IN_TEXT.findall(data)]


def _urls(value: str, *, srcset: bool) -> list[str]:
    if not srcset:
        return [value] if value else []
    return [part.strip().split()[0] for part in value.split(",") if part.strip()]


def scan_html(text: str) -> tuple[list[str], list[str], bool]:
    """(problems, script sources, whether the page has math) for one HTML document."""
    scanner = _PageScanner()
    scanner.feed(text)
    scanner.close()
    return scanner.problems, scanner.scripts, scanner.has_math


def scan_css(text: str) -> list[str]:
    return [f"CSS loads {url}" for url in CSS_LOAD.findall(text)]


def check_tree(root: Path) -> list[str]:
    """Every problem under ``root`` as ``path: message``."""
    if not root.is_dir():
        return [f"{root}: no such folder (build the book first)"]
    problems: list[str] = []
    pages = sorted(root.rglob("*.html"))
    if not pages:
        problems.append(f"{root}: no HTML pages")
    for page in pages:
        found, scripts, has_math = scan_html(page.read_text(encoding="utf-8", errors="replace"))
        problems += [f"{page}: {message}" for message in found]
        if has_math:
            mathjax = [s for s in scripts if "mathjax" in s.lower()]
            if not mathjax:
                problems.append(f"{page}: has math but loads no MathJax")
            for src in mathjax:
                local = (page.parent / src.split("?")[0]).resolve()
                if ABSOLUTE.match(src) or not local.is_file():
                    problems.append(f"{page}: MathJax {src} is not a file of the book")
    for sheet in sorted(root.rglob("*.css")):
        problems += [f"{sheet}: {m}" for m in scan_css(sheet.read_text(encoding="utf-8", errors="replace"))]
    return problems


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0] if args else "_build/html")
    problems = check_tree(root)
    if problems:
        print(f"{len(problems)} network load(s) in {root}:", file=sys.stderr)
        for line in problems:
            print(f"  {line}", file=sys.stderr)
        return 1
    pages = len(list(root.rglob("*.html")))
    print(f"offline check: {pages} pages and their stylesheets load nothing from the network")
    return 0


if __name__ == "__main__":
    sys.exit(main())
