"""Summary figures of a set of located facts (the book's dataset tables)."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable

from fhs.data.facts import Fact


def dataset_stats(facts: Iterable[Fact]) -> dict:
    """Facts, contexts, modality split, facts per table context, distinct gold concepts.

    ``facts_per_table_context`` counts facts per context among table contexts
    only, the paper's "about 21 facts per table".
    """
    facts = list(facts)
    by_modality = Counter(fact.modality for fact in facts)
    contexts_by_modality = {m: len({f.context_id for f in facts if f.modality == m}) for m in by_modality}
    per_table = list(Counter(f.context_id for f in facts if f.modality == "table").values())
    return {
        "n_facts": len(facts),
        "n_contexts": len({fact.context_id for fact in facts}),
        "facts_by_modality": dict(sorted(by_modality.items())),
        "contexts_by_modality": dict(sorted(contexts_by_modality.items())),
        "facts_per_table_context": {
            "mean": statistics.fmean(per_table) if per_table else 0.0,
            "median": float(statistics.median(per_table)) if per_table else 0.0,
        },
        "n_gold_concepts": len({gold for fact in facts for gold in fact.gold}),
    }
