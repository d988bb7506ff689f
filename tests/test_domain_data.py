"""Category profiles on the real 2024 US-GAAP inventory (needs FHS_DATA)."""

import json
import os
from pathlib import Path

import pytest

from fhs.data.domain import load_domain
from fhs.data.taxonomy import Concept

pytestmark = pytest.mark.data
STEM = "ShareBasedCompensationArrangementByShareBasedPaymentAward"


def inventory():
    root = os.environ.get("FHS_DATA")
    path = Path(root or "") / "fintagging" / "us_gaap_2024_BM25.jsonl"
    if not root or not path.is_file():
        pytest.skip("FHS_DATA with fintagging/us_gaap_2024_BM25.jsonl is not available")
    with path.open(encoding="utf-8") as handle:
        rows = [json.loads(line) for line in handle if line.strip()]
    return [Concept(r["us_gaap_tag"], r["text"], datatype=r["entity_type"]) for r in rows]


def test_the_rsu_neighbourhood_splits_into_several_profiles():
    """The appendix-G fact: near-duplicate award concepts must not share one signature."""
    domain = load_domain("us-gaap")
    # the inventory spells the stem both "ShareBased" and "Sharebased"
    near = [c for c in inventory() if c.id.lower().startswith(STEM.lower()) and c.datatype == "sharesItemType"]
    profiles = {c.id.lower(): domain.profile_of(c) for c in near}
    gold = f"{STEM}EquityInstrumentsOtherThanOptionsNonvestedNumber".lower()
    options = f"{STEM}OptionsNonvestedNumberOfShares".lower()
    assert gold in profiles and options in profiles
    assert profiles[gold] != profiles[options]
    assert len(set(profiles.values())) > 1
