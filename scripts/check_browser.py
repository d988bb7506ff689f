#!/usr/bin/env python3
"""Open every page of the built book in headless Chromium, offline, and fail on what a reader would see broken.

    python scripts/check_browser.py [_build/html] [--screenshots _build/browser] [--chromium PATH]

``make check-browser`` runs it on ``_build/html`` after ``make book``. Each page is loaded from
``file://`` with the network off (every host resolves to nothing and every request goes to a
proxy that is not there), and the page fails on:

- a console error or an uncaught exception;
- an image that did not load (incomplete, or no pixels);
- math that MathJax did not render (an element of class ``math`` without MathJax's output, or a
  MathJax error);
- any request that would leave the machine (a scheme other than file, data, blob or about);
- a results page (a chapter, ``NN_name.html``, or the claims page) whose first screen, the top
  ``FIRST_SCREEN`` pixels (the 1280 by 1600 window the screenshots show), holds no result: a table a code cell printed
  with a number in it, or a figure it drew (a folded block's tables do not count until opened).

A screenshot of every page goes to ``--screenshots`` (default ``_build/browser/``), and of the claims
page's whole length as ``claims.full.png``. It drives
Chromium through the DevTools protocol over a pipe (``--remote-debugging-pipe``), so it needs
nothing but Chromium and the standard library: Debian's ``chromium`` package
(``apt-get install chromium``), or ``--chromium PATH`` / ``$CHROMIUM`` for another build.
Exit status: 0 when every page passes, 1 when any fails, 2 when Chromium or the book is missing.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:", "chrome:", "chrome-extension:", "devtools:")
SKIPPED_FOLDERS = {"_static", "_sources", "_images", "_sphinx_design_static"}
PAGE_TIMEOUT = 60.0  # seconds a page may take to load and typeset
WINDOW = (1280, 1600)  # the window every page is loaded and photographed in
FIRST_SCREEN = WINDOW[1]  # pixels from the top of a page that the window shows before scrolling
RESULTS_PAGE = re.compile(r"(^|/)(\d\d_[^/]*|claims)\.html$")  # chapters and the claims page
CLAIMS_PAGE = re.compile(r"(^|/)claims\.html$")
# Where the first result a code cell showed sits (a table holding a digit, or a drawn figure); null if none.
FIRST_RESULT = """(() => {
  const shown = e => !e.closest('details:not([open])') && e.getClientRects().length > 0 && e.offsetWidth > 0;
  const tables = Array.from(document.querySelectorAll('.cell_output table'))
    .filter(t => shown(t) && /[0-9]/.test(Array.from(t.querySelectorAll('td')).map(c => c.textContent).join(' ')));
  const figures = Array.from(document.querySelectorAll('.cell_output img'))
    .filter(i => shown(i) && i.complete && i.naturalWidth > 0);
  const tops = tables.concat(figures).map(e => e.getBoundingClientRect().top + window.scrollY);
  return tops.length ? Math.min(...tops) : null;
})()"""
# What the page itself reports once loaded and typeset (MathJax v3 renders into mjx-container).
INSPECT = """(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await Promise.race([MathJax.startup.promise, new Promise(r => setTimeout(r, 20000))]);
  }
  const images = Array.from(document.images)
    .filter(i => !i.complete || i.naturalWidth === 0).map(i => i.currentSrc || i.src);
  const math = Array.from(document.querySelectorAll('.math'));
  const unrendered = math.filter(m => !m.querySelector('mjx-container') && m.tagName !== 'MJX-CONTAINER')
    .map(m => m.textContent.trim().slice(0, 80));
  const errors = Array.from(document.querySelectorAll('mjx-merror')).map(e => e.textContent.slice(0, 80));
  return JSON.stringify({images, math: math.length, unrendered, mathErrors: errors,
                         mathjax: !!(window.MathJax && MathJax.startup)});
})()"""


class CannotCheck(RuntimeError):
    """Chromium or the built book is missing, or Chromium stopped answering."""


@dataclass
class PageResult:
    page: str
    problems: list[str] = field(default_factory=list)
    math: int = 0
    screenshot: str = ""
    first_result: float | None = None  # a results page's first result, in pixels from the top (None: none shown)

    @property
    def ok(self) -> bool:
        return not self.problems


def find_chromium(given: str | None = None) -> str:
    """The Chromium to run: ``given``, ``$CHROMIUM``, or Debian's ``chromium`` on the PATH."""
    for candidate in (given, os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if candidate and (path := shutil.which(candidate)):
            return path
    raise CannotCheck("no Chromium found: install Debian's package (apt-get install chromium), or pass "
                      "--chromium PATH (or set CHROMIUM)")


def pages(root: Path) -> list[Path]:
    """Every HTML page of the built book, outside the theme's and Sphinx's asset folders."""
    if not (root / "index.html").is_file():
        raise CannotCheck(f"no built book at {root} (no index.html): run make book first")
    return sorted(p for p in root.rglob("*.html") if not SKIPPED_FOLDERS & set(p.relative_to(root).parts[:-1]))


def leaves_the_machine(url: str) -> bool:
    return not url.startswith(LOCAL_SCHEMES)


class Browser:
    """Headless Chromium driven through the DevTools protocol over a pipe: JSON messages ending in NUL."""

    def __init__(self, chromium: str, profile: Path) -> None:
        to_chrome_read, self._write = os.pipe()
        self._read, from_chrome_write = os.pipe()
        # Chromium reads commands on fd 3 and writes answers on fd 4; keep the pipe ends above them.
        to_chrome_read = _above(to_chrome_read, 10)
        from_chrome_write = _above(from_chrome_write, 10)

        def wire() -> None:  # in the child, before exec
            os.dup2(to_chrome_read, 3)
            os.dup2(from_chrome_write, 4)

        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [chromium, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions", "--mute-audio",
             f"--user-data-dir={profile}", "--host-resolver-rules=MAP * ~NOTFOUND",
             "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-features=Translate,OptimizationHints,MediaRouter", f"--window-size={WINDOW[0]},{WINDOW[1]}",
             "about:blank"],
            preexec_fn=wire, close_fds=False, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=self.log)
        os.close(to_chrome_read)
        os.close(from_chrome_write)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float = PAGE_TIMEOUT) -> dict[str, Any]:
        """One command; its result (events that arrive meanwhile are kept in ``events``)."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise CannotCheck(f"{method}: {answer['error'].get('message')}")
                return answer.get("result", {})
            self.events.append(answer)

    def wait_for(self, method: str, session: str, timeout: float = PAGE_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            self.events.append(self._receive(deadline))

    def _receive(self, deadline: float) -> dict[str, Any]:
        import select

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise CannotCheck("Chromium did not answer in time")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                self.log.seek(0)
                raise CannotCheck(f"Chromium stopped: {self.log.read().decode(errors='replace')[-1000:]}")
            self._buffer += chunk
        message, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(message)

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=10)
        except CannotCheck:
            pass
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._write)
        os.close(self._read)
        self.log.close()


def _above(fd: int, low: int) -> int:
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, low)
    os.close(fd)
    return moved


REFRESH = re.compile(r'<meta[^>]+http-equiv="refresh"[^>]+url=([^"\'>]+)', re.IGNORECASE)


def redirect_target(path: Path) -> str | None:
    """Where a redirect page (a meta refresh, as Jupyter Book writes index.html) sends the reader."""
    found = REFRESH.search(path.read_text(encoding="utf-8", errors="replace")[:4096])
    return found.group(1).strip() if found else None


def check_page(browser: Browser, path: Path, root: Path, shots: Path | None) -> PageResult:
    """Load one page in a fresh tab and collect what a reader would see broken.

    A redirect page is not loaded (the tab would leave it mid-check); its target must exist, and
    is checked as a page of its own. A page that does not finish within ``PAGE_TIMEOUT`` fails."""
    result = PageResult(str(path.relative_to(root)))
    target_page = redirect_target(path)
    if target_page is not None:
        if leaves_the_machine(target_page) and "://" in target_page:
            result.problems.append(f"redirects off the machine: {target_page}")
        elif not (path.parent / target_page.split("#")[0]).is_file():
            result.problems.append(f"redirects to a missing page: {target_page}")
        return result
    try:
        return _load_and_inspect(browser, path, result, shots)
    except CannotCheck as error:
        if browser.process.poll() is not None:
            raise
        result.problems.append(f"did not finish loading and typesetting: {error}")
        return result


def _load_and_inspect(browser: Browser, path: Path, result: PageResult, shots: Path | None) -> PageResult:
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    browser.events.clear()
    for domain in ("Page", "Runtime", "Network", "Log"):
        browser.send(f"{domain}.enable", session=session)
    browser.send("Page.navigate", {"url": path.resolve().as_uri()}, session=session)
    browser.wait_for("Page.loadEventFired", session)
    inspected = browser.send("Runtime.evaluate", {"expression": INSPECT, "awaitPromise": True,
                                                  "returnByValue": True}, session=session)
    found = json.loads(inspected.get("result", {}).get("value") or "{}")
    for event in (e for e in browser.events if e.get("sessionId") == session):
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            result.problems.append(f"console error: {text[:200]}")
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text", "")
            result.problems.append(f"uncaught exception: {text[:200]}")
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            entry = params["entry"]
            result.problems.append(f"console error: {entry.get('text', '')[:160]} {entry.get('url', '')}")
        elif method == "Network.requestWillBeSent" and leaves_the_machine(params.get("request", {}).get("url", "")):
            result.problems.append(f"request leaving the machine: {params['request']['url'][:200]}")
        elif method == "Network.loadingFailed" and not params.get("canceled"):
            result.problems.append(f"failed to load: {params.get('errorText')} ({params.get('type')})")
    result.problems += [f"image did not load: {src}" for src in found.get("images", [])]
    result.math = int(found.get("math", 0))
    if result.math and not found.get("mathjax"):
        result.problems.append(f"{result.math} math elements and no MathJax on the page")
    result.problems += [f"math not rendered: {text}" for text in found.get("unrendered", [])]
    result.problems += [f"MathJax error: {text}" for text in found.get("mathErrors", [])]
    if RESULTS_PAGE.search(result.page):
        first = browser.send("Runtime.evaluate", {"expression": FIRST_RESULT, "returnByValue": True},
                             session=session).get("result", {}).get("value")
        result.first_result = first
        if first is None or first >= FIRST_SCREEN:
            where = "no table with a number or figure" if first is None else f"the first result at {first:.0f} px"
            result.problems.append(f"no result on the first screen (top {FIRST_SCREEN} px): {where}")
    if shots is not None and CLAIMS_PAGE.search(result.page):
        png = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                           session=session)["data"]
        (shots / "claims.full.png").write_bytes(base64.b64decode(png))
    if shots is not None:
        png = browser.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": False},
                           session=session)["data"]
        shot = shots / (result.page.replace("/", "__").removesuffix(".html") + ".png")
        shot.write_bytes(base64.b64decode(png))
        result.screenshot = str(shot)
    browser.send("Target.closeTarget", {"targetId": target})
    return result


def check_book(root: Path, chromium: str, shots: Path | None) -> list[PageResult]:
    found = pages(root)
    if shots is not None:
        shots.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fhs-chromium-") as profile:
        browser = Browser(chromium, Path(profile))
        try:
            return [check_page(browser, path, root, shots) for path in found]
        finally:
            browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/check_browser.py", description=__doc__.split("\n")[0])
    parser.add_argument("root", nargs="?", default="_build/html", help="the built book (default _build/html)")
    parser.add_argument("--screenshots", default="_build/browser", help="one PNG per page here ('' for none)")
    parser.add_argument("--chromium", default=None, help="the Chromium binary (default: $CHROMIUM or chromium)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    try:
        results = check_book(Path(args.root), find_chromium(args.chromium),
                             Path(args.screenshots) if args.screenshots else None)
    except CannotCheck as error:
        print(f"check-browser: {error}", file=sys.stderr)
        return 2
    for r in results:
        where = f", first result at {r.first_result:.0f} px" if r.first_result is not None else ""
        print(f"{'ok  ' if r.ok else 'FAIL'} {r.page} ({r.math} math{where})")
        for problem in r.problems:
            print(f"       {problem}")
    failed = sum(not r.ok for r in results)
    print(f"check-browser: {len(results) - failed} of {len(results)} pages ok, "
          f"{sum(r.math for r in results)} math elements rendered, {time.perf_counter() - started:.0f} s"
          + (f"; screenshots in {args.screenshots}" if args.screenshots else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
