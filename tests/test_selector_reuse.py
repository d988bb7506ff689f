"""dev/selector_reuse.py: the selector prompt's parts, and what repeats between requests about one fact."""

from __future__ import annotations

from dev.selector_reuse import measure, split_selector
from fhs.llm.contract import Message, Request


def selector(fact: str, candidates: list[str]) -> Request:
    lines = "\n".join(f"[{i}] {c}" for i, c in enumerate(candidates, start=1))
    user = (f"Task: choose.\n\nAnswer with JSON.\n\nEvidence (a table):\ncontext of {fact}\n\n"
            f"Candidate concepts, numbered:\n{lines}")
    return Request(messages=(Message("system", "sys"), Message("user", user)), purpose="selector", fact_id=fact)


def words(text: str) -> int:
    return len(text.split())


def test_the_parts_are_the_instructions_the_evidence_and_the_candidates():
    head, evidence, candidates = split_selector(selector("f1", ["a x", "b y"]).messages[1].content)
    assert head.startswith("Task:") and evidence.startswith("Evidence (") and "context of f1" in evidence
    assert candidates.splitlines()[1:] == ["[1] a x", "[2] b y"]


def test_a_reordered_list_shares_its_lines_but_not_its_prefix():
    result = measure([selector("f1", ["a", "b", "c"]), selector("f1", ["a", "c", "b"]),
                      selector("f2", ["a", "b", "c"])], words)
    assert result["facts"] == 2 and result["requests"] == 3 and result["later_requests"] == 1
    assert result["later_candidate_tokens_seen_in_any_order"] > 0.5  # b and c were shown, in another order
    assert result["later_same_candidate_set"] == 1.0 and result["later_same_candidate_list"] == 0.0
