"""dev/selector_reuse.py: the selector prompt's parts, what repeats between requests about one fact under each
layout, and book/sizing.md's block rendered from its record."""

from __future__ import annotations

import json

from dev import selector_reuse
from dev.selector_reuse import measure, split_selector
from fhs.data.domain import load_domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.contract import Message, Request
from fhs.method.config import FHSConfig
from fhs.method.selector import selector_request


def selector(fact: str, candidates: list[str]) -> Request:
    lines = "\n".join(f"[{i}] {c}" for i, c in enumerate(candidates, start=1))
    user = (f"Task: choose.\n\nAnswer with JSON.\n\nEvidence (a table):\ncontext of {fact}\n\n"
            f"Candidate concepts, numbered:\n{lines}")
    return Request(messages=(Message("system", "sys"), Message("user", user)), purpose="selector", fact_id=fact)


def words(text: str) -> int:
    return len(text.split())


def test_the_parts_are_the_instructions_the_evidence_and_the_candidates():
    head, evidence, candidates, ranking = split_selector(selector("f1", ["a x", "b y"]).messages[1].content)
    assert head.startswith("Task:") and evidence.startswith("Evidence (") and "context of f1" in evidence
    assert candidates.splitlines()[1:] == ["[1] a x", "[2] b y"] and ranking == ""


def test_a_reordered_list_shares_its_lines_but_not_its_prefix():
    result = measure([selector("f1", ["a", "b", "c"]), selector("f1", ["a", "c", "b"]),
                      selector("f2", ["a", "b", "c"])], words)
    assert result["facts"] == 2 and result["requests"] == 3 and result["later_requests"] == 1
    assert result["later_candidate_tokens_seen_in_any_order"] > 0.5  # b and c were shown, in another order
    assert result["later_same_candidate_set"] == 1.0 and result["later_same_candidate_list"] == 0.0


DOMAIN = load_domain("us-gaap")
FACT = Fact(id="f", context_id="c", modality="table", value="5", datatype="monetaryItemType",
            context="Total assets 5", gold=("C1",), row_header="Total assets")
IDS = [f"C{i}" for i in range(1, 11)]
TAXONOMY = Taxonomy.from_concepts("toy", [Concept(c, f"Label {c}", definition=f"about {c}",
                                                  datatype="monetaryItemType") for c in IDS])


def test_the_real_by_id_layout_shares_the_candidate_block_that_the_ranked_one_does_not():
    shared = {}
    for layout in selector_reuse.LAYOUTS:
        config = FHSConfig(selector_layout=layout)
        requests = [selector_request(FACT, order, TAXONOMY, DOMAIN, config)[0] for order in (IDS, IDS[::-1])]
        result = measure(requests, words)
        head, evidence, candidates, ranking = split_selector(requests[1].messages[-1].content)
        assert (ranking != "") == (layout == "by-id") and "C10" in candidates and "C10" not in ranking
        lines = requests[1].messages[-1].content.splitlines()
        block = words(requests[1].messages[0].content) + sum(words(line) for line in lines[:-1])
        shared[layout] = (result["later_mean_prefix_tokens"], block)
    prefix, block = shared["by-id"]
    assert prefix == block  # everything but the line of numbers came before, in the same order
    assert shared["ranked"][0] < prefix


RECORD = {"kind": "selector-layout", "command": "python -m dev.selector_reuse --run", "profile": "paper",
          "sample": {"fincl": 4}, "layouts": {
              name: {"facts": 2, "requests": 10, "mean_prompt_tokens": mean, "later_mean_prefix_tokens": prefix,
                     "served_by_prefix_share": share,
                     "plan": {"prompt_tokens": 1_000_000_000, "cached_prompt_tokens": cached, "prefix_share": 0.5,
                              "days": days, "no_reuse_days": 9.0, "server": "one GPU"}}
              for name, mean, prefix, share, cached, days in (("ranked", 100, 40, 0.4, 400_000_000, 6.0),
                                                              ("by-id", 105, 60, 0.6, 600_000_000, 5.0))}}


def test_the_block_states_each_layout_and_the_saving_from_the_record():
    block = selector_reuse.render_block(RECORD)
    assert block.startswith(selector_reuse.BEGIN) and block.endswith(selector_reuse.END)
    assert "| `ranked` | 100 | 40 | 40.0% | 1,000.0M |" in block and "| `by-id` | 105 | 60 | 60.0% |" in block
    assert "prefills 200.0M fewer prompt tokens (33.3% of" in block and "takes 1.00 days less" in block
    page = f"intro\n{selector_reuse.BEGIN}\nold\n{selector_reuse.END}\nafter\n"
    assert selector_reuse.render_page(page, block) == f"intro\n{block}\nafter\n"


def test_the_sizing_page_is_what_its_record_gives(tmp_path, capsys):
    assert selector_reuse.main(["--check"]) == 0, "book/sizing.md is stale: run python -m dev.selector_reuse"
    stale = tmp_path / "record.json"
    stale.write_text(json.dumps(RECORD))
    assert selector_reuse.main(["--check", "--record", str(stale)]) == 1
    assert "is not what" in capsys.readouterr().err
