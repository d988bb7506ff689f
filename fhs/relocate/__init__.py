"""Relocating a Spanish CodiEsp mention into the English machine translation.

CodiEsp annotates diagnoses on the Spanish text; the method reads English.
Relocation runs in three steps:

1. ``split_spanish_sentences`` cuts the Spanish document into sentences by rule
   and ``align_document`` pairs them with the English lines (the translation
   has one sentence per line) - ``sentences.py``, ``align.py``.
2. ``AlignedDocument.task`` finds the sentence(s) a mention's offsets fall in
   and takes the aligned English line(s) as the candidate text, or the whole
   English document when there is no alignment (``scope`` records which) -
   ``tasks.py``.
3. A ``Relocator`` proposes the English phrase that matches the Spanish
   mention. It is accepted only if it is an exact substring of the
   whitespace-normalised candidate (``accept_span``), so a relocated value is
   always text a reader of the English document sees.

Two relocators share that interface: ``DeterministicRelocator`` (cognates, a
small hand-written lexicon and character similarity; no model) and
``LLMRelocator`` (one greedy model call per mention, as in the paper).
``relocate_cached`` keeps their results on disk so a rebuild never pays twice.
"""

from fhs.relocate.align import AlignConfig, Alignment, align_document
from fhs.relocate.cache import (
    cache_dir,
    read_relocation_cache,
    relocate_cached,
    relocation_cache_path,
    write_relocation_cache,
)
from fhs.relocate.cognates import MatchConfig, content_words, word_match, words
from fhs.relocate.deterministic import DeterministicConfig, DeterministicRelocator
from fhs.relocate.llm import (
    RELOCATE_SCHEMA,
    LLMRelocator,
    load_prompt,
    parse_relocation_answer,
)
from fhs.relocate.sentences import (
    Segment,
    english_lines,
    is_paragraph_line,
    normalize_whitespace,
    split_spanish_sentences,
    strip_accents,
)
from fhs.relocate.tasks import (
    METHODS,
    SCOPES,
    STATUSES,
    AlignedDocument,
    Relocation,
    RelocationTask,
    Relocator,
    accept_span,
)

__all__ = [
    "METHODS", "RELOCATE_SCHEMA", "SCOPES", "STATUSES", "AlignConfig", "AlignedDocument", "Alignment",
    "DeterministicConfig", "DeterministicRelocator", "LLMRelocator", "MatchConfig", "Relocation",
    "RelocationTask", "Relocator", "Segment", "accept_span", "align_document", "cache_dir",
    "content_words", "english_lines", "is_paragraph_line", "load_prompt",
    "normalize_whitespace", "parse_relocation_answer", "read_relocation_cache", "relocate_cached",
    "relocation_cache_path", "split_spanish_sentences", "strip_accents", "word_match", "words",
    "write_relocation_cache",
]
