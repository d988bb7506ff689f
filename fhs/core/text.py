"""The one tokenizer shared by the index, the queries, the label renderer and Eq. 6.

Taxonomy labels are written both as camel case (``AssetsHeldForSale``) and as
words (``assets held for sale``); a query should match either. So the token
list holds the tokens of the original string followed by the tokens of its
camel-case split, which means every plain word appears twice. BM25 term
frequencies double accordingly; we keep that to reproduce the paper's scores.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

STOPWORDS = frozenset(
    """a an and are as at be been being but by for if in into is it its of on or that the
    their then there these this to was were which with""".split()
)

_ALNUM = re.compile(r"[A-Za-z0-9]+")
_LOWER_TO_UPPER = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_UPPER_RUN_END = re.compile(r"(?<=[A-Z])(?=[A-Z][a-z])")


def camel_split(text: str) -> str:
    """``AssetsHeldForSale`` -> ``Assets Held For Sale``; ``EPSBasic`` -> ``EPS Basic``."""
    return _UPPER_RUN_END.sub(" ", _LOWER_TO_UPPER.sub(" ", text))


# Indexing a taxonomy repeats the same words millions of times, so the rule is memoised. The
# memo is kept small: 8,192 words answer nearly every lookup of tokenizing both bundled
# taxonomies, as a far larger memo did, at the same speed; the larger memo kept every
# rare word of every fact a long run had read (dev/bench_memory.py).
@lru_cache(maxsize=1 << 13)
def normalize_token(token: str) -> str | None:
    """Lowercase, apply the light plural rule, then drop stopwords (in that order).

    The stopword check comes after the plural rule, so ``this`` becomes ``thi``
    and survives, exactly as in the authors' tokenizer.
    """
    token = token.lower()
    if len(token) > 4 and token.endswith("ies"):
        token = token[:-3] + "y"
    elif len(token) > 3 and token.endswith("s") and not token.endswith("ss"):
        token = token[:-1]
    return None if token in STOPWORDS else token


def tokenize(text: str) -> list[str]:
    """Tokens of ``text`` and of its camel-case split, normalised, in order."""
    raw = _ALNUM.findall(text)
    raw += _ALNUM.findall(camel_split(text))
    return [token for token in map(normalize_token, raw) if token is not None]


@lru_cache(maxsize=1 << 13)
def _word_tokens(word: str) -> tuple[str, ...]:
    """The normalised tokens of one alphanumeric run: the run itself, then its camel-case parts."""
    return tuple(
        token for token in map(normalize_token, [word, *_ALNUM.findall(camel_split(word))]) if token is not None
    )


def token_set(text: str) -> frozenset[str]:
    """The distinct tokens of ``text``: what a BM25 query and Eq. 6 actually use.

    ``frozenset(tokenize(text))``, computed once per distinct word: a camel-case boundary lies
    between two letters or digits of one run, so splitting each run alone gives the same parts
    as splitting the whole text, and a query (a whole table's context) repeats its words."""
    out: set[str] = set()
    for word in set(_ALNUM.findall(text)):
        out.update(_word_tokens(word))
    return frozenset(out)


def join_tokens(parts: Iterable[str]) -> str:
    """Tokenize each part and join the tokens with spaces (the label-style renderer)."""
    return " ".join(token for part in parts for token in tokenize(part))
