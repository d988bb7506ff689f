"""Sentences a page owes its reader when a dataset's sample makes a number say less than it seems.

On the paper's datasets none of these fire; on an adapter's small dataset they do: an interval
clustered by context over one context has zero width, and a datatype group of 12 concepts
puts every gold concept inside the top 50 whatever the query. A page prints these under its
tables (``fhs.book.report.show_notes``) instead of leaving the reader to guess.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from fhs.data.facts import Fact
from fhs.data.taxonomy import Taxonomy


def interval_caveats(samples: Mapping[str, Sequence[Fact]]) -> list[str]:
    """A sentence for each dataset whose sample is one fact or one context (its intervals have zero width)."""
    out = []
    for name, facts in samples.items():
        contexts = len({fact.context_id for fact in facts})
        if not facts:
            out.append(f"`{name}` has no facts in this sample, so its rows are empty.")
        elif len(facts) == 1:
            out.append(
                f"`{name}` is one fact here: its interval is that fact's value, not an estimate of sampling error."
            )
        elif contexts == 1:
            out.append(
                f"`{name}` holds its {len(facts)} facts in one context (a table or passage): the "
                "context-clustered bootstrap resamples that one context, so its intervals have zero "
                "width and say nothing about sampling error."
            )
    return out


def depth_caveats(samples: Mapping[str, Sequence[Fact]], taxonomies: Mapping[str, Taxonomy]) -> list[str]:
    """A sentence for each dataset whose facts are searched among fewer than 200 concepts: a deep recall is
    1.0 by construction there (the datatype filter searches a fact's datatype group, or the whole taxonomy)."""
    out = []
    for name, facts in samples.items():
        taxonomy = taxonomies[name]
        groups = Counter(concept.datatype for concept in taxonomy)
        widest = max((groups.get(fact.datatype, 0) or len(taxonomy) for fact in facts), default=0)
        depths = [k for k in (50, 200) if widest <= k]
        if facts and depths:
            recall = " and ".join(f"Recall@{k}" for k in depths)
            out.append(
                f"`{name}`: a fact is searched among at most {widest} concepts (its datatype's, or the "
                f"whole taxonomy's), so {recall} count every reachable gold concept as found: they "
                "are 1.0 by construction, not a finding."
            )
    return out
