"""The deterministic relocator's bundled words: a Spanish -> English clinical lexicon, function words.

The lexicon's entries live in ``lexicon.txt`` beside this module (its header
says how they were written), in the format of a user's lexicon file
(``fhs.data.relocate.user_lexicon``), so the bundled words and an adapter's
are read by one reader.
"""

from __future__ import annotations

from pathlib import Path

from fhs.data.relocate.user_lexicon import read_lexicon_file

LEXICON_FILE = Path(__file__).resolve().parent / "lexicon.txt"  # one "spanish: english ..." entry per line
LEXICON: dict[str, frozenset[str]] = read_lexicon_file(LEXICON_FILE)

# Function words a Spanish mention may contain; they need no English counterpart.
SPANISH_STOPWORDS = frozenset(
    """a al con de del e el en la las lo los o para por que se su sus u un una unas unos y
    entre sobre tras desde hasta hacia como""".split()
)

# English function words: a relocated span never starts or ends with one.
ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be by for from in into is it its of on or the their this that to
    was were which with his her he she""".split()
)

# Words a mention may carry that a translation often leaves out without changing the
# diagnosis, each with the words that must then be present: "hipertensión arterial" is
# "hypertension" and "en tratamiento con hemodiálisis" is "on hemodialysis".
OPTIONAL_WORDS: dict[str, frozenset[str]] = {
    "arterial": frozenset({"hipertension", "hipotension"}),
    "personales": frozenset({"antecedentes"}),
    "personal": frozenset({"antecedente"}),
    "tratamiento": frozenset(),
    "cuadro": frozenset(),
    "habito": frozenset({"tabaquico", "enolico", "alcoholico"}),
}
