"""What of the selector's prompt repeats between requests about the same fact, and where it sits.

The shared selector is most of a GPU plan's prompt tokens (book/sizing.md). Its user message is
the instructions, the evidence (source context, then the located value) and the numbered
candidate lines ([rank] id / datatype / label / definition), in the order of the method's final
ranking. Over a profile's dry run (``fhs plan``'s machinery, on a small sample), this tool
groups the selector requests by fact and measures, in tokens of Qwen's vocabulary:

- the mean size of each part (system message and instructions, evidence, candidates);
- for every request after the first about its fact: how much an earlier request about the same
  fact began with (the cacheable prefix, up to the first differing candidate line), and how many
  of its candidate lines (rank number aside) an earlier request also showed, in any order: what a
  prefix cache could serve if candidates that repeat came first, which would change the order the
  paper shows them in; and the prefix it would share if the candidates' lines came as a list
  sorted by concept id before the ranked numbers (the paper's order kept in the numbers, but the
  prompt's layout changed).

    python -m dev.selector_reuse [--profile paper] [--sample 4] [--chapter 02_main_results ...] [--out F.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

_RANK = re.compile(r"^\[\d+\] ")


def split_selector(user: str) -> tuple[str, str, str]:
    """(instructions, evidence, candidate lines) of a selector user message (prompts/selector.txt's layout)."""
    head, _, evidence_on = user.partition("\nEvidence (")
    evidence, _, candidates = ("Evidence (" + evidence_on).partition("\nCandidate ")
    return head, evidence, "Candidate " + candidates


def measure(requests: Sequence[Any], count) -> dict[str, Any]:
    """The parts' sizes and what repeats across requests about one fact, in tokens."""
    by_fact: dict[str, list[Any]] = defaultdict(list)
    for request in requests:
        by_fact[request.fact_id].append(request)
    parts = {"system_and_instructions": 0, "evidence": 0, "candidates": 0}
    repeat = {"requests": 0, "later_requests": 0, "prefix_tokens": 0, "candidate_tokens": 0,
              "candidate_tokens_seen_in_any_order": 0, "same_candidate_list": 0, "same_candidate_set": 0,
              "sorted_prefix_tokens": 0}
    for group in by_fact.values():
        seen_lines: set[str] = set()
        seen_lists: list[tuple[str, ...]] = []
        for index, request in enumerate(group):
            system, user = request.messages[0].content, request.messages[-1].content
            head, evidence, candidates = split_selector(user)
            lines = [_RANK.sub("", line) for line in candidates.splitlines()[1:]]
            sizes = (count(system) + count(head), count(evidence), count(candidates))
            for key, size in zip(parts, sizes):
                parts[key] += size
            repeat["requests"] += 1
            if index:
                repeat["later_requests"] += 1
                best = max(_shared_lines(lines, earlier) for earlier in seen_lists)
                repeat["prefix_tokens"] += sizes[0] + sizes[1] + sum(count(line) for line in lines[:best])
                ordered = sorted(lines)
                best = max(_shared_lines(ordered, sorted(earlier)) for earlier in seen_lists)
                repeat["sorted_prefix_tokens"] += sizes[0] + sizes[1] + sum(count(line) for line in ordered[:best])
                repeat["candidate_tokens"] += sum(count(line) for line in lines)
                repeat["candidate_tokens_seen_in_any_order"] += sum(count(line) for line in lines
                                                                    if line in seen_lines)
                repeat["same_candidate_list"] += tuple(lines) in seen_lists
                repeat["same_candidate_set"] += any(set(lines) == set(earlier) for earlier in seen_lists)
            seen_lines.update(lines)
            seen_lists.append(tuple(lines))
    n = max(repeat["requests"], 1)
    later = max(repeat["later_requests"], 1)
    return {"facts": len(by_fact), "requests": repeat["requests"],
            "mean_tokens": {key: round(value / n) for key, value in parts.items()},
            "later_requests": repeat["later_requests"],
            "later_mean_prefix_tokens": round(repeat["prefix_tokens"] / later),
            "later_mean_prefix_tokens_if_sorted_by_id": round(repeat["sorted_prefix_tokens"] / later),
            "later_candidate_tokens_seen_in_any_order": round(
                repeat["candidate_tokens_seen_in_any_order"] / max(repeat["candidate_tokens"], 1), 4),
            "later_same_candidate_list": round(repeat["same_candidate_list"] / later, 4),
            "later_same_candidate_set": round(repeat["same_candidate_set"] / later, 4)}


def _shared_lines(lines: Sequence[str], earlier: Sequence[str]) -> int:
    shared = 0
    for a, b in zip(lines, earlier):
        if a != b:
            break
        shared += 1
    return shared


def main(argv: Sequence[str] | None = None) -> int:
    from fhs.book.manifest import plan_profile
    from fhs.llm.tokens import default_counter
    from fhs.plan import meter

    parser = argparse.ArgumentParser(prog="python -m dev.selector_reuse", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--sample", type=int, default=4)
    parser.add_argument("--chapter", action="append", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    selector: list[Any] = []
    complete = meter.Meter.complete

    def recording(self, requests):
        selector.extend(r for r in requests if r.purpose == "selector")
        return complete(self, requests)

    meter.Meter.complete = recording
    plan_profile(args.profile, chapters=args.chapter, sample=args.sample, progress=False)
    result = measure(selector, default_counter().count)
    print(json.dumps(result, indent=2))
    if args.out:
        from fhs.core.files import write_text_atomic

        write_text_atomic(args.out, json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
