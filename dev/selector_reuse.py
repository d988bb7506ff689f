"""What of the selector's prompt repeats between requests about the same fact, under each selector layout.

The shared selector is most of a GPU plan's prompt tokens (book/sizing.md). Its user message is
the instructions, the evidence (source context, then the located value) and the numbered
candidate lines (id / datatype / label / definition): in the method's order (``ranked``, the
paper's), or in concept-id order followed by the method's order as a list of their numbers
(``by-id``, ``FHSConfig.selector_layout``). For each layout this tool dry-runs a profile
(``fhs plan``'s machinery, on a small sample, with the layout set for every run), groups the
selector requests by fact and measures, in tokens of Qwen's vocabulary:

- the mean size of each part (system message and instructions, evidence, candidates, ranking);
- for every request after the first about its fact: the longest beginning, in whole lines, that an
  earlier request about the same fact shares with it (what a prefix cache serves it), and how many
  of its candidate lines (number aside) an earlier request also showed, in any order;
- the plan's totals with that layout: prompt tokens, the share of prompt text a never-evicting
  prefix cache serves (``fhs.plan.meter.PrefixShare``) and the days on the modelled server
  (``fhs.plan.server.model_time``, one H100 in FP8 unless told otherwise).

It writes the result as a record (``book/records/plans/selector-layout.json``) and renders the block of
book/sizing.md from it (:mod:`fhs.book.selector_layout`, which ``make html`` runs), so no figure there is typed
by hand.

    python -m dev.selector_reuse --run [--profile paper] [--sample 4] [--chapter 02_main_results ...]
    python -m dev.selector_reuse            # re-render the block from the record
    python -m dev.selector_reuse --check    # exit 1 if the block is not what the record gives
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import date
from pathlib import Path
from typing import Any

from fhs.book import selector_layout as book
from fhs.book.selector_layout import BEGIN, END, LAYOUTS, render_block, render_page

ROOT = Path(__file__).resolve().parent.parent
RECORD = ROOT / book.RECORD
PAGE = ROOT / book.PAGE
__all__ = ["BEGIN", "END", "LAYOUTS", "main", "measure", "render_block", "render_page", "run"]
RANKING = "\nRanking of these candidates"  # prompts/selector_by_id.txt: the method's order as numbers
_NUMBER = re.compile(r"^\[\d+\] ")


def split_selector(user: str) -> tuple[str, str, str, str]:
    """(instructions, evidence, candidate lines, ranking) of a selector user message in the shared-first
    order (prompts/selector.txt or selector_by_id.txt); the ranking is empty in the ranked layout."""
    head, _, evidence_on = user.partition("\nEvidence (")
    evidence, _, candidates = ("Evidence (" + evidence_on).partition("\nCandidate ")
    candidates, _, ranking = ("Candidate " + candidates).partition(RANKING)
    return head, evidence, candidates, (RANKING.lstrip("\n") + ranking) if ranking else ""


def measure(requests: Sequence[Any], count: Callable[[str], int]) -> dict[str, Any]:
    """The parts' sizes and what repeats across requests about one fact, in tokens."""
    counted: dict[str, int] = {}

    def tokens(text: str) -> int:
        if text not in counted:
            counted[text] = count(text)
        return counted[text]

    by_fact: dict[str, list[Any]] = defaultdict(list)
    for request in requests:
        by_fact[request.fact_id].append(request)
    parts = {"system_and_instructions": 0, "evidence": 0, "candidates": 0, "ranking": 0}
    repeat = {"requests": 0, "later_requests": 0, "prompt_tokens": 0, "prefix_tokens": 0, "candidate_tokens": 0,
              "candidate_tokens_seen_in_any_order": 0, "same_candidate_list": 0, "same_candidate_set": 0}
    for group in by_fact.values():
        seen_lines: set[str] = set()
        seen_lists: list[tuple[str, ...]] = []
        seen_prompts: list[list[str]] = []
        for index, request in enumerate(group):
            system, user = request.messages[0].content, request.messages[-1].content
            head, evidence, candidates, ranking = split_selector(user)
            lines = [_NUMBER.sub("", line) for line in candidates.splitlines()[1:]]
            sizes = (tokens(system) + tokens(head), tokens(evidence), tokens(candidates), tokens(ranking))
            for key, size in zip(parts, sizes):
                parts[key] += size
            repeat["requests"] += 1
            repeat["prompt_tokens"] += sum(sizes)
            prompt = user.splitlines()
            if index:
                repeat["later_requests"] += 1
                best = max(_shared_lines(prompt, earlier) for earlier in seen_prompts)
                repeat["prefix_tokens"] += tokens(system) + sum(tokens(line) for line in prompt[:best])
                repeat["candidate_tokens"] += sum(tokens(line) for line in lines)
                repeat["candidate_tokens_seen_in_any_order"] += sum(tokens(line) for line in lines
                                                                    if line in seen_lines)
                repeat["same_candidate_list"] += tuple(lines) in seen_lists
                repeat["same_candidate_set"] += any(set(lines) == set(earlier) for earlier in seen_lists)
            seen_lines.update(lines)
            seen_lists.append(tuple(lines))
            seen_prompts.append(prompt)
    n = max(repeat["requests"], 1)
    later = max(repeat["later_requests"], 1)
    return {"facts": len(by_fact), "requests": repeat["requests"],
            "mean_tokens": {key: round(value / n) for key, value in parts.items()},
            "mean_prompt_tokens": round(repeat["prompt_tokens"] / n),
            "later_requests": repeat["later_requests"],
            "later_mean_prefix_tokens": round(repeat["prefix_tokens"] / later),
            "served_by_prefix_share": round(repeat["prefix_tokens"] / max(repeat["prompt_tokens"], 1), 4),
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


def plan_figures(plan: Mapping[str, Any]) -> dict[str, Any]:
    """What the record keeps of one layout's plan: its token totals, prefix share and modelled days."""
    selector = plan["purposes"].get("selector", {})
    server = plan["server"]
    return {"prompt_tokens": plan["total"]["prompt_tokens"], "selector_prompt_tokens": selector.get("prompt_tokens", 0),
            "selector_mean_prompt_tokens": selector.get("mean_prompt_tokens", 0),
            "prefix_share": server["prefix_share"],
            "cached_prompt_tokens": round(plan["total"]["prompt_tokens"] * server["prefix_share"]),
            "prefill_tps": server["prefill_tps"], "days": server["days"], "no_reuse_days": server["no_reuse_days"],
            "server": server["server"]}


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return done.stdout.strip() or "unknown"


def run(profile: str, sample: int, chapters: Sequence[str] | None, gpu: str, precision: str) -> dict[str, Any]:
    """Dry-run ``profile`` once per layout, recording its selector requests, and measure them."""
    from fhs.book.manifest import plan_profile
    from fhs.llm.tokens import default_counter
    from fhs.plan import meter
    from fhs.plan.server import Server

    count = default_counter().count
    complete = meter.Meter.complete
    layouts: dict[str, Any] = {}
    sampled: dict[str, int] = {}
    for layout in LAYOUTS:
        selector: list[Any] = []

        def recording(self, requests, _into=selector):
            _into.extend(r for r in requests if r.purpose == "selector")
            return complete(self, requests)

        meter.Meter.complete = recording
        try:
            plan, _ = plan_profile(profile, chapters=list(chapters) if chapters else None, sample=sample,
                                   progress=False, changes={"selector_layout": layout},
                                   server=Server(gpu, precision))
        finally:
            meter.Meter.complete = complete
        sampled = plan["sample"]
        layouts[layout] = {**measure(selector, count), "plan": plan_figures(plan)}
    command = f"python -m dev.selector_reuse --run --profile {profile} --sample {sample}" + "".join(
        f" --chapter {c}" for c in chapters or ()) + f" --gpu {gpu} --precision {precision}"
    return {"kind": "selector-layout", "date": date.today().isoformat(), "commit": _commit(), "command": command,
            "profile": profile, "sample": sampled, "layouts": layouts}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.selector_reuse", description=__doc__.split("\n")[0])
    parser.add_argument("--run", action="store_true", help="dry-run the profile once per layout and write the record")
    parser.add_argument("--profile", default="paper")
    parser.add_argument("--sample", type=int, default=4)
    parser.add_argument("--chapter", action="append", default=None)
    parser.add_argument("--gpu", default="h100")
    parser.add_argument("--precision", default="fp8")
    parser.add_argument("--record", default=str(RECORD), help="the record to write (--run) and render")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if the block is out of date")
    args = parser.parse_args(argv)
    from fhs.core.files import write_text_atomic

    if args.run:
        record = run(args.profile, args.sample, args.chapter, args.gpu, args.precision)
        print(json.dumps(record, indent=2))
        write_text_atomic(Path(args.record), json.dumps(record, indent=2) + "\n")
    return book.main(["--record", args.record, "--page", str(PAGE), *(["--check"] if args.check else [])])


if __name__ == "__main__":
    sys.exit(main())
