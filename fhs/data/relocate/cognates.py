"""How a Spanish word is recognised in English: cognate keys, spelling rules, a lexicon.

No model and no dictionary download: Spanish and English clinical words are
mostly Greek or Latin cognates (``hipertrofia``/``hypertrophy``), so a few
spelling rules and an edit-distance threshold find them; the hand-written
lexicon in ``fhs.data.relocate.lexicon`` covers the frequent words that are not
cognates (``dolor``/``pain``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from fhs.data.relocate.lexicon import LEXICON, SPANISH_STOPWORDS
from fhs.data.relocate.sentences import strip_accents

_WORD_RE = re.compile(r"[^\W_]+")
_ROMAN = {"ii": "2", "iii": "3", "iv": "4", "vi": "6", "vii": "7", "viii": "8", "ix": "9"}

# Spanish -> English spelling rules, tried on the end of a (singular) Spanish word.
_SUFFIX_RULES = (
    ("ccion", "ction"),
    ("cion", "tion"),
    ("sion", "sion"),
    ("dad", "ty"),
    ("tad", "ty"),
    ("oso", "ous"),
    ("osa", "ous"),
    ("ico", "ical"),
    ("ica", "ical"),
    ("ia", "y"),
    ("ario", "ary"),
    ("aria", "ary"),
    ("ar", "ary"),
    ("ivo", "ive"),
    ("iva", "ive"),
    ("mento", "ment"),
    ("ado", "ed"),
    ("ada", "ed"),
    ("ado", "ated"),
    ("ada", "ated"),
    ("ido", "ed"),
    ("ida", "ed"),
    ("o", "um"),
    ("o", "us"),
    ("on", "um"),
    ("encia", "ence"),
    ("ancia", "ance"),
    ("eo", "eal"),
    ("ea", "eal"),
    ("al", ""),
)
# Spanish spellings inside a word: hepatoesplenomegalia -> hepatosplenomegaly.
_INFIX_RULES = (("oesp", "osp"), ("oest", "ost"), ("oesc", "osc"), ("linf", "lymph"), ("inm", "imm"))
# Spanish -> English spelling rules at the start of a word.
_PREFIX_RULES = (("neu", "pneu"), ("sic", "psych"), ("eso", "oeso"))
# Spelling differences neither language marks consistently; applied to both sides.
_KEY_RULES = (
    ("ph", "f"),
    ("th", "t"),
    ("rh", "r"),
    ("ch", "c"),
    ("qu", "c"),
    ("k", "c"),
    ("y", "i"),
    ("ae", "e"),
    ("oe", "e"),
    ("z", "s"),
)


def words(text: str) -> list[tuple[int, int, str]]:
    """Alphanumeric runs with their offsets; a hyphen or an apostrophe separates words."""
    return [(match.start(), match.end(), match.group()) for match in _WORD_RE.finditer(text)]


@lru_cache(maxsize=200_000)
def cognate_key(word: str) -> str:
    """A spelling key under which a Spanish word and its English cognate tend to coincide.

    Lower case, no accents, Greek and Latin spellings merged (``ph``/``f``,
    ``y``/``i``, ...), doubled letters collapsed and final vowels dropped:
    ``hipertrofia`` and ``hypertrophy`` both become ``hipertrof``.
    """
    key = strip_accents(word.lower())
    for old, new in _KEY_RULES:
        key = key.replace(old, new)
    key = re.sub(r"(.)\1+", r"\1", key)
    stripped = key.rstrip("aeiou")
    return stripped if len(stripped) >= 2 else key


def _spanish_singular(word: str) -> str:
    if len(word) > 4 and word.endswith("es") and word[-3] in "lnrdzj":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("is", "us")):
        return word[:-1]
    return word


@lru_cache(maxsize=100_000)
def spanish_keys(word: str) -> frozenset[str]:
    """Cognate keys of the English forms a Spanish word may take."""
    base = strip_accents(word.lower())
    singular = _spanish_singular(base)
    forms = {base, singular}
    for old, new in _SUFFIX_RULES:
        if singular.endswith(old) and len(singular) > len(old) + 2:
            forms.add(singular[: -len(old)] + new)
    for form in list(forms):
        if re.match(r"es[bcdfgjklmnpqstvz]", form):  # estenosis -> stenosis
            forms.add(form[1:])
        for old, new in _PREFIX_RULES:
            if form.startswith(old):
                forms.add(new + form[len(old) :])
        for old, new in _INFIX_RULES:
            if old in form:
                forms.add(form.replace(old, new))
    return frozenset(cognate_key(form) for form in forms if form)


def _english_base(word: str) -> str:
    word = word.lower()
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 4 and word.endswith("es") and word[-3] in "sxz":
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "is", "us")):
        return word[:-1]
    return word


@lru_cache(maxsize=200_000)
def english_keys(word: str) -> frozenset[str]:
    """Cognate keys of an English word: as written, singular, and without -ed/-us/-um/-is."""
    base = _english_base(word)
    forms = {word.lower(), base}
    for suffix in ("ed", "us", "um", "is"):
        if base.endswith(suffix) and len(base) > len(suffix) + 3:
            forms.add(base[: -len(suffix)])
    return frozenset(cognate_key(form) for form in forms)


def _edit_distance(a: str, b: str) -> int:
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, start=1):
        current = [i]
        for j, char_b in enumerate(b, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


@dataclass(frozen=True)
class MatchConfig:
    """Thresholds of the cognate matcher (tuned by eye on the train and dev splits).

    ``min_similarity``: 1 - edit distance / longer key, for keys of ``min_key`` or
    more characters; shorter keys must be equal. ``same_prefix``: that many
    leading characters of the two keys must agree, which keeps ``hiper-`` and
    ``hipo-`` apart.
    """

    min_similarity: float = 0.7
    min_key: int = 4
    same_prefix: int = 4


def _key_similarity(a: str, b: str, config: MatchConfig) -> float:
    if a == b:
        return 1.0
    if min(len(a), len(b)) < config.min_key or a[: config.same_prefix] != b[: config.same_prefix]:
        return 0.0
    similarity = 1.0 - _edit_distance(a, b) / max(len(a), len(b))
    return similarity if similarity >= config.min_similarity else 0.0


@lru_cache(maxsize=100_000)
def lexicon_forms(word: str) -> tuple[str, ...]:
    """The forms a Spanish word is looked up under: as written, without accents, singular, masculine."""
    base = strip_accents(word.lower())
    forms: dict[str, None] = {}
    for form in dict.fromkeys((word.lower(), base, _spanish_singular(base))):
        forms[form] = None
        if form.endswith("a"):
            forms[form[:-1] + "o"] = None
        if form.endswith("as"):
            forms[form[:-2] + "os"] = None
    return tuple(forms)


@lru_cache(maxsize=100_000)
def lexicon_translations(word: str) -> frozenset[str]:
    """English renderings of a Spanish word, trying it as written, singular and masculine."""
    found: set[str] = set()
    for variant in lexicon_forms(word):
        found |= _LEXICON_ENGLISH.get(variant, frozenset())
    return frozenset(found)


def english_table(entries: Mapping[str, Iterable[str]]) -> dict[str, frozenset[str]]:
    """A lexicon (Spanish key -> English words) keyed and valued as ``lexicon_translations`` looks them up."""
    table: dict[str, frozenset[str]] = {}
    for spanish, values in entries.items():
        english = frozenset(_english_base(value) for value in values)
        for key in (spanish.lower(), strip_accents(spanish.lower())):
            table[key] = table.get(key, frozenset()) | english
    return table


def table_match(table: Mapping[str, frozenset[str]], spanish: str, english: str) -> bool:
    """Whether ``english`` renders ``spanish`` according to an extra lexicon ``english_table``."""
    found: set[str] = set()
    for variant in lexicon_forms(spanish):
        found |= table.get(variant, frozenset())
    return bool(found) and (_english_base(english) in found or english.lower() in found)


_LEXICON_ENGLISH: dict[str, frozenset[str]] = {
    strip_accents(spanish): frozenset(_english_base(english) for english in values)
    for spanish, values in LEXICON.items()
}
_LEXICON_ENGLISH.update(
    {spanish: frozenset(_english_base(english) for english in values) for spanish, values in LEXICON.items()}
)


@lru_cache(maxsize=500_000)
def word_match(spanish: str, english: str, config: MatchConfig = MatchConfig()) -> float:
    """How surely the English word renders the Spanish one: 1.0 for the lexicon or an equal
    key, the cognate similarity otherwise, 0.0 for no match."""
    spanish_low, english_low = spanish.lower(), english.lower()
    if spanish_low.isdigit() or english_low.isdigit() or spanish_low in _ROMAN or english_low in _ROMAN:
        return 1.0 if _ROMAN.get(spanish_low, spanish_low) == _ROMAN.get(english_low, english_low) else 0.0
    translations = lexicon_translations(spanish)
    if translations and (_english_base(english) in translations or english_low in translations):
        return 1.0
    best = 0.0
    for key_es in spanish_keys(spanish):
        for key_en in english_keys(english):
            best = max(best, _key_similarity(key_es, key_en, config))
            if best == 1.0:
                return best
    return best


def content_words(mention: str) -> list[str]:
    """The words of a Spanish mention that need an English counterpart."""
    return [word for _, _, word in words(mention) if word.lower() not in SPANISH_STOPWORDS]
