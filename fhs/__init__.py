"""Factorized Hypothesis Search (FHS): a reproducible companion to the paper.

The package is small on purpose: each module holds one idea of the method
(tokenizer, taxonomy, facts, retrieval, fusion, verifier, ...), and every
method and ablation is a configuration of the same code path.
"""

__version__ = "0.1.0"
