"""Layer 2: retrieval over a taxonomy (BM25 + label coverage, dense, hybrid) and rank fusion."""
