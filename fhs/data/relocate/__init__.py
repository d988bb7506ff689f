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
``fhs.run.relocation.LLMRelocator`` (one greedy model call per mention, as in
the paper; it lives with the method because it calls a model).
``relocate_cached`` (``cache.py``) keeps their results on disk so a rebuild
never pays twice. Import each name from its module; this package file only
describes them.
"""
