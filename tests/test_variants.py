"""Re-scoring variants make no new model calls: the response cache and the verdict ledger serve them.

A variant that changes beta, fusion, normalisation or rendering replays the
generator's requests (identical, so the response cache answers them) and the
verdicts already parsed (the ledger); a window change asks the verifier only
about the candidates it never judged under each hypothesis. The selector is
off here: it is not a re-scoring knob (its input is the new order).
"""

import re

import pytest

from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.method.config import FHSConfig
from fhs.method.fhs import run_fhs_fact
from fhs.method.verifier import concept_or_stub
from fhs.method.hypotheses import hypotheses_from_records
from fhs.run.knobs import knob_overrides
from fhs.run.ledger import MemoryLedger, SqliteLedger, candidate_key, hypothesis_key
from scripted_llm import OverlapRetriever, ScriptedLLM
from test_pipeline import DOMAIN, FACT, H1, H2, TAXONOMY, hypothesis_reply, verifier_reply

ASKED = re.compile(r"^\[\d+\] (\S+) /", flags=re.M)


def backend():
    return ScriptedLLM({
        "hypothesis": [hypothesis_reply(H1, "Number of nonvested share awards at period end."),
                       hypothesis_reply(H2, "Number of equity instruments other than options outstanding.")],
        "verifier": [verifier_reply] * 40,
    })


@pytest.fixture
def setup(tmp_path):
    scripted = backend()
    cache = ResponseCache(tmp_path / "responses.sqlite")
    llm = CachedLLM(scripted, cache)
    return scripted, cache, llm, SqliteLedger(tmp_path / "verdicts.sqlite")


def run(llm, ledger, **changes):
    config = FHSConfig(selector=False).replace(**changes)
    return run_fhs_fact(FACT, OverlapRetriever(TAXONOMY), llm, DOMAIN, TAXONOMY, config, ledger=ledger)


@pytest.mark.parametrize("knobs", [dict(beta=0.3), dict(beta=0.0), dict(fusion="mean"), dict(normalise="raw"),
                                   dict(render="label"), dict(render="definition"),
                                   dict(fusion="mean", normalise="raw", beta=1.0)])
def test_a_rescoring_variant_makes_zero_new_calls(setup, knobs):
    scripted, cache, llm, ledger = setup
    base = run(llm, ledger)
    before, sent = cache.stats(), len(scripted.requests)
    assert before.entries == 4 and before.by_purpose["verifier"]["entries"] == 2  # J = 2: 2 + 2 calls

    variant = run(llm, ledger, **knob_overrides(**knobs))
    after = cache.stats()
    assert after.entries == before.entries and after.tokens_out == before.tokens_out  # nothing new was cached
    assert len(scripted.requests) == sent  # and the backend saw nothing
    assert all(call["cached"] for call in variant["llm_calls"])
    assert variant["hypotheses"] == base["hypotheses"]
    if variant["verifier"] is not None:  # every window candidate's verdicts came from the ledger
        assert all(v["from_ledger"] == len(variant["verifier"]["window"]["ids"]) for v in variant["verifier"]["verdicts"])


def test_a_rescoring_variant_orders_exactly_as_a_cold_run_would(tmp_path, setup):
    scripted, cache, llm, ledger = setup
    run(llm, ledger)
    warm = run(llm, ledger, beta=0.2, fusion="mean")
    cold = run(CachedLLM(backend(), ResponseCache(tmp_path / "cold.sqlite")), MemoryLedger(), beta=0.2, fusion="mean")
    assert warm["final_ids"] == cold["final_ids"] and warm["final_scores"] == cold["final_scores"]
    assert warm["verifier"]["vbar"] == cold["verifier"]["vbar"]


def test_a_window_change_asks_only_about_unjudged_candidates(setup):
    scripted, cache, llm, ledger = setup
    base = run(llm, ledger, k_v=2)
    judged = set(base["verifier"]["window"]["ids"])
    sent = len(scripted.requests)

    variant = run(llm, ledger, k_v=4, **knob_overrides(window="rank"))  # a wider, rank-filled window
    window = variant["verifier"]["window"]["ids"]
    unjudged = [cid for cid in window if cid not in judged]
    assert unjudged, "the fixture should move the window"
    new = scripted.requests[sent:]
    assert [r.purpose for r in new] == ["verifier", "verifier"]  # one call per hypothesis, no generator call
    assert all(ASKED.findall(r.messages[-1].content) == unjudged for r in new)  # just those candidates
    assert cache.stats().entries == 4 + 2
    # the window's verdicts are complete: known ones from the ledger, the rest from the new calls
    for verdicts in variant["verifier"]["verdicts"]:
        assert set(verdicts["entries"]) == set(window)
        assert verdicts["from_ledger"] == len(window) - len(unjudged)

    # asked once, never again
    sent = len(scripted.requests)
    run(llm, ledger, k_v=4, **knob_overrides(window="rank", beta=0.9))
    assert len(scripted.requests) == sent


def test_with_nothing_known_the_requests_are_exactly_those_without_a_ledger(tmp_path):
    with_ledger, without = backend(), backend()
    run(with_ledger, SqliteLedger(tmp_path / "v.sqlite"))
    run(without, None)
    assert with_ledger.requests == without.requests


def test_one_hypothesis_alone_replays_the_pair_and_reuses_its_verdicts(setup):
    scripted, cache, llm, ledger = setup
    base = run(llm, ledger)
    sent = len(scripted.requests)
    alone = run(llm, ledger, only_hypothesis=1)
    assert len(scripted.requests) == sent  # the same window here, so nothing new at all
    assert [h["sample_index"] for h in alone["hypotheses"]] == [1]
    assert alone["hypotheses"][0] == base["hypotheses"][1]
    h = hypotheses_from_records(alone["hypotheses"])[0]
    assert ledger.lookup(next(iter(ledger._db.execute("SELECT scope FROM verdicts").fetchone())),
                         FACT.id, hypothesis_key(h, FACT),
                         [candidate_key(concept_or_stub(TAXONOMY, cid)) for cid in alone["verifier"]["window"]["ids"]])


def test_knobs_reject_unknown_values_with_the_registry_choices():
    from fhs.core.errors import InputError

    with pytest.raises(InputError, match="sum, mean"):
        knob_overrides(fusion="max")
    with pytest.raises(InputError, match="both, label, definition"):
        knob_overrides(render="title")


@pytest.mark.model
@pytest.mark.data
def test_smollm2_variants_replay_from_the_cache_and_the_ledger(tmp_path, capsys):
    """On a real model: beta and normalisation variants make no call; a window change asks only new candidates."""
    from fhs.cli import main
    from fhs.run.records import read_records

    cache_path = tmp_path / "llm" / "responses.sqlite"

    def fhs_run(out, *knobs):
        # one fact: every check below is per record or per call, and one fact has both hypotheses and a window
        code = main(["run", "--dataset", "fincl", "--method", "fhs", "--profile", "smoke", "--limit", "1",
                     "--selector", "off", "--quiet", "--out", str(tmp_path / out), "--cache", str(cache_path), *knobs])
        capsys.readouterr()
        assert code == 0
        return read_records(tmp_path / out / "records.jsonl")

    base = fhs_run("base")
    cache = ResponseCache(cache_path)
    entries = cache.stats().entries
    assert entries >= 2  # at least the fact's two hypotheses
    fhs_run("beta", "--beta", "0.3", "--normalize", "raw", "--cache-unparsed")
    assert cache.stats().entries == entries  # zero new model calls

    before = {r["id"]: r["verifier"] for r in base}
    window = fhs_run("window", "--window", "rank", "--cache-unparsed")
    new_calls = [c for r in window for c in r["llm_calls"] if not c["cached"]]
    assert {c["purpose"] for c in new_calls} <= {"verifier"}  # never the generator
    # a hypothesis is asked again only if its new window holds a candidate its old window did not
    could_ask = 0
    for record in window:
        old = before[record["id"]]
        for j, verdicts in enumerate((record["verifier"] or {}).get("verdicts", [])):
            if verdicts["asked"] and set(record["verifier"]["window"]["ids"]) - set(old["window"]["ids"] if old else ()):
                could_ask += 1
    assert cache.stats().entries - entries == len(new_calls) <= could_ask


def test_fhs_run_help_lists_every_knob_with_its_registry_choices(capsys):
    from fhs.cli import build_parser
    from fhs.run.knobs import KNOBS

    text = build_parser().parse_args.__self__._subparsers._group_actions[0].choices["run"].format_help()
    assert "--beta" in text and "--j" in text
    for knob, choices in KNOBS.items():
        assert f"--{knob} {{{','.join(choices)}}}" in text


def test_a_bad_knob_value_is_one_line_naming_the_field(tmp_path, capsys):
    from fhs.cli import main

    for bad, words in ((["--fusion", "max"], "invalid choice: 'max'"), (["--beta", "nan"], "--beta must be")):
        code = main(["run", "--dataset", "fincl", "--method", "fhs", "--out", str(tmp_path), *bad])
        err = capsys.readouterr().err
        assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err
