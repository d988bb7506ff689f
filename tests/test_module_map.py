"""CONTRIBUTING.md's module map names every module of fhs/, and its map of the paper names real functions."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONTRIBUTING = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
CHECKOUT = {"scripts", "dev", "notebooks", "tests"}  # the checkout's folders a map line may mention beside a module


def section(title: str) -> str:
    start = CONTRIBUTING.index(f"## {title}\n")
    end = CONTRIBUTING.find("\n## ", start + 1)
    return CONTRIBUTING[start:end if end > 0 else None]


def module_map() -> dict[str, set[str]]:
    """Each layer's folder (``fhs/run``) -> the module paths its block names, from that folder (``tables/x.py``)."""
    block = section("The module map").split("```")[1]
    named: dict[str, set[str]] = {}
    layer = None
    for line in block.splitlines():
        heading = re.match(r"(fhs/\w+)/ ", line)
        if heading:
            layer = heading.group(1)
        elif re.match(r"\S", line):
            layer = None
        if layer is not None:
            named.setdefault(layer, set()).update(name for name in re.findall(r"(?<![\w/.])([\w/]+\.py)\b", line)
                                                  if name.split("/")[0] not in CHECKOUT)
    return named


def modules() -> list[tuple[str, str]]:
    """(layer folder, module path from it) for every module of fhs/ but the packages' __init__.py."""
    found = []
    for path in sorted((ROOT / "fhs").rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if path.name == "__init__.py" or len(parts) < 3:
            continue
        found.append(("/".join(parts[:2]), "/".join(parts[2:])))
    return found


def reader_names() -> list[str]:
    return re.findall(r"`(fhs(?:\.\w+)+)`", section("Reading the paper in the code"))


def test_the_module_map_names_every_module():
    named = module_map()
    missing = [f"{layer}/{module}" for layer, module in modules() if module not in named.get(layer, set())]
    assert not missing, "not in CONTRIBUTING.md's module map: " + ", ".join(missing)


def test_the_module_map_names_no_module_that_is_gone():
    gone = [f"{layer}/{module}" for layer, names in module_map().items() for module in sorted(names)
            if not (ROOT / layer / module).is_file()]
    assert not gone, "CONTRIBUTING.md's module map names modules that are not there: " + ", ".join(gone)


def test_the_reader_map_covers_each_equation_and_the_method_sections():
    text = section("Reading the paper in the code")
    for part in ("Eq. 2", "Eq. 3", "Eq. 4", "Eq. 6", "Section 4.1", "Section 4.2", "Section 4.3", "Section 4.4",
                 "Section 4.5", "Appendix B.5", "Appendix C.1"):
        assert part in text, part


@pytest.mark.parametrize("name", reader_names())
def test_every_name_in_the_reader_map_imports(name):
    parts = name.split(".")
    for split in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:split]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[split:]:
            target = getattr(target, attribute)
        assert target is not None
        return
    pytest.fail(f"{name} does not import")
