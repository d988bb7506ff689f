"""Context-level samples: small runs that keep a context's facts together.

Facts from one table share their evidence, so a sample draws whole contexts
(as the authors drew their development sample) until it holds about the
requested number of facts. The draw depends only on the seed and the
context ids, so the same sample comes back on every machine.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from fhs.data.facts import Fact, iter_contexts


def _key(seed: int, context_id: str) -> str:
    return hashlib.sha256(f"{seed}:{context_id}".encode()).hexdigest()


def sample_by_context(facts: Sequence[Fact], target_facts: int | None, seed: int = 0) -> list[Fact]:
    """About ``target_facts`` facts from whole contexts, in the dataset's original order.

    Contexts are taken in a seeded pseudo-random order until the target is
    reached, skipping any context, the first included, that would overshoot it
    by more than half: a clinical note can hold dozens of mentions and an
    iXBRL table dozens of facts, and a small sample must not become one of
    them. When no context is small enough the smallest one is the sample.
    ``None`` or a target at least the dataset's size returns everything.
    """
    if target_facts is None or target_facts >= len(facts):
        return list(facts)
    groups = dict(iter_contexts(facts))
    order = sorted(groups, key=lambda c: _key(seed, c))
    chosen: set[str] = set()
    total = 0
    for context_id in order:
        if total >= target_facts:
            break
        size = len(groups[context_id])
        if total + size > 1.5 * target_facts:
            continue
        chosen.add(context_id)
        total += size
    if not chosen:
        chosen.add(min(order, key=lambda c: len(groups[c])))
    return [fact for fact in facts if fact.context_id in chosen]
