"""Small helpers the chapters share: "ours vs paper" tables, the profile note, figure style.

Chapters stay thin: they compute results with ``fhs`` and hand
numbers to these helpers, so every chapter shows the paper's figure next to
ours in the same format, with the interval and the gap written the same way.
Intervals are computed elsewhere (the bootstrap lives with the metrics); this
module only lays them out.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

# ----------------------------------------------------------------------------- numbers


@dataclass(frozen=True)
class Estimate:
    """A point estimate with an optional interval (e.g. a 95% bootstrap percentile CI) and
    an optional std across seeded runs (the paper reports "mean of three runs ± std")."""

    value: float
    low: float | None = None
    high: float | None = None
    std: float | None = None

    def __post_init__(self) -> None:
        if (self.low is None) != (self.high is None):
            raise ValueError("an interval needs both ends (low and high) or neither")
        # a mean and its bootstrap's ends are summed in different orders: one context makes them equal but for
        # the last bit, which is not a contradiction
        slack = 1e-9 * max(1.0, abs(self.value))
        if self.low is not None and self.high is not None and not (self.low - slack <= self.value <= self.high + slack):
            raise ValueError(f"interval [{self.low}, {self.high}] does not contain {self.value}")


def as_estimate(value: Any) -> Estimate | None:
    """Accept a number, a ``(value, low, high)`` triple, or anything with value/low/high."""
    if value is None:
        return None
    if isinstance(value, Estimate):
        return value
    if all(hasattr(value, name) for name in ("value", "low", "high")):
        return Estimate(float(value.value), _opt(value.low), _opt(value.high), _opt(getattr(value, "std", None)))
    if isinstance(value, (tuple, list)):
        if len(value) != 3:
            raise ValueError(f"expected (value, low, high), got {value!r}")
        return Estimate(float(value[0]), _opt(value[1]), _opt(value[2]))
    return Estimate(float(value))


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def fmt_number(value: float | None, precision: int = 3, *, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return format(value, f"{'+' if signed else ''}.{precision}f")


def fmt_estimate(estimate: Estimate | None, precision: int = 3) -> str:
    """``0.257 ± 0.012 [0.231, 0.284]`` (value ± std across runs [interval]); parts that are absent are left out."""
    if estimate is None:
        return "–"
    text = fmt_number(estimate.value, precision)
    if estimate.std is not None:
        text += f" ± {fmt_number(estimate.std, precision)}"
    if estimate.low is not None:
        text += f" [{fmt_number(estimate.low, precision)}, {fmt_number(estimate.high, precision)}]"
    return text


# ----------------------------------------------------------------------------- tables


def ours_vs_paper(
    ours: Mapping[str, Any],
    paper: Mapping[str, float | None] | None = None,
    *,
    precision: int = 3,
    label: str = "metric",
) -> pd.DataFrame:
    """One row per metric: ours (with its interval), the paper's value, and the gap.

    ``ours`` maps a metric name to a number, a ``(value, low, high)`` triple or an
    :class:`Estimate`; ``paper`` maps the same names to the paper's figure (missing
    or ``None`` when the paper does not report one). ``inside`` says whether the
    paper's value falls inside our interval, which is the honest way to read a
    gap on a small sample. Rows keep the order of ``ours``.
    """
    paper = paper or {}
    rows = []
    for name, raw in ours.items():
        estimate = as_estimate(raw)
        reference = paper.get(name)
        gap = None if estimate is None or reference is None else estimate.value - reference
        inside: str = ""
        if estimate is not None and reference is not None and estimate.low is not None and estimate.high is not None:
            inside = "yes" if estimate.low <= reference <= estimate.high else "no"
        rows.append(
            {
                label: name,
                "ours": fmt_estimate(estimate, precision),
                "paper": fmt_number(reference, precision),
                "gap": "" if gap is None else fmt_number(gap, precision, signed=True),
                "paper in CI": inside,
            }
        )
    frame = pd.DataFrame(rows, columns=[label, "ours", "paper", "gap", "paper in CI"])
    if not (frame["paper in CI"] != "").any():
        frame = frame.drop(columns="paper in CI")
    if all(paper.get(name) is None for name in ours):  # a dataset the paper never ran: no empty paper column
        frame = frame.drop(columns=["paper", "gap"])
    return frame


def format_cell(value: Any, precision: int = 3) -> Any:
    """How a table cell reads: intervals as ``v [lo, hi]``, floats to ``precision``, counts with commas."""
    if isinstance(value, Estimate):
        return fmt_estimate(value, precision)
    if isinstance(value, bool) or value is None:
        return "" if value is None else value
    if isinstance(value, int) or (hasattr(value, "dtype") and value.dtype.kind in "iu"):
        return f"{int(value):,}"
    if isinstance(value, float):
        return "" if math.isnan(value) else f"{value:.{precision}f}"
    return value


def formatted(frame: pd.DataFrame, precision: int = 3) -> pd.DataFrame:
    """A copy of ``frame`` with every cell formatted by ``format_cell``."""
    return frame.astype(object).map(lambda v: format_cell(v, precision))


def to_markdown(frame: pd.DataFrame) -> str:
    """A GitHub/MyST pipe table, without pandas' optional ``tabulate`` dependency."""
    frame = formatted(frame)
    columns = [str(c) for c in frame.columns]

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(c) for c in columns) + " |", "| " + " | ".join("---" for _ in columns) + " |"]
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(cell(v) for v in row) + " |")
    return "\n".join(lines)


def to_html(frame: pd.DataFrame, caption: str | None = None) -> str:
    """Plain HTML (no Styler, so no jinja2 at run time); the book theme styles it."""
    body = formatted(frame).to_html(index=False, escape=True, border=0, justify="left", classes="table fhs-table")
    if caption:
        body = body.replace(">", f"><caption>{html.escape(caption)}</caption>", 1)
    return body


class Table:
    """A frame that renders as HTML in a notebook and as Markdown in a terminal."""

    def __init__(self, frame: pd.DataFrame, caption: str | None = None) -> None:
        self.frame = frame
        self.caption = caption

    def _repr_html_(self) -> str:
        return to_html(self.frame, self.caption)

    def _repr_markdown_(self) -> str:
        text = to_markdown(self.frame)
        return f"{text}\n\n{self.caption}" if self.caption else text

    def __repr__(self) -> str:
        return self._repr_markdown_()


def show(frame: pd.DataFrame, caption: str | None = None) -> None:
    """Display ``frame``: HTML in the book, Markdown in a console.

    Returns nothing, so a ``show(...)`` as a cell's last line is displayed once.
    """
    if frame.empty:  # a table with no rows says so, in a sentence, instead of printing its headers alone
        show_notes([f"{caption or 'This table'}: no row applies to this page's datasets, so there is nothing to show."])
        return
    table = Table(frame, caption)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python: print the Markdown
        print(repr(table))
        return
    if get_ipython() is None:
        print(repr(table))
    else:
        display(table)


# ----------------------------------------------------------------------------- notes


def show_notes(sentences: Sequence[str]) -> None:
    """Sentences under a table (``fhs.book.caveats``): Markdown in the book, plain lines in a console."""
    if not sentences:
        return
    text = "\n".join(f"- {sentence}" for sentence in sentences) if len(sentences) > 1 else sentences[0]
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        print(text)
        return
    if get_ipython() is None:
        print(text)
    else:
        display(Markdown(text))


PROFILE_NOTES: dict[str, tuple[str, str]] = {
    # profile -> (admonition class, text); {model} is filled in
    "smoke": (
        "warning",
        "These numbers come from the <b>smoke</b> profile: a handful of facts and "
        "{model}, a 135M-parameter model. They prove the pipeline runs; they say nothing "
        "about the method.",
    ),
    "cpu": (
        "warning",
        "Numbers from the <b>cpu</b> profile are real but come from a tiny model "
        "({model}) on a small sample of facts where an LLM is involved, not from "
        "Qwen3-32B on the full test split. Read them next to the paper's figure, not "
        "instead of it; see <i>Reproducing on a GPU</i> to run the paper profile.",
    ),
    "paper": (
        "note",
        "Numbers from the <b>paper</b> profile: {model} at the paper's scale (the facts "
        "below), mean of the seeded runs. Run-to-run drift of the LLM is expected in the "
        "third decimal (see <i>Reproducing on a GPU</i>).",
    ),
    "gpu-sample": (
        "warning",
        "Numbers from the <b>gpu-sample</b> profile: {model} on a small sample of facts "
        "per dataset (below), sized to one night on one GPU; read the intervals, they are "
        "much wider than the paper's.",
    ),
    "paper-full": (
        "note",
        "Numbers from the <b>paper-full</b> profile: {model} on every fact of every test set, mean of the seeded runs.",
    ),
}
NO_MODEL_NOTE = (
    "note",
    "No language model is involved in these numbers: they are deterministic and "
    "the same under every profile, except where the <b>{profile}</b> profile "
    "limits the number of facts.",
)


class Html:
    """Minimal rich-display object (text/html plus a plain-text fallback)."""

    def __init__(self, markup: str, text: str) -> None:
        self.markup = markup
        self.text = text

    def _repr_html_(self) -> str:
        return self.markup

    def __repr__(self) -> str:
        return self.text


def configurations_line(configurations: Mapping[str, str], descriptions: Mapping[str, str]) -> str:
    """One sentence naming the FHS configuration behind each dataset's numbers."""
    parts = [
        f"{html.escape(dataset)}: <code>{html.escape(name)}</code>"
        + (f" ({html.escape(descriptions[name])})" if name in descriptions else "")
        for dataset, name in configurations.items()
    ]
    return "FHS configuration per dataset: " + "; ".join(parts) + "."


def size_line(facts: Mapping[str, int | str], seeds: Sequence[int] | None = None, llm: bool = True) -> str:
    """This page's size: facts per dataset (a count, or words such as "every located fact") and the
    seeded runs its means are taken over."""
    sent = "sent to the model" if llm else "evaluated"
    parts = ", ".join(
        f"{html.escape(name)} {n:,}" if isinstance(n, int) else f"{html.escape(name)}: {html.escape(n)}"
        for name, n in facts.items()
    )
    text = f"This page's facts {sent}: {parts}."
    if seeds:
        runs = len(seeds)
        text += f" Seeded runs: {runs} (seed{'s' if runs > 1 else ''} {', '.join(map(str, seeds))})" + (
            "; a mean is shown ± the std across them." if runs > 1 else "."
        )
    return text


def profile_note(
    profile: str,
    model: str | None = None,
    configurations: Mapping[str, str] | None = None,
    descriptions: Mapping[str, str] | None = None,
    *,
    facts: Mapping[str, int | str] | None = None,
    seeds: Sequence[int] | None = None,
) -> Html:
    """The admonition each chapter shows above its numbers, so no reader mistakes a
    tiny-model number for the paper's. ``model=None``: the numbers involve no LLM.
    ``configurations`` (dataset -> named FHS configuration) adds a line saying which
    configuration produced each dataset's numbers; ``descriptions`` explains the names.
    ``facts`` (dataset -> facts this page uses) and ``seeds`` (its seeded runs) state the
    page's size, so every page says how large the run behind it was."""
    if model is None:
        kind, text = NO_MODEL_NOTE
    else:
        kind, text = PROFILE_NOTES.get(profile, ("note", "Numbers from the <b>{profile}</b> profile ({model})."))
    body = text.format(model=html.escape(model or ""), profile=html.escape(profile))
    if facts:
        body += " " + size_line(facts, seeds, llm=model is not None)
    if configurations:
        body += " " + configurations_line(configurations, descriptions or {})
    title = "Where these numbers come from"
    markup = f'<div class="admonition {kind}"><p class="admonition-title">{title}</p><p>{body}</p></div>'
    plain = f"{title}: " + _strip_tags(body)
    return Html(markup, plain)


def _strip_tags(markup: str) -> str:
    import re

    return html.unescape(re.sub(r"<[^>]+>", "", markup))


# ----------------------------------------------------------------------------- figures

OURS_COLOR = "#1f6fb2"
PAPER_COLOR = "#d1495b"
ORACLE_COLOR = "#2a9d55"  # the gold-query probe: the ceiling a grounding method aims at
NEUTRAL_COLOR = "#7a7a7a"

STYLE: dict[str, Any] = {
    "figure.figsize": (6.4, 3.6),
    "figure.dpi": 110,
    "savefig.dpi": 150,
    "savefig.bbox": "tight",
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "legend.frameon": False,
}


def use_style() -> None:
    """Apply the book's figure style (one place, so every chapter's plots match)."""
    import matplotlib as mpl

    mpl.rcParams.update(STYLE)  # type: ignore[arg-type]  # the stubs list each key as a literal; matplotlib checks them


def plot_ours_vs_paper(
    ours: Mapping[str, Any],
    paper: Mapping[str, float | None] | None = None,
    *,
    ax=None,
    title: str | None = None,
    xlabel: str = "",
):
    """Dot-and-interval plot: ours (with CI bars) beside the paper's value, per metric."""
    import matplotlib.pyplot as plt

    paper = paper or {}
    names = list(ours)
    estimates = [as_estimate(ours[name]) for name in names]
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 0.45 * len(names) + 1.2))
    positions = list(range(len(names)))[::-1]
    for y, estimate in zip(positions, estimates):
        if estimate is None:
            continue
        if estimate.low is not None:
            ax.plot([estimate.low, estimate.high], [y, y], color=OURS_COLOR, lw=2, alpha=0.6)
        ax.plot(estimate.value, y, "o", color=OURS_COLOR)
    paper_points = [(y, paper.get(name)) for y, name in zip(positions, names)]
    paper_points = [(y, v) for y, v in paper_points if v is not None]
    if paper_points:
        ax.plot([v for _, v in paper_points], [y for y, _ in paper_points], "D", color=PAPER_COLOR, mfc="none", mew=1.5)
    ax.set_yticks(positions, names)
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="o", color=OURS_COLOR, label="ours (95% CI)")]
    if paper_points:
        handles.append(Line2D([], [], marker="D", ls="none", color=PAPER_COLOR, mfc="none", label="paper"))
    ax.legend(handles=handles, loc="best")
    if title:
        ax.set_title(title)
    return ax


def paper_values(names: Iterable[str], values: Sequence[float | None]) -> dict[str, float | None]:
    """Zip names with the paper's numbers, checking the lengths match (typos in tables)."""
    names = list(names)
    if len(names) != len(values):
        raise ValueError(f"{len(names)} names but {len(values)} paper values")
    return dict(zip(names, values))
