"""fhs.paper is the one place for the paper's numbers: the regression files must agree with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fhs.book.check import REGRESSIONS_DIR, load_regression
from fhs.paper import lookup, paper_value, relocation_rate

REGRESSION_FILES = sorted(Path(REGRESSIONS_DIR).glob("*.yaml"))


def paper_number(metric: str) -> float | None:
    """What fhs/paper.py says for a regression metric name such as ``fincl/direct/recall@1``."""
    parts = metric.split("/")
    if parts[0] == "codiesp" and parts[1].startswith("relocation"):
        return relocation_rate()
    if len(parts) == 2 and parts[1] == "facts":
        return paper_value(parts[0], "direct", "facts")
    if len(parts) == 3:  # "oracle-exact": the oracle on the exactly relocated facts, the paper's probe set
        return paper_value(parts[0], parts[1].removesuffix("-exact"), parts[2])
    return None


def paper_entries():
    """Each metric's paper value as the loader resolves its reference (the row it names must fit the metric)."""
    for path in REGRESSION_FILES:
        for name, metric in load_regression(path.stem).metrics.items():
            if metric.paper is not None:
                yield pytest.param(name, metric, id=f"{path.stem}:{name}")


def test_there_are_regression_files():
    assert REGRESSION_FILES


@pytest.mark.parametrize("metric, recorded", list(paper_entries()))
def test_regression_paper_values_match_fhs_paper(metric, recorded):
    expected = paper_number(metric)
    if expected is None and recorded.paper_note:  # a different row on purpose (chapter 9: the paper's
        expected = lookup(recorded.paper_reference)  # FHS beside an oracle), which its note must say
    recorded = recorded.paper
    assert expected is not None, f"{metric}: the regression file quotes a paper value fhs/paper.py does not hold"
    assert recorded == pytest.approx(expected, abs=5e-5), (
        f"{metric}: regression file says {recorded}, fhs/paper.py says {expected}")
