"""CodiEsp relocation on a seeded sample of test documents: the deterministic relocator against the LLM's.

The paper asks its model to copy the English phrase matching each Spanish
mention and keeps only exact substrings; chapter 02 sets that beside the
deterministic relocator (no model) its facts use. The documents are those
``fhs plan`` sizes (``fhs.plan.dry_run.relocation_documents``).
"""

from __future__ import annotations

import pandas as pd

from fhs.book.study import Study
from fhs.data.datadir import data_dir
from fhs.data.datasets.codiesp import load_split
from fhs.paper import RELOCATION, relocation_rate
from fhs.plan.dry_run import codiesp_documents, relocation_documents
from fhs.run.relocation import LLMRelocator


def relocation_comparison(study: Study, documents: int, seed: int, llm) -> tuple[dict[str, float], pd.DataFrame]:
    """Exact-relocation rates per relocator on ``documents`` test documents shuffled by ``seed``, and their table."""
    taxonomy = study.experiment("codiesp").taxonomy
    root = data_dir(study.data)
    sample = set(relocation_documents(codiesp_documents(root), documents, seed))
    deterministic = load_split(root, taxonomy, documents=sample)
    with_llm = load_split(root, taxonomy, documents=sample, relocator=LLMRelocator(llm))
    rates = {
        "deterministic": deterministic.stats["exact"] / deterministic.stats["facts"],
        "llm": with_llm.stats["exact"] / with_llm.stats["facts"],
    }
    frame = pd.DataFrame(
        [
            {"relocator": k, "documents": len(sample), "mentions": deterministic.stats["facts"], "exact relocations": v}
            for k, v in rates.items()
        ]
    )
    return rates, frame


def relocation_caption() -> str:
    return (
        "Share of mentions relocated to an exact English substring (paper: "
        f"{RELOCATION['exact']:,} of {RELOCATION['mentions']:,} = {relocation_rate():.3f})"
    )
