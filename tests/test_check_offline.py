"""fhs.book.offline: a built book must load nothing from the network."""

from __future__ import annotations

import pytest

from fhs.book import offline as offline_module


@pytest.fixture(scope="module")
def offline():
    return offline_module


@pytest.mark.parametrize("markup", [
    '<script src="https://cdn.jsdelivr.net/npm/mathjax@3/es5/tex-chtml.js"></script>',
    '<script src="//unpkg.com/thebe"></script>',
    '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Lato">',
    '<link rel="preconnect" href="https://fonts.gstatic.com">',
    '<img src="http://example.org/x.png">',
    '<img srcset="local.png 1x, https://example.org/x2.png 2x">',
    '<iframe src="https://www.youtube.com/embed/x"></iframe>',
    '<script>const THEBE_JS_URL = "https://unpkg.com/thebe@0.8.2/lib/index.js"</script>',
    '<style>@import url("https://fonts.googleapis.com/css2?family=Inter");</style>',
    '<div style="background: url(https://example.org/bg.png)"></div>',
])
def test_loads_from_the_network_are_reported(offline, markup):
    problems, _, _ = offline.scan_html(f"<html><head>{markup}</head><body></body></html>")
    assert len(problems) == 1, problems


def test_local_resources_and_plain_links_are_fine(offline):
    page = """<html><head>
      <script src="../_static/mathjax/tex-chtml.js"></script>
      <link rel="stylesheet" href="../_static/styles/theme.css">
      <script>var togglebuttonSelector = '.toggle';</script>
    </head><body>
      <a href="https://github.com/The-FinAI/FinTagging">FinTagging</a>
      <pre>http://localhost:8000/v1</pre>
      <span class="math notranslate">\\(x\\)</span>
    </body></html>"""
    problems, scripts, has_math = offline.scan_html(page)
    assert problems == []
    assert scripts == ["../_static/mathjax/tex-chtml.js"]
    assert has_math


def test_css_imports_and_urls(offline):
    css = "@import 'https://x.org/a.css'; .a{background:url(../img/b.png)} .b{src:url(//c.org/f.woff)}"
    assert offline.scan_css(css) == ["CSS loads https://x.org/a.css", "CSS loads //c.org/f.woff"]


def test_tree_requires_local_mathjax_on_pages_with_math(offline, tmp_path):
    (tmp_path / "_static" / "mathjax").mkdir(parents=True)
    page = tmp_path / "page.html"
    page.write_text('<html><head><script src="_static/mathjax/tex-chtml.js"></script></head>'
                    '<body><span class="math">x</span></body></html>')
    assert offline.check_tree(tmp_path) == [
        f"{page}: MathJax _static/mathjax/tex-chtml.js is not a file of the book"]
    (tmp_path / "_static" / "mathjax" / "tex-chtml.js").write_text("")
    assert offline.check_tree(tmp_path) == []
    page.write_text('<html><body><span class="math">x</span></body></html>')
    assert offline.check_tree(tmp_path) == [f"{page}: has math but loads no MathJax"]


def test_main_exit_status(offline, tmp_path, capsys):
    (tmp_path / "index.html").write_text("<html><body>ok</body></html>")
    assert offline.main([str(tmp_path)]) == 0
    (tmp_path / "bad.html").write_text('<script src="https://cdn.x.org/a.js"></script>')
    assert offline.main([str(tmp_path)]) == 1
    assert "1 network load(s)" in capsys.readouterr().err
    assert offline.main([str(tmp_path / "missing")]) == 1
