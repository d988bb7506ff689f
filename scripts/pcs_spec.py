#!/usr/bin/env python
"""The ICD-10-PCS adaptation as a dataset spec (``fhs/book/pcs_spec.py``), as an adapter types it:

    python scripts/pcs_spec.py --out DIR --domain my-pcs.yaml --lexicon my-words.txt
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout even before `pip install -e .`

from fhs.book.pcs_spec import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
