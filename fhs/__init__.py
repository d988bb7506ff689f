"""Factorized Hypothesis Search (FHS): a reproducible companion to the paper.

The package is layered along the data flow, each layer importing only from
those below it (``make test`` checks this with ``lint-imports``):

    cli -> book -> run -> method -> llm | retrieval -> data -> core

``fhs.paper`` holds the paper's numbers and sits outside the layers. Each
module holds one idea of the method, and every method and ablation is a
configuration of the same code path. The README's *Layout* section is the map.
"""

__version__ = "0.1.0"
