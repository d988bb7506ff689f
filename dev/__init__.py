"""The developers' own measurement and host tools: not installed with ``fhs``.

They measure this project's machines (CPU speed, CPUID masking and slowing, a cold build's
time, memory, processes, prefix reuse, the serving client, the verifier's answer format) and
render the measured builds the book shows. Run them from a checkout's root:
``python -m dev.NAME``; book/engineering.md lists what each one measures. ``fhs`` never
imports them (a lint-imports contract in pyproject.toml).
"""
