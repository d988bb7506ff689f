"""One way to spell a concept id, used for taxonomy ids and gold ids alike.

A user's files spell the same concept in several ways: ``us-gaap:Revenues``,
``us-gaap_Revenues`` and ``Revenues``; ``s22.49xa`` and ``S2249XA``. The
built-in loaders already write the bare element name and the dotted upper-case
ICD-10-CM code; a concept file and its gold ids are brought to the same form
here, so a gold id is never a silent miss because of its spelling.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Sequence

from fhs.core.errors import InputError, warn
from fhs.data.facts import Fact, gold_match_of
from fhs.data.taxonomies.icd10cm import normalize_icd_code
from fhs.data.taxonomy import Taxonomy

# Namespace prefixes that XBRL filings put before an element name (``us-gaap:Revenues``).
_XBRL_PREFIX = re.compile(r"^(?:us-gaap|ifrs-full|ifrs|srt|dei)[:_]", re.IGNORECASE)
_ICD_SHAPE = re.compile(r"[A-Za-z][0-9][0-9A-Za-z]\.?[0-9A-Za-z]{0,4}")

ID_KINDS = ("xbrl", "icd")


def id_kind(ids: Iterable[str]) -> str:
    """``icd`` when (nearly) every id is shaped like an ICD-10 code, else ``xbrl`` (element names)."""
    ids = [i.strip() for i in ids if i and i.strip()]
    shaped = sum(bool(_ICD_SHAPE.fullmatch(i)) for i in ids)
    return "icd" if ids and shaped >= 0.9 * len(ids) else "xbrl"


def _xbrl(raw: str) -> str:
    return _XBRL_PREFIX.sub("", " ".join(str(raw).split()), count=1)


def _icd(raw: str) -> str:
    try:
        return normalize_icd_code(raw)
    except InputError:
        return " ".join(str(raw).split()).upper()


def normalizer(kind: str) -> Callable[[str], str]:
    """The id normaliser of one taxonomy kind (``ID_KINDS``)."""
    return {"xbrl": _xbrl, "icd": _icd}[kind]


def align_gold(facts: Sequence[Fact], taxonomy: Taxonomy) -> list[Fact]:
    """Facts whose gold ids are spelled as the taxonomy spells them (exact ids are kept as they are)."""
    normalize = normalizer(id_kind(c.id for c in taxonomy))

    def spell(raw: str) -> str:  # a prefix alone ("us-gaap:") stays as written: never an empty id
        return raw if raw in taxonomy else (normalize(raw) or raw)

    return [
        f if all(g in taxonomy for g in f.gold) else dataclasses.replace(f, gold=tuple(map(spell, f.gold)))
        for f in facts
    ]


def gold_known(gold_id: str, taxonomy: Taxonomy, match: str = "exact") -> bool:
    """Whether a gold id can be hit at all: it is a taxonomy id, or (``prefix``) some id starts with it."""
    return gold_id in taxonomy or (match == "prefix" and bool(gold_id) and bool(taxonomy.under(gold_id)))


def unknown_gold(facts: Iterable[Fact], taxonomy: Taxonomy) -> list[str]:
    """Distinct gold ids that are not in the taxonomy (each one is a certain miss), in first-seen order.

    A fact whose gold-match rule is ``prefix`` knows a gold id when any taxonomy id starts with it.
    """
    return list(dict.fromkeys(g for f in facts for g in f.gold if not gold_known(g, taxonomy, gold_match_of(f))))


def check_gold(facts: Sequence[Fact], taxonomy: Taxonomy, where: str) -> list[str]:
    """Warn about unknown gold ids; an InputError when not a single gold id is known."""
    unknown = unknown_gold(facts, taxonomy)
    if not unknown:
        return unknown
    known = [g for f in facts for g in f.gold if gold_known(g, taxonomy, gold_match_of(f))]
    examples = ", ".join(repr(g) for g in unknown[:3])
    if not known:
        raise InputError(
            f"none of the gold ids is in taxonomy {taxonomy.name!r} (e.g. {examples})",
            path=where,
            field="gold",
            fix="gold ids must be taxonomy ids such as " + ", ".join(repr(c.id) for c in list(taxonomy)[:2]),
        )
    warn(
        f"{where}: {len(unknown)} gold id(s) are not in taxonomy {taxonomy.name!r} and always count as misses "
        f"(e.g. {examples})"
    )
    return unknown
