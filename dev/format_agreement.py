"""Do the verifier's compact codes change its verdicts? The same windows and hypotheses, judged in both formats.

The verifier answers one letter per dimension per candidate (``S``/``C``/``A``,
``FHSConfig.compact_outputs``); the authors asked for an object per candidate
with its id and one word per dimension (book/deviations.md, "Verifier").
This measures what that costs in verdicts: each fact's FHS hypotheses are
generated once, then the same window is judged by the same model twice, once
per format (no verdict ledger, so nothing is shared between the two), and the
answers are compared:

- per (candidate, dimension): the share of cells with the same verdict
  (support / contradict / abstain) and Cohen's kappa, over candidates both
  formats judged;
- per (candidate, hypothesis): the share with the same v_j(c) (Section 4.4,
  the run's scoring; "unjudged" in both counts as the same) and the mean |Δv_j|
  where both judged;
- per fact: the same top-1 after Eq. 3, and Recall@1 / MRR under each format.

``python -m dev.format_agreement --profile cpu --datasets fincl,codiesp --facts 10``
prints the figures as JSON (both formats run in one process, side by side).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from fhs.core.files import write_text_atomic
from fhs.data.domain import load_domain
from fhs.data.sampling import sample_by_context
from fhs.method.fhs import run_fhs_fact
from fhs.method.hypotheses import hypotheses_from_records
from fhs.method.verifier import Verdicts, candidate_support
from fhs.run.evaluate import gold_rank
from fhs.run.inputs import ModelChoice, load_experiment

LABELS = ("support", "contradict", "abstain")


def compare_fact(compact: Mapping[str, Any], verbose: Mapping[str, Any], dimensions: Sequence[str],
                 scoring: str, gold: Sequence[str] = ()) -> dict[str, Any]:
    """Tallies for one fact from its two FHS records (same hypotheses and window, the two formats)."""
    cells: Counter = Counter()  # (compact label, verbose label) over candidates judged in both
    v_same = v_pairs = 0
    v_diffs: list[float] = []
    missing = {"compact": 0, "verbose": 0}
    hypotheses = hypotheses_from_records(compact["hypotheses"], dimensions)
    window = (compact.get("verifier") or {}).get("window", {}).get("ids", [])
    for j, hypothesis in enumerate(hypotheses):
        entries = {}
        for name, record in (("compact", compact), ("verbose", verbose)):
            verdicts = (record.get("verifier") or {}).get("verdicts") or []
            entries[name] = verdicts[j]["entries"] if j < len(verdicts) else {}
        for cid in window:
            a, b = entries["compact"].get(cid), entries["verbose"].get(cid)
            missing["compact"] += a is None
            missing["verbose"] += b is None
            if a is not None and b is not None:
                cells.update((a.get(d, "abstain"), b.get(d, "abstain")) for d in dimensions)
            va = candidate_support(Verdicts.from_dict(cid, a, dimensions), hypothesis, scoring) if a else None
            vb = candidate_support(Verdicts.from_dict(cid, b, dimensions), hypothesis, scoring) if b else None
            v_pairs += 1
            v_same += va == vb
            if va is not None and vb is not None:
                v_diffs.append(abs(va - vb))
    ranks = {name: gold_rank(r["final_ids"], gold) if gold else None for name, r in (("compact", compact),
                                                                                      ("verbose", verbose))}
    return {"cells": cells, "v_same": v_same, "v_pairs": v_pairs, "v_diffs": v_diffs, "missing": missing,
            "top1_same": compact["final_ids"][:1] == verbose["final_ids"][:1], "ranks": ranks,
            "tokens_out": {name: sum(c["tokens_out"] for c in r["llm_calls"] if c["purpose"] == "verifier")
                           for name, r in (("compact", compact), ("verbose", verbose))},
            "seconds": {name: sum(c["seconds"] for c in r["llm_calls"] if c["purpose"] == "verifier")
                        for name, r in (("compact", compact), ("verbose", verbose))}}


def cohen_kappa(cells: Mapping[tuple[str, str], int]) -> float | None:
    """Cohen's kappa of two raters over the three verdicts (None without cells; 1.0 when chance agreement is 1)."""
    n = sum(cells.values())
    if not n:
        return None
    observed = sum(cells.get((label, label), 0) for label in LABELS) / n
    expected = sum(sum(cells.get((label, other), 0) for other in LABELS) *
                   sum(cells.get((other, label), 0) for other in LABELS) for label in LABELS) / n / n
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def agreement_summary(tallies: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The agreement figures over facts' tallies."""
    cells: Counter = Counter()
    for t in tallies:
        cells.update(t["cells"])
    n_cells = sum(cells.values())
    v_pairs = sum(t["v_pairs"] for t in tallies)
    diffs = [d for t in tallies for d in t["v_diffs"]]
    n = max(len(tallies), 1)

    def recall1(name: str) -> float:
        return sum(t["ranks"][name] == 1 for t in tallies) / n

    def mrr(name: str) -> float:
        return sum(1 / t["ranks"][name] for t in tallies if t["ranks"][name]) / n

    return {
        "facts": len(tallies),
        "cells": n_cells,
        "dimension_agreement": sum(cells[(x, x)] for x in LABELS) / n_cells if n_cells else None,
        "kappa": cohen_kappa(cells),
        "confusion": {f"{a}->{b}": cells[(a, b)] for a in LABELS for b in LABELS if cells[(a, b)]},
        "candidate_pairs": v_pairs,
        "v_agreement": sum(t["v_same"] for t in tallies) / v_pairs if v_pairs else None,
        "v_mean_abs_diff": sum(diffs) / len(diffs) if diffs else None,
        "unjudged": {name: sum(t["missing"][name] for t in tallies) for name in ("compact", "verbose")},
        "top1_same": sum(t["top1_same"] for t in tallies) / n,
        "recall@1": {name: recall1(name) for name in ("compact", "verbose")},
        "mrr": {name: mrr(name) for name in ("compact", "verbose")},
        "verifier_tokens_out": {name: sum(t["tokens_out"][name] for t in tallies) for name in ("compact", "verbose")},
        "verifier_seconds": {name: round(sum(t["seconds"][name] for t in tallies), 1)
                             for name in ("compact", "verbose")},
    }


def measure(dataset: str, choice: ModelChoice, n_facts: int, *, data: str | None = None, seed: int = 0,
            done: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Each sampled fact of ``dataset``: hypotheses once, then the verifier in the compact and the verbose format.

    ``done`` is called with each fact's tally as it finishes (the command line writes the report so far).
    """
    experiment = load_experiment(dataset, data=data, progress=False)
    domain = load_domain(experiment.domain_name())
    config = experiment.llm_context(choice).config.replace(selector=False)
    llm = choice.llm()
    tallies = []
    for fact in sample_by_context(experiment.facts, n_facts, seed=seed):
        compact = run_fhs_fact(fact, experiment.retriever, llm, domain, experiment.taxonomy,
                               config.replace(compact_outputs=True))
        logged = hypotheses_from_records(compact["hypotheses"], domain.dimension_names)
        verbose = run_fhs_fact(fact, experiment.retriever, llm, domain, experiment.taxonomy,
                               config.replace(compact_outputs=False), hypotheses=logged)
        tallies.append({**compare_fact(compact, verbose, domain.dimension_names, config.scoring, fact.gold),
                        "dataset": dataset, "fact": fact.id})
        if done is not None:
            done(tallies[-1])
    return tallies


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dev.format_agreement", description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--datasets", default="fincl,codiesp")
    parser.add_argument("--facts", type=int, default=10, help="context-level sample size per dataset")
    parser.add_argument("--seed", type=int, default=0, help="the sample's seed")
    parser.add_argument("--data", default=None)
    parser.add_argument("--cache", default=None,
                        help="response cache (default: a fresh temporary one); a kept cache makes a rerun resume")
    parser.add_argument("--out", default=None, help="also write the report so far here after every fact")
    args = parser.parse_args(argv)
    datasets = args.datasets.split(",")
    tallies: list[dict[str, Any]] = []

    def report() -> dict[str, Any]:
        return {"model": choice.model, "profile": args.profile, "all": agreement_summary(tallies),
                **{name: agreement_summary([t for t in tallies if t["dataset"] == name]) for name in datasets}}

    def done(tally: dict[str, Any]) -> None:
        tallies.append(tally)
        print(f"{tally['dataset']} {tally['fact']}: top-1 same {tally['top1_same']}", file=sys.stderr, flush=True)
        if args.out:
            write_text_atomic(args.out, json.dumps(report(), indent=2) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        choice = ModelChoice.resolve(args.profile, cache=args.cache or Path(tmp) / "responses.sqlite")
        for name in datasets:
            measure(name, choice, args.facts, data=args.data, seed=args.seed, done=done)
    print(json.dumps(report(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
