"""Layer 3: the method and its baselines - hypotheses, verifier, selector, prompts, one module per method and the
registry."""
