"""Test helpers: a US-GAAP taxonomy built straight from FinTagging's concept file.

The real loader (``fhs.data.taxonomies``) is written elsewhere; these tests only
need ids and datatypes, so they read the JSONL themselves. ``tiny_taxonomy``
holds the handful of concepts the hand-written fixtures use.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from fhs.data.taxonomy import Concept, Taxonomy

CONCEPT_FILE = Path("fintagging") / "us_gaap_2024_BM25.jsonl"


def data_dir() -> Path:
    return Path(os.environ.get("FHS_DATA", "../shared/data"))


def bm25_taxonomy(root: Path | None = None) -> Taxonomy:
    """The 2024 inventory (17,388 concepts): id = us_gaap_tag, datatype = entity_type."""
    path = (root or data_dir()) / CONCEPT_FILE
    with path.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return Taxonomy.from_concepts("us-gaap-2024", (
        Concept(id=row["us_gaap_tag"], label=row["text"], datatype=row["entity_type"]) for row in rows))


def tiny_taxonomy() -> Taxonomy:
    concepts = {
        "RevenueFromContractWithCustomerExcludingAssessedTax": "monetaryItemType",
        "NetIncomeLoss": "monetaryItemType",
        "CommonStockParOrStatedValuePerShare": "perShareItemType",
        "PreferredStockParOrStatedValuePerShare": "perShareItemType",
        "EffectiveIncomeTaxRateContinuingOperations": "percentItemType",
        "NumberOfReportableSegments": "integerItemType",
        "RevenueNotFromContractWithCustomerOther": "monetaryItemType",
        "SaleOfStockNumberOfSharesIssuedInTransaction": "sharesItemType",
    }
    return Taxonomy.from_concepts("tiny", (Concept(id=name, label=name, datatype=dt) for name, dt in concepts.items()))
