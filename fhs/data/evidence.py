"""How a located fact is written down for a query or a prompt.

Three forms: the direct serialization that the ``direct`` baseline issues as its
query, the located query of its ``direct-located`` variant (the value's own headers or
sentence instead of the whole context), and the evidence block that every LLM prompt shows. Every issued query
starts with ``<value> <datatype>`` (the paper's cell identifier), so methods
differ only in what they add to it. The evidence block puts the source context
before the value's own fields, so that prompts about facts of one table share it.
"""

from __future__ import annotations

from fhs.data.facts import Fact

CONTEXT_CHARS = 12_000


def prefix(fact: Fact) -> str:
    """The cell identifier every issued query starts with."""
    return f"{fact.value} {fact.datatype}".strip()


def prefixed(fact: Fact, text: str) -> str:
    """``<value> <datatype> <text>``; the direct serialization when ``text`` is empty."""
    text = " ".join(text.split())
    return f"{prefix(fact)} {text}" if text else direct_query(fact)


def clip_middle(text: str, limit: int = CONTEXT_CHARS) -> str:
    """Keep the head and tail halves of a long context around ``' ... '``."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]} ... {text[-half:]}"


def direct_query(fact: Fact, context_chars: int = CONTEXT_CHARS) -> str:
    """The raw serialized fact: ``<value> <datatype> <visible context>``."""
    return f"{prefix(fact)} {clip_middle(fact.context, context_chars)}".strip()


def location(fact: Fact) -> str:
    """Where the value sits: a table cell's row and column headers, a text mention's sentence ("" if unknown)."""
    parts = (fact.row_header, fact.column_header) if fact.modality == "table" else (fact.sentence,)
    return " ".join(" ".join(part.split()) for part in parts if part.strip())


def located_query(fact: Fact, context_chars: int = CONTEXT_CHARS) -> str:
    """``<value> <datatype> <headers or sentence>``: a query of the value's own location.

    The paper serialises the whole visible context (Section 3.3), so every cell of
    one table issues nearly the same query; this one tells them apart. A fact
    whose loader located neither headers nor sentence issues the direct query.
    """
    where = location(fact)
    return prefixed(fact, clip_middle(where, context_chars)) if where else direct_query(fact, context_chars)


def _same_text(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _field(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else clip_middle(text, limit)


ORDERS = ("shared-first", "evidence-first")


def context_lines(fact: Fact, context_chars: int = CONTEXT_CHARS) -> list[str]:
    """What every fact of one table or document shares: its input type and its source context."""
    return [f"Input type: {fact.modality}", f"Source context: {clip_middle(fact.context, context_chars)}"]


def located_lines(fact: Fact, field_chars: int | None = None) -> list[str]:
    """The located value's own fields: value, datatype, and where present its row, column and sentence.

    A text fact's sentence gets its own line only when it adds something: where
    the source context is the sentence itself (CodiEsp's context is the
    relocated English sentence), the line would repeat it word for word.
    """
    lines = [f"Value: {_field(fact.value, field_chars)}", f"Datatype: {_field(fact.datatype, field_chars)}"]
    if fact.row_header:
        lines.append(f"Row context: {_field(fact.row_header, field_chars)}")
    if fact.column_header:
        lines.append(f"Column context: {_field(fact.column_header, field_chars)}")
    if fact.sentence and fact.modality == "text" and not _same_text(fact.sentence, fact.context):
        lines.append(f"Sentence: {_field(fact.sentence, field_chars)}")
    return lines


def evidence_block(
    fact: Fact, context_chars: int = CONTEXT_CHARS, field_chars: int | None = None, order: str = "shared-first"
) -> str:
    """The evidence every prompt shows.

    ``shared-first``: the source context, then (after a blank line) the located
    value's own fields, so the facts of one table or document share the
    context as a prompt prefix (book/deviations.md, "Instructions first").
    ``evidence-first``: the authors' order, the value's fields before the context.
    ``field_chars`` also cuts value, datatype, headers and sentence (only the
    last-resort budget rungs set it, so a prompt that fits is never changed).
    """
    if order not in ORDERS:
        raise ValueError(f"evidence order must be one of {ORDERS}, got {order!r}")
    context, located = context_lines(fact, context_chars), located_lines(fact, field_chars)
    if order == "shared-first":
        return "\n".join(context) + "\n\n" + "\n".join(located)
    # the authors' order: value and datatype, input type, headers and sentence, then the context
    return "\n".join([*located[:2], context[0], *located[2:], context[1]])
