"""Test doubles: an LLM that answers from a script keyed by request purpose, and a tiny retriever.

Not collected by pytest (no ``test_`` prefix); tests import it by module name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from fhs.core.text import token_set
from fhs.data.taxonomy import Taxonomy
from fhs.llm.contract import Request, Response
from fhs.retrieval.bm25 import Ranking

Reply = str | Callable[[Request], str]


class ScriptedLLM:
    """Answers each request with the next scripted reply for its ``purpose``.

    A reply is a string or a function of the request (to answer from the
    prompt it was shown). Every request is kept in ``requests``; running out
    of script for a purpose is a test failure, not a silent default.
    """

    name = "scripted"

    def __init__(self, scripts: dict[str, Sequence[Reply]]) -> None:
        self.scripts = {purpose: list(replies) for purpose, replies in scripts.items()}
        self.requests: list[Request] = []
        self.batches: list[int] = []

    def complete(self, requests: Sequence[Request]) -> list[Response]:
        self.batches.append(len(requests))
        responses = []
        for request in requests:
            self.requests.append(request)
            queue = self.scripts.get(request.purpose)
            if not queue:
                raise AssertionError(f"no scripted reply left for purpose {request.purpose!r}")
            reply = queue.pop(0)
            text = reply(request) if callable(reply) else reply
            prompt_chars = sum(len(m.content) for m in request.messages)
            responses.append(Response(text=text, tokens_in=prompt_chars // 4, tokens_out=len(text) // 4,
                                      seconds=0.01, model="scripted"))
        return responses

    def calls(self, purpose: str) -> list[Request]:
        return [r for r in self.requests if r.purpose == purpose]


class OverlapRetriever:
    """Ranks a tiny taxonomy by shared distinct tokens with the query (ties by id), datatype-filtered."""

    def __init__(self, taxonomy: Taxonomy, k: int = 200) -> None:
        self.taxonomy = taxonomy
        self.k = k
        self.queries: list[tuple[str, str | None]] = []

    def search(self, query: str, datatype: str | None) -> Ranking:
        self.queries.append((query, datatype))
        wanted = token_set(query)
        scored = sorted(
            ((len(wanted & token_set(c.index_text)), c.id) for c in self.taxonomy
             if datatype is None or c.datatype == datatype),
            key=lambda item: (-item[0], item[1]),
        )[: self.k]
        return Ranking(ids=tuple(cid for _, cid in scored), scores=tuple(float(s) for s, _ in scored))
