"""Layer 5 (beside plan): the benchmarks a user runs (`fhs bench retrieval`, `fhs bench llm`), side by side in one
run."""
