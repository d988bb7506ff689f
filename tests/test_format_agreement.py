"""The compact-vs-verbose verdict comparison on scripted answers whose differences are known."""

import json
import re

import pytest

from dev.format_agreement import agreement_summary, cohen_kappa, compare_fact
from fhs.method.config import FHSConfig
from fhs.method.fhs import run_fhs_fact
from fhs.method.hypotheses import hypotheses_from_records
from scripted_llm import OverlapRetriever, ScriptedLLM
from test_pipeline import DIMS, DOMAIN, FACT, GOLD, TAXONOMY, H1, H2, hypothesis_reply

LISTED = re.compile(r"^\[\d+\] (\S+) /", flags=re.M)
WORD = {"S": "support", "C": "contradict", "A": "unresolved"}


def ruling(cid):
    return "SSSSSS" if cid == GOLD else "SCSAAS"


def answer(request, flip=None):
    """The same verdicts in whichever format the request asks for; ``flip`` changes one cell of the verbose one."""
    ids = LISTED.findall(request.messages[-1].content)
    if request.schema["properties"]["verdicts"]["prefixItems"][0]["type"] == "string":
        return json.dumps({"verdicts": [ruling(cid) for cid in ids]})
    entries = []
    for cid in ids:
        code = ruling(cid)
        if flip and cid == flip:
            code = "C" + code[1:]
        entries.append({"id": cid, **{d: WORD[x] for d, x in zip(DIMS, code)}})
    return json.dumps({"verdicts": entries})


def records(flip=None):
    llm = ScriptedLLM({"hypothesis": [hypothesis_reply(H1, "Number of nonvested share awards at period end."),
                                      hypothesis_reply(H2, "Number of equity instruments other than options.")],
                       "verifier": [answer, answer, lambda r: answer(r, flip), lambda r: answer(r, flip)]})
    config = FHSConfig(selector=False)
    compact = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, config)
    verbose = run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY,
                           config.replace(compact_outputs=False),
                           hypotheses=hypotheses_from_records(compact["hypotheses"], DIMS))
    assert len(llm.calls("hypothesis")) == 2  # hypotheses once, shared by both formats
    return compact, verbose


def test_identical_verdicts_in_both_formats_agree_everywhere():
    compact, verbose = records()
    summary = agreement_summary([compare_fact(compact, verbose, DIMS, "paper", FACT.gold)])
    window = len(compact["verifier"]["window"]["ids"])
    assert summary["cells"] == 2 * window * 6 and summary["dimension_agreement"] == 1.0 and summary["kappa"] == 1.0
    assert summary["v_agreement"] == 1.0 and summary["v_mean_abs_diff"] == 0.0 and summary["top1_same"] == 1.0
    assert summary["recall@1"] == {"compact": 1.0, "verbose": 1.0}
    assert summary["verifier_tokens_out"]["compact"] < summary["verifier_tokens_out"]["verbose"]
    assert json.dumps(summary)


def test_one_flipped_cell_shows_in_dimension_and_support_agreement():
    compact, verbose = records(flip=GOLD)  # the gold's FAMILY: support in codes, contradict in the verbose answer
    summary = agreement_summary([compare_fact(compact, verbose, DIMS, "paper", FACT.gold)])
    cells = summary["cells"]
    assert summary["dimension_agreement"] == pytest.approx((cells - 2) / cells)
    assert summary["confusion"]["support->contradict"] == 2  # once per hypothesis
    pairs = summary["candidate_pairs"]
    assert summary["v_agreement"] == pytest.approx((pairs - 2) / pairs)
    # h1 and h2 resolve FAMILY, ROLE, TEMPORAL: the gold's v_j drops from 3/3 to 2/3 in the verbose answer
    assert summary["v_mean_abs_diff"] == pytest.approx(2 * (1 / 3) / pairs)


def test_cohen_kappa_against_a_hand_computed_case():
    cells = {("support", "support"): 20, ("contradict", "contradict"): 15, ("abstain", "abstain"): 5,
             ("support", "contradict"): 5, ("contradict", "support"): 5}
    # observed 40/50; chance (25*25 + 20*20 + 5*5) / 50^2 = 0.42
    assert cohen_kappa(cells) == pytest.approx((0.8 - 0.42) / (1 - 0.42))
    assert cohen_kappa({}) is None
