"""Comments and docstrings in fhs/ say why, and cite only what the repository holds.

History goes into commit messages and measured figures into book/records/ (CONTRIBUTING.md,
"Measured figures"); a comment that quotes either goes stale with the next change or machine.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "fhs"

REFUSED = {
    "an issue number": re.compile(r"\bissues? #?\d+|(?<![\w&])#\d{2,}\b", re.IGNORECASE),
    "a date": re.compile(r"(?<![\w-])(19|20)\d\d-[01]\d(-[0-3]\d)?\b"
                         r"|\b(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]* (19|20)\d\d\b"),
    "a commit hash": re.compile(r"(?<![\w-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)([0-9a-f]{7,12}|[0-9a-f]{40})\b"),
    "a measured time": re.compile(r"\b\d+(\.\d+)? ?(s|ms|min|mins|seconds?|minutes?|hours?)\b(?!-)"),
    "history": re.compile(r"\bnow kept\b|\bstill work|\bpreviously\b|\bformerly\b|\bthe old (name|spelling)\b",
                          re.IGNORECASE),
}


def commentary(source: str) -> Iterator[tuple[int, str]]:
    """Each comment and docstring of a module, with its line."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield node.body[0].lineno, doc


def findings(source: str) -> list[str]:
    return [f"line {line}: {what} ({match.group(0)!r})" for line, text in commentary(source)
            for what, pattern in REFUSED.items() for match in pattern.finditer(text)]


@pytest.mark.parametrize("text", [
    "# kept apart since issue 43", "# (issue 53, case 13)", "# see #123", '"""Written 2026-07-24."""',
    "# the fix of 41054b3", "# whole, the codes take about 26 minutes", "# cut at 64 they took 544 s",
    "# which cost 0.3 ms a line", "# the flat names chapters took before still work", "# now kept per fact",
])
def test_the_check_refuses_history_issue_numbers_dates_hashes_and_times(text):
    assert findings(text + "\nx = 1\n")


@pytest.mark.parametrize("text", [
    "# Eq. 3: S~(c) + beta * v(c)", "# gpt-4o-2024-08-06, as the API names the snapshot", "# Table 19's counts",
    "# runs/paper/fincl/fhs-seed0-1a2b3c4d", "# a same-level section no longer encloses it", "# K_v = 10 candidates",
])
def test_the_check_lets_plain_why_comments_through(text):
    assert not findings(text + "\nx = 1\n")


def test_no_comment_in_the_package_quotes_history_issue_numbers_dates_hashes_or_measured_times():
    found = [f"{path.relative_to(ROOT)} {problem}" for path in sorted(PACKAGE.rglob("*.py"))
             for problem in findings(path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_every_page_a_module_cites_is_in_the_repository():
    """A module cites the paper (section, table, equation) or a file shipped here, never one outside it."""
    cited = {(path.relative_to(ROOT), name) for path in sorted(PACKAGE.rglob("*.py"))
             for _, text in commentary(path.read_text(encoding="utf-8"))
             for name in re.findall(r"[\w./-]+\.md\b", text)}
    pages = {page.name for page in ROOT.glob("*.md")} | {page.name for page in (ROOT / "book").glob("*.md")}
    missing = [f"{path}: {name}" for path, name in sorted(cited)
               if Path(name).name not in pages and not re.fullmatch(r"(book/)?[A-Z]\.md", name)]
    assert not missing, "\n".join(missing)
