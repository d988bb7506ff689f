"""Fact datatypes against the taxonomy's: a datatype no concept has switches the datatype filter off.

The retrievers search only the concepts of a fact's datatype when the taxonomy has that
datatype, and the whole taxonomy otherwise (``fhs/retrieval/bm25.py``). A datatype spelled
differently from the concepts' (``monetary`` for ``monetaryItemType``) therefore changes
the search without a word; this says so once per datatype, with the datatypes that exist.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from fhs.core.errors import warn
from fhs.data.facts import Fact

_WARNED: set[tuple[str, str, str]] = set()  # (where, taxonomy, datatype): said once per process


def unmatched_datatypes(facts: Iterable[Fact], taxonomy) -> Counter:
    """How many facts carry each datatype that no concept of ``taxonomy`` has (an empty datatype is no filter)."""
    existing = {concept.datatype for concept in taxonomy if concept.datatype}
    if not existing:  # a taxonomy without datatypes filters nothing, so nothing is switched off
        return Counter()
    return Counter(f.datatype for f in facts if f.datatype and f.datatype not in existing)


def check_datatypes(facts: Iterable[Fact], taxonomy, where: str) -> Counter:
    """Warn once per unmatched datatype: the count of its facts and the datatypes the concepts do have."""
    unmatched = unmatched_datatypes(facts, taxonomy)
    if not unmatched:
        return unmatched
    existing = Counter(concept.datatype for concept in taxonomy if concept.datatype)
    shown = ", ".join(name for name, _ in existing.most_common(8)) + (", …" if len(existing) > 8 else "")
    for datatype, count in sorted(unmatched.items()):
        key = (where, getattr(taxonomy, "name", ""), datatype)
        if key in _WARNED:
            continue
        _WARNED.add(key)
        warn(
            f"{where}: {count} fact(s) have datatype {datatype!r}, which no concept of taxonomy "
            f"{getattr(taxonomy, 'name', '')!r} has, so their search ignores datatypes; the concepts' "
            f"datatypes are {shown} (spell it as one of those, or leave it empty)"
        )
    return unmatched
