"""The data page of an adapter's book, written from its spec files rather than copied from the paper's.

The full book's ``book/data.md`` describes the paper's sources; an adapter's reader needs what their own
specs hold: the facts (how many, in how many contexts, of which modality and datatype), the taxonomy,
the domain and the settings the spec chose. Every file is named by its name alone, never by its path.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

from fhs.core.free_text import markdown_literal


def _counts(counter: Counter, limit: int = 12) -> str:
    shown = ", ".join(f"{markdown_literal(key or '(none)')} {count:,}" for key, count in counter.most_common(limit))
    return shown + (f" and {len(counter) - limit} more" if len(counter) > limit else "")


def spec_rows(spec_path: Path) -> list[tuple[str, str]]:
    """``(what, value)`` rows describing one spec: its facts, taxonomy, domain and settings."""
    from fhs.data.datadir import data_dir
    from fhs.data.datasets import load_facts
    from fhs.data.datasets.spec_file import read_spec_file
    from fhs.data.domain import load_domain
    from fhs.data.taxonomies import load_taxonomy, load_taxonomy_file

    spec = read_spec_file(spec_path)
    taxonomy = (
        load_taxonomy_file(spec.taxonomy_file) if spec.taxonomy_file is not None else load_taxonomy(spec.taxonomy)
    )
    facts = load_facts(spec, data_dir(None) if spec.facts_file is None else Path("."), taxonomy, progress=False)
    gold = {concept for fact in facts for concept in fact.gold}
    headed = sum(1 for fact in facts if fact.row_header or fact.column_header)
    facts_file = spec.facts_file.name if spec.facts_file is not None else f"the built-in loader of `{spec.name}`"
    taxonomy_file = f"`{spec.taxonomy_file.name}`" if spec.taxonomy_file is not None else "built in"
    rows = [
        ("spec file", f"`{Path(spec_path).name}`"),
        ("facts", f"`{facts_file}`: {len(facts):,} facts in {len({f.context_id for f in facts}):,} contexts"),
        ("modalities", _counts(Counter(f.modality for f in facts))),
        ("fact datatypes", _counts(Counter(f.datatype for f in facts))),
        ("located by headers", f"{headed:,} of {len(facts):,} facts have a row or column header"),
        (
            "gold",
            (
                f"{len(gold):,} distinct concepts; {sum(1 for f in facts if len(f.gold) > 1):,} facts accept "
                "more than one"
            ),
        ),
        ("taxonomy", f"`{markdown_literal(taxonomy.name)}` ({taxonomy_file}): {len(taxonomy.concepts):,} concepts"),
        ("concept datatypes", _counts(Counter(c.datatype for c in taxonomy.concepts))),
    ]
    if spec.domain:
        domain = load_domain(spec.domain)
        rows.append(
            (
                "domain",
                (
                    f"`{markdown_literal(domain.name)}` ({markdown_literal(domain.taxonomy)}), "
                    f"dimensions {', '.join(d.name for d in domain.dimensions)}"
                ),
            )
        )
    else:
        rows.append(("domain", "none: the LLM methods and the oracle model need one (`domain:` in the spec)"))
    dev = Path(spec.dev).name if spec.dev and Path(spec.dev).is_absolute() else spec.dev
    rows.append(("development split", f"`{markdown_literal(dev)}`" if dev else "none (`dev:` in the spec adds one)"))
    settings = ", ".join(f"{key} = {value}" for key, value in spec.retrieval) or "the defaults"
    rows += [("retrieval settings", markdown_literal(settings)), ("gold-query form", spec.oracle_query)]
    return rows


def data_page(specs: Iterable[tuple[str, Path]]) -> str:
    """The data page: one table per spec (``(name, path)``), from the files the spec names."""
    lines = [
        "# The data",
        "",
        (
            "What each dataset spec of this book holds, read from its files when the book was built. The "
            "chapters run on exactly these facts, this taxonomy and this domain; the companion's guide "
            "(`book/adapting.md` in its checkout) says how each file is written and checked."
        ),
        "",
    ]
    for name, path in specs:
        lines += [f"## `{name}`", "", "| | |", "| --- | --- |"]
        lines += [f"| {what} | {value} |" for what, value in spec_rows(path)]
        lines.append("")
    return "\n".join(lines)
