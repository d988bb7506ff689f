"""A chapter's sampled model tables: in their sections where the sample carries them, one folded block where not.

Under a profile whose model runs in process on the CPU (``smoke``, ``cpu``; see
``fhs.book.chapters.main_lead.protocol_run``) an LLM chapter's tables rest on a handful of facts.
The page then leads with what the profile does establish (the paper's table with ours on one row)
and gathers the other sampled tables, as its cells compute them, into one collapsed block
(``fhs.book.fold``) under a line saying what ran. The cells keep their order, so every run and
every recorded value is computed as before; only where a table is shown changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import pandas as pd

from fhs.book.fold import show_folded
from fhs.book.report import show, show_notes
from fhs.book.study import Run
from fhs.run.summary import record_cost


class Sampled:
    """The page's sampled tables: shown where they are computed, or kept for one folded block."""

    def __init__(self, protocol: bool) -> None:
        self.protocol = protocol
        self.tables: list[tuple[pd.DataFrame, str]] = []
        self.notes: list[str] = []

    def show(self, frame: pd.DataFrame, caption: str) -> None:
        """The table in its section, or kept for :meth:`fold` under a protocol run."""
        if self.protocol:
            self.tables.append((frame, caption))
        else:
            show(frame, caption=caption)

    def say(self, line: str) -> None:
        """A printed line of a section: printed in place, or a note of the folded block."""
        if self.protocol:
            self.notes.append(line)
        else:
            print(line)

    def lead(self, tables: Sequence[str]) -> None:
        """Under a protocol run, the sentence under the lead naming the tables that fold (:func:`lead_line`)."""
        if self.protocol:
            show_notes([lead_line(tables)])

    def fold(self, summary: str) -> None:
        """Under a protocol run, every kept table in one collapsed block; otherwise nothing (they were shown)."""
        if self.protocol:
            show_folded(summary, self.tables, self.notes)


def ran_line(runs: Iterable[Run], what: str) -> str:
    """The folded block's one line: what ran end to end on how many facts, with its calls, tokens and model
    time as recorded when the calls were made (a run read twice counts once)."""
    distinct = {str(run.path): run for run in runs}.values()
    facts = max((len(run.summaries) for run in distinct), default=0)
    costs = [record_cost(fact) for run in distinct for fact in run.summaries]
    calls = sum(cost["calls"] for cost in costs)
    tokens = sum(cost["tokens_in"] + cost["tokens_out"] for cost in costs)
    seconds = sum(cost.get("recorded_seconds", cost.get("model_seconds", 0.0)) for cost in costs)
    counted = f"{len(distinct)} run" + ("s" if len(distinct) != 1 else "")
    return (
        f"{what} ran end to end on {facts} facts per run ({counted}): {calls:,} model calls, "
        f"{tokens:,} tokens, {seconds / 60:.1f} min of model time when first made. Too few facts to judge "
        "the paper's comparisons; open for every table."
    )


def lead_line(tables: Sequence[str] = ()) -> str:
    """The sentence under a protocol run's lead that says where the page's other tables went."""
    named = f" ({', '.join(tables)})" if tables else ""
    return (
        f"The page's other tables{named} ran on this profile's few facts and sit in one folded block at the "
        "end of the page; the paper and gpu-sample profiles show them in their sections."
    )
