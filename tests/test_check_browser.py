"""scripts/check_browser.py: headless Chromium, offline, fails a page on what a reader would see broken.

The browser tests need Debian's chromium (``make check-browser`` says how to install it); where it is
missing they are skipped with that reason. The page list and the URL rule need nothing.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("check_browser", ROOT / "scripts" / "check_browser.py")
check_browser = importlib.util.module_from_spec(spec)
sys.modules["check_browser"] = check_browser  # its dataclasses look it up
spec.loader.exec_module(check_browser)

MATHJAX = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / \
    "site-packages" / "sphinx-mathjax-offline" / "static" / "mathjax" / "tex-chtml.js"
GIF = "data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7"
needs_chromium = pytest.mark.skipif(not any(shutil.which(c) for c in ("chromium", "chromium-browser")),
                                    reason="no chromium on this machine (apt-get install chromium)")


def page(path: Path, body: str, head: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"<html><head>{head}</head><body>{body}</body></html>", encoding="utf-8")


def test_pages_are_the_books_html_outside_its_asset_folders(tmp_path):
    for name in ("index.html", "book/a.html", "_static/x.html", "_sources/y.html"):
        page(tmp_path / name, "")
    assert [p.relative_to(tmp_path).as_posix() for p in check_browser.pages(tmp_path)] == ["book/a.html",
                                                                                         "index.html"]
    with pytest.raises(check_browser.CannotCheck, match="no built book"):
        check_browser.pages(tmp_path / "book")


def test_only_local_schemes_stay_on_the_machine():
    assert not check_browser.leaves_the_machine("file:///a/b.png")
    assert not check_browser.leaves_the_machine(GIF)
    assert check_browser.leaves_the_machine("https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js")


@pytest.mark.slow
@needs_chromium
def test_a_broken_page_fails_and_a_sound_one_passes(tmp_path):
    book = tmp_path / "html"
    page(book / "index.html", '', head='<meta http-equiv="Refresh" content="0; url=book/fine.html" />')
    page(book / "book" / "fine.html", f'<h1>fine</h1><img src="{GIF}">')
    page(book / "book" / "gone.html", '', head='<meta http-equiv="Refresh" content="0; url=nowhere.html" />')
    page(book / "book" / "broken.html", '<img src="missing.png"><script>console.error("boom")</script>'
                                        '<img src="https://example.com/logo.png">')
    page(book / "book" / "no_mathjax.html", r'<span class="math">\(x^2\)</span>')
    assert MATHJAX.is_file(), MATHJAX
    shutil.copytree(MATHJAX.parent, book / "mathjax")  # the script and the fonts it loads
    page(book / "book" / "math.html", r'<p><span class="math notranslate nohighlight">\(\beta\,\bar v\)</span></p>',
         head='<script>window.MathJax = {options: {processHtmlClass: "math"}}</script>'
              '<script defer src="../mathjax/tex-chtml.js"></script>')
    results = {r.page: r for r in check_browser.check_book(book, check_browser.find_chromium(), tmp_path / "shots")}
    assert results["index.html"].ok and results["book/fine.html"].ok and results["book/math.html"].ok, results
    assert results["book/gone.html"].problems == ["redirects to a missing page: nowhere.html"]
    assert results["book/math.html"].math == 1
    broken = " | ".join(results["book/broken.html"].problems)
    assert "console error: boom" in broken and "image did not load" in broken
    assert "request leaving the machine: https://example.com/logo.png" in broken
    assert "no MathJax" in " ".join(results["book/no_mathjax.html"].problems)
    assert sorted(p.name for p in (tmp_path / "shots").iterdir()) == [
        "book__broken.png", "book__fine.png", "book__math.png", "book__no_mathjax.png"]  # redirects are not loaded


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
@pytest.mark.parametrize("book", ["_build/html", "_build/adapter/_build/html", "my book;echo $(HOME) `id` $$x \"q"])
def test_make_check_browser_hands_the_book_folder_to_the_script_as_one_argument(tmp_path, book):
    """BOOK picks the built book (an adapter's too); the shell never splits or runs what it holds."""
    import subprocess

    python = tmp_path / "venv" / "bin" / "python"  # stands in for the environment's Python: records its argv
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {tmp_path / "argv.txt"}\n')
    python.chmod(0o755)
    given = [] if book == "_build/html" else [f"BOOK={book}"]  # the default, then BOOK given
    done = subprocess.run(["make", "-o", "install-book", "check-browser", f"VENV={python.parent.parent}",
                           "CHROMIUM=true", *given], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "argv.txt").read_text().splitlines()[:2] == ["scripts/check_browser.py", book]


@pytest.mark.slow
@needs_chromium
def test_a_results_page_fails_when_its_first_screen_holds_no_result(tmp_path):
    """A chapter (NN_name) or the claims page must show a table with a number, or a figure, on its first screen;
    prose pages are free, and a table folded shut does not count."""
    book = tmp_path / "html"
    table = '<div class="cell_output"><table><tr><td>R@1</td><td>0.050</td></tr></table></div>'
    tall = f'<p style="height: {check_browser.FIRST_SCREEN}px">prose</p>'
    page(book / "index.html", "<h1>home</h1>")
    page(book / "book" / "01_lead.html", f"<h1>one</h1>{table}{tall}")
    page(book / "book" / "02_late.html", f"<h1>two</h1>{tall}{table}")
    page(book / "book" / "03_folded.html", f"<h1>three</h1><details><summary>open</summary>{table}</details>")
    page(book / "book" / "04_figure.html", f'<div class="cell_output"><img src="{GIF}"></div>')
    page(book / "book" / "claims.html", f"<h1>claims</h1>{table}{tall}")
    page(book / "book" / "notes.html", f"<h1>notes</h1>{tall}")
    results = {r.page: r for r in check_browser.check_book(book, check_browser.find_chromium(), tmp_path / "shots")}
    assert all(results[p].ok for p in ("book/01_lead.html", "book/04_figure.html", "book/claims.html",
                                       "book/notes.html", "index.html")), results
    late = results["book/02_late.html"].problems
    first = f"no result on the first screen (top {check_browser.FIRST_SCREEN} px)"
    assert len(late) == 1 and late[0].startswith(f"{first}: the first result at ")
    assert results["book/03_folded.html"].problems == [f"{first}: no table with a number or figure"]
    # where the first result sits is kept, so a chapter's distance from the rule can be read off the report
    assert results["book/01_lead.html"].first_result < 100 <= check_browser.FIRST_SCREEN
    assert results["book/02_late.html"].first_result >= check_browser.FIRST_SCREEN
    assert results["book/03_folded.html"].first_result is None and results["book/notes.html"].first_result is None
    assert (tmp_path / "shots" / "claims.full.png").stat().st_size > 0
