"""Layer 2: the LLM contract (requests, responses), one module per backend, the response cache and JSON out of
model text."""
