"""Layer 0: what every other layer may use - errors, files (cache directory, atomic writes), JSONL, the tokenizer."""
