"""Parallel sampling, J = 2 (self-consistency style; the paper's Section 5 and Appendix C.1).

J i.i.d. samples of the plain free-text prompt at T = 0.8, each its own
request told apart by ``sample_index`` (servers reject ``n > 1`` with greedy
settings, and a separate seed per sample replays exactly), each retrieved, the
J lists fused with summed RRF. A sample that is unreadable issues the direct
query (the documented fallback).

``parallel-instructed`` is the authors' CodiEsp behaviour (book/deviations.md,
"Parallel sampling wording on CodiEsp": their CodiEsp override always used the
"instructed" wording, which tells each sample it is sample i of J and to be
meaningfully distinct). The paper
describes i.i.d. samples, so ``parallel`` is the default.
"""

from __future__ import annotations

from fhs.data.domain import Domain
from fhs.data.facts import Fact
from fhs.llm.contract import Request
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext, with_selector
from fhs.method.prompting import render
from fhs.method.rewrite import Calls, final_record, fuse_rankings, reading, rewrite_request, search_query

PURPOSE = "parallel"
FIELDS = ("query",)


def parallel_requests(fact: Fact, domain: Domain, config: FHSConfig, *, instructed: bool = False) -> list[Request]:
    """J sampled free-text requests; ``instructed`` adds "sample i of J, be distinct" to each."""
    samples = config.num_hypotheses
    # The sample's own sentence closes the prompt (what differs comes last); the authors'
    # order has it inside the task's paragraph.
    glue = " " if config.prompt_order == "evidence-first" else ""
    requests = []
    for j in range(samples):
        variation = (
            glue + render("freetext_instructed", sample=str(j + 1), samples=str(samples)).strip() if instructed else ""
        )
        requests.append(
            rewrite_request(
                "freetext",
                fact,
                domain,
                config,
                purpose=PURPOSE,
                fields=FIELDS,
                temperature=config.temperature,
                sample_index=j,
                variation=variation,
            )
        )
    return requests


def run_parallel(fact: Fact, ctx: MethodContext, *, instructed: bool, method: str) -> dict:
    llm, domain = ctx.require_llm(method)
    calls = Calls()
    replies = calls.ask(
        llm, parallel_requests(fact, domain, ctx.config, instructed=instructed), FIELDS, required="query"
    )
    rounds = []
    for j, values in enumerate(replies):
        query = search_query(fact, reading(values), ctx.retriever)
        rounds.append({"sample": j, "reading": reading(values), **query.to_dict(), "_ranking": query.ranking})
    pool = fuse_rankings([r.pop("_ranking") for r in rounds], ctx.config)
    wording = "instructed" if instructed else "plain"
    return with_selector(fact, ctx, final_record(pool, calls, rounds=rounds, wording=wording))


def parallel(fact: Fact, ctx: MethodContext) -> dict:
    """J = 2 i.i.d. free-text samples at T = 0.8, RRF-fused (2 LLM calls + selector)."""
    return run_parallel(fact, ctx, instructed=False, method="parallel")


def parallel_instructed(fact: Fact, ctx: MethodContext) -> dict:
    """The authors' CodiEsp variant: each sample told it is i of J and to be distinct (2 calls + selector)."""
    return run_parallel(fact, ctx, instructed=True, method="parallel-instructed")
