"""Layer 2: lexical retrieval over a taxonomy (BM25 + label coverage) and rank fusion."""
