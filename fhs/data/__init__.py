"""Layer 1: facts, taxonomies, datasets, domains, CodiEsp relocation and the data directory. No model, no retrieval."""
