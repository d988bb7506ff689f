# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # FHS-Seq diagnostics
#
# The natural agentic alternative to FHS's one parallel fan is a sequential loop that
# revises its hypothesis from what retrieval and the verifier returned. FHS-Seq (Section
# 4.5) keeps every part of FHS (generator, renderer, retriever, fusion, verifier) and
# changes only the control flow:
#
# 1. **round 1 is FHS**: J = 2 sampled hypotheses, every rendering retrieved and fused,
#    the verifier over the profile-diverse window;
# 2. each later round **tallies** the verifier's verdicts on the current hypothesis per
#    dimension over the window (support / against / abstain), and picks the dimension
#    with the largest *against − support* above zero (ties in the domain's fixed order);
#    if there is none, the loop **stops**;
# 3. otherwise one greedy call **revises** that dimension alone (any other dimension the
#    model changes is put back), the revision is rendered and retrieved, every ranking so
#    far is re-fused, and every hypothesis in the pool is re-verified;
# 4. at most four rounds, so 4 to 19 model calls per fact before the selector.
#
# Because round 1 is FHS, comparing round 1 with the full episode isolates what the
# later rounds add. The paper's answer (Table 20, Appendix F.1): they replace 13.8% of
# the top-50 pool and move Recall@50 by −0.006 [−0.016, +0.002]; they change the pool
# without improving it. The gold never enters the pool for 0.298 of facts, and perfect
# selection among FHS's own hypotheses would buy little (Table 6's oracle row).
#
# This page shows the paper's variant: the verifier-scored list after the last round is
# the final list, and unjudged candidates get the mean support (as in FHS). The authors'
# code differs in both (zero fill, and the plain re-fusion as the final list); those are
# the options `seq_fill="zero"` and `seq_final="refusion"` (see `book/deviations.md`).

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached
datasets = ["fincl"]  # Table 20 is FinTagging; add "ixbrl" on a GPU box
llm_limit = None  # facts per dataset (a context-level sample); None takes the profile size
llm_fraction = None  # a share of every LLM sample (make rehearsal); None takes all of it
runs = None  # seeded runs: None takes every seed of the profile (three under paper), N its first N
backend = None  # llama_cpp, openai or vllm; None takes the profile backend
model = None  # None takes the profile model
base_url = None  # OpenAI-compatible server(s), comma-separated; None takes the profile URL
max_in_flight = None  # requests in flight per server URL; None takes the profile's (paper: 128)
thinking = None  # Qwen3's thinking mode (True/False); None takes the profile's (off, as in the paper)
replay = None  # an `fhs archive` file that answers every model call, no server (`make book` with REPLAY set to it)
seed = 20260724  # bootstrap seed
bootstrap_resamples = 2000
cache_dir = ".fhs-cache"  # every model call is cached here; a rebuild replays it
protocol_check = False  # True: a tiny-sample run of the protocol, not numbers to compare or record

# %% tags=["remove-cell"]
import time

page_started = time.perf_counter()  # the page says at its end how long it took

# %% [markdown]
# The facts are the same context-level sample as the main-results chapter, and the
# response cache is shared with it: FHS-Seq's round 1 asks exactly FHS's questions, so its
# two generator calls and its round-1 verifier calls replay FHS's answers.

# %%
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fhs.book.check import check
from fhs.book.report import (Estimate, NEUTRAL_COLOR, OURS_COLOR, PAPER_COLOR, fmt_estimate, ours_vs_paper,
                             profile_note, show, use_style)
from fhs.book.study import Study
from fhs.llm.models import display_name
from fhs.method.config import FHSConfig
from fhs.method.fhs_seq import STOP_REASONS
from fhs.paper import paper_value
from fhs.run.evaluate import paired_difference, runs_estimate, summarize
from fhs.run.inputs import ModelChoice
from fhs.run.runner import call_totals
from fhs.run.seq_diagnostics import (oracle_best_single, rounds_distribution, stop_distribution, summary,
                                     with_round_ranks)

use_style()
study = Study.for_profile(profile, runs_dir, progress=False)
if llm_limit is not None:
    study.profile = study.profile.with_llm_facts(int(llm_limit))
if llm_fraction is not None:
    study.profile = replace(study.profile, llm_fraction=float(llm_fraction))
seeds = study.seeds(runs)  # the profile's seeded runs, the one source
choice = ModelChoice.resolve(profile, backend=backend, model=model,
                             base_urls=base_url.split(",") if base_url else None,
                             seed=seeds[0], cache=Path(cache_dir) / "responses.sqlite",
                             max_in_flight=max_in_flight, thinking=thinking, replay=replay)
choices = [replace(choice, seed=s) for s in seeds]
interval = dict(resamples=bootstrap_resamples, seed=seed)
profile_note(profile, display_name(choice.model),
             facts={name: len(study.facts(name, llm=True)) for name in datasets}, seeds=seeds)


def across(values):
    """One value per seeded run: the mean, ± the std when there are several."""
    return Estimate(float(np.mean(values)), std=float(np.std(values, ddof=1)) if len(values) > 1 else None)


def across_differences(ds):
    """Paired differences, one per seeded run: one run's interval, or the mean ± std of several."""
    if len(ds) == 1:
        return Estimate(ds[0].estimate, ds[0].low, ds[0].high)
    return across([d.estimate for d in ds])

# %% [markdown]
# ## The runs

# %%
seq_groups, fhs_groups = {}, {}
for name in datasets:
    seq_groups[name] = [study.run_llm(name, "fhs-seq", c) for c in choices]
    fhs_groups[name] = [study.run_llm(name, "fhs", c) for c in choices]
by_seed = {name: [with_round_ranks(run.records) for run in seq_groups[name]] for name in datasets}
# Shares (rounds, stopping reasons, revisions) pool the seeded runs: every run holds the same
# facts, so a pooled share is the mean of the runs' shares. Table 20 is computed per run.
records = {name: [r for recs in by_seed[name] for r in recs] for name in datasets}
seq_runs = {name: group[0] for name, group in seq_groups.items()}
fhs_runs = {name: group[0] for name, group in fhs_groups.items()}
config = seq_runs[datasets[0]].metrics.get("config", {}).get("fhs")
print({name: len(by_seed[name][0]) for name in datasets}, "facts | model:", choice.model,
      "| seeded runs:", len(seeds))

# %% [markdown]
# Round 1 is FHS: with the same sample, seed and cache, FHS-Seq's round-1 list should be
# FHS's final list fact by fact.

# %%
for name in datasets:
    same = []
    for seq_records, fhs_run in zip(by_seed[name], fhs_groups[name]):
        fhs_lists = {r["id"]: r["ranking"] for r in fhs_run.records}
        same += [r["rounds"][0]["ranking"] == fhs_lists[r["id"]] for r in seq_records]
    print(f"{name}: round-1 list identical to FHS's final list for {np.mean(same):.0%} of facts (every seeded run)")

# %% [markdown]
# ## Table 20: does the loop improve on its own first round?
#
# Recall@50 after round 1 and after the full episode, their paired difference with a
# 95% context-clustered bootstrap interval, and how much of the top-50 pool the later
# rounds replace (averaged over all facts; a fact that stops after round 1 replaces
# nothing).

# %%
LABELS = {"delta_recall@50": "Δ Recall@50 (full − round 1)", "replaced_top50": "top-50 pool replaced by later rounds",
          "gold_never_in_pool": "gold never in the pool", "all_rounds": "facts using all 4 rounds",
          "one_round": "facts stopping after round 1", "mean_rounds": "mean rounds used"}
checked = {}
for name in datasets:
    recs = by_seed[name][0]
    r1 = runs_estimate(by_seed[name], "recall@50", rank_key="rank_round1", **interval)
    full = runs_estimate(by_seed[name], "recall@50", rank_key="rank_full", **interval)
    delta = across_differences([paired_difference(rs, rs, "recall@50", rank_key_a="rank_full",
                                                  rank_key_b="rank_round1", **interval) for rs in by_seed[name]])
    per_run = [summary(rs) for rs in by_seed[name]]
    s = {k: float(np.mean([v[k] for v in per_run])) for k in per_run[0]}
    spread = {k: across([v[k] for v in per_run]) for k in per_run[0]} if len(per_run) > 1 else s
    ours = {"Recall@50, round 1": Estimate(r1.estimate, r1.low, r1.high, r1.std),
            "Recall@50, full episode": Estimate(full.estimate, full.low, full.high, full.std),
            "delta_recall@50": delta, **spread}
    paper = {LABELS.get(k, k): paper_value(name, "fhs-seq", k) for k in ours}
    ours = {LABELS.get(k, k): v for k, v in ours.items()}
    low, high = (paper_value(name, "fhs-seq", f"delta_recall@50_{end}") for end in ("low", "high"))
    note = f"; the paper's Δ interval is [{low:+.3f}, {high:+.3f}]" if low is not None else ""
    show(ours_vs_paper(ours, paper, label="quantity"),
         caption=f"Table 20 on {name} ({len(recs)} facts): ours with 95% context-clustered intervals{note}")
    checked.update({f"{name}/facts": len(recs), f"{name}/fhs-seq/recall@50_round1": r1.estimate,
                    f"{name}/fhs-seq/recall@50_full": full.estimate, f"{name}/fhs-seq/delta_recall@50": delta.value,
                    **{f"{name}/fhs-seq/{k}": v for k, v in s.items()}})

# %% [markdown]
# ## How many rounds, and why the loop stopped
#
# The loop stops when no dimension is net-unsupported, at the four-round budget, or when
# a revision cannot be used (it did not parse, or left its target unchanged). The paper
# reports 0.733 of facts using all four rounds and 0.174 stopping after round 1, every
# early stop being for lack of an unsupported dimension.

# %% tags=["hide-input"]
fig, axes = plt.subplots(len(datasets), 2, figsize=(10, 3.0 * len(datasets)), layout="constrained", squeeze=False)
for (ax_rounds, ax_stop), name in zip(axes, datasets):
    rounds = rounds_distribution(records[name])
    ax_rounds.bar(list(rounds), list(rounds.values()), color=OURS_COLOR, label="ours")
    paper_rounds = {1: paper_value(name, "fhs-seq", "one_round"), 4: paper_value(name, "fhs-seq", "all_rounds")}
    ax_rounds.scatter(list(paper_rounds), [v if v is not None else np.nan for v in paper_rounds.values()],
                      marker="_", s=600, color=PAPER_COLOR, zorder=3, label="paper")
    ax_rounds.set(xticks=[1, 2, 3, 4], xlabel="rounds used", ylabel="share of facts", title=f"{name}: rounds used")
    ax_rounds.legend(fontsize=8)
    stops = stop_distribution(records[name])
    y = np.arange(len(STOP_REASONS))
    ax_stop.barh(y, [stops[s] for s in STOP_REASONS], color=NEUTRAL_COLOR)
    paper_stop = {"no_unsupported_dimension": paper_value(name, "fhs-seq", "no_unsupported_dimension"),
                  "max_rounds": paper_value(name, "fhs-seq", "all_rounds")}
    ax_stop.scatter([paper_stop.get(s) if paper_stop.get(s) is not None else np.nan for s in STOP_REASONS], y,
                    marker="|", s=300, color=PAPER_COLOR, zorder=3)
    ax_stop.set(yticks=y, yticklabels=STOP_REASONS, xlabel="share of facts", title=f"{name}: stopping reason")
fig.suptitle("FHS-Seq: rounds used and stopping reasons (bars: ours; red ticks: the paper)")
plt.show()

# %%
rows = []
for name in datasets:
    stops, rounds = stop_distribution(records[name]), rounds_distribution(records[name])
    rows += [{"dataset": name, "stopping reason": s, "share": v} for s, v in stops.items()]
    checked.update({f"{name}/fhs-seq/stop/{s}": v for s, v in stops.items()})
    checked.update({f"{name}/fhs-seq/rounds/{k}": v for k, v in rounds.items()})
show(pd.DataFrame(rows), caption="Stopping reasons")

# %% [markdown]
# Which dimensions did the loop revise, and did the model keep to its one dimension?
# `restored` counts revisions where another dimension changed and was put back.

# %%
rows = []
for name in datasets:
    for record in records[name]:
        for rnd in record["rounds"][1:]:
            rows.append({"dataset": name, "target": rnd["revision"]["target"],
                         "restored": bool(rnd["revision"]["restored"])})
        attempt = record["rounds"][-1].get("revision_attempt")
        if attempt:
            rows.append({"dataset": name, "target": attempt["target"], "restored": bool(attempt["restored"])})
revisions = pd.DataFrame(rows, columns=["dataset", "target", "restored"])
if len(revisions):
    show(revisions.groupby(["dataset", "target"]).agg(revisions=("restored", "size"), restored=("restored", "sum"))
         .reset_index(), caption="Revision calls by target dimension")
else:
    print("no revision call in this sample")

# %% [markdown]
# ## What could sequential revision buy? The oracle best single hypothesis
#
# Each of FHS's round-1 hypotheses is scored alone (its own renderings fused, then
# $\widetilde S + \beta v_j$ with its own verdicts), and an oracle picks, per fact, the
# one that ranks the gold best. That is perfect selection among hypotheses FHS already
# has: if even that buys little over FHS's consensus, a loop that spends its rounds
# choosing which hypothesis to revise has little to gain (Section 4.5; Table 6's oracle
# row: Recall@1 0.222 against FHS's 0.185).

# %%
METRICS = ["recall@1", "recall@10", "recall@50", "recall@200", "mrr"]
oracle_rows = []
for name in datasets:
    fhs_config = FHSConfig.from_dict(config) if config else FHSConfig()
    oracles = [oracle_best_single(rs, fhs_config) for rs in by_seed[name]]
    oracle = oracles[0]
    variants = {"FHS (round 1)": ("rank_round1", "fhs"), "oracle best single hypothesis": ("rank_oracle", "oracle_best_single"),
                "FHS-Seq (full episode)": ("rank_full", None)}
    for label, (key, paper_row) in variants.items():
        per_run = [summarize([r[key] for r in o]) for o in oracles]
        measured = {m: float(np.mean([v[m] for v in per_run])) for m in METRICS}
        oracle_rows.append({"dataset": name, "list": label,
                            **{m: across([v[m] for v in per_run]) for m in METRICS}})
        if paper_row:
            oracle_rows.append({"dataset": name, "list": f"{label} (paper)",
                                **{m: paper_value(name, paper_row, m) for m in METRICS}})
        slug = {"rank_round1": "round1", "rank_oracle": "oracle_best_single", "rank_full": "full"}[key]
        checked.update({f"{name}/{slug}/{m}": measured[m] for m in METRICS})
    gain = across_differences([paired_difference(o, o, "recall@1", rank_key_a="rank_oracle", rank_key_b="rank_round1",
                                                 **interval) for o in oracles])
    print(f"{name}: oracle minus FHS round 1, Recall@1 {fmt_estimate(gain)}")
show(pd.DataFrame(oracle_rows), caption="Oracle selection among FHS's own hypotheses (paper: Table 6 and Table 4)")

# %% [markdown]
# ## After the selector: FHS-Seq against FHS
#
# The paper reports lower final accuracy for FHS-Seq than for FHS (Table 4). Both final
# lists go through the same listwise selector.

# %%
rows = []
for name in datasets:
    row = {"dataset": name}
    for m in ("recall@1", "mrr", "accuracy"):
        row[f"Δ {m}"] = across_differences([paired_difference(seq.records, fhs.records, m, **interval)
                                            for seq, fhs in zip(seq_groups[name], fhs_groups[name])])
    for label, group in (("fhs", fhs_groups[name]), ("fhs-seq", seq_groups[name])):
        accuracy = [run.metrics.get("accuracy") for run in group]
        row[f"{label} accuracy"] = across(accuracy) if None not in accuracy else None
    rows.append(row)
    seq_accuracy = row["fhs-seq accuracy"]
    checked[f"{name}/fhs-seq/accuracy"] = seq_accuracy.value if seq_accuracy is not None else None
show(pd.DataFrame(rows), caption="FHS-Seq minus FHS, paired per fact (95% context-clustered interval)")

# %% [markdown]
# ## What it costs
#
# Model calls per fact before the selector (the design allows 4 to 19), with the tokens
# the calls read and wrote. Re-verifying an unchanged hypothesis over an unchanged window
# is the same request, served by the response cache: the "cached" column counts those.

# %%
cost = []
for name in datasets:
    recs = [r for run in seq_groups[name] for r in run.records]  # every seeded run: per-fact means over runs
    n = max(len(recs), 1)
    calls = [[c for c in r["llm_calls"] if c["purpose"] != "selector"] for r in recs]
    totals = call_totals(recs)
    cost.append({"dataset": name, "calls / fact": sum(map(len, calls)) / n,
                 "min": min(map(len, calls), default=0), "max": max(map(len, calls), default=0),
                 "served by the cache": sum(c["cached"] for cs in calls for c in cs) / n,
                 "tokens in / fact": totals["tokens_in"] / n, "tokens out / fact": totals["tokens_out"] / n,
                 "model seconds / fact": totals["recorded_seconds"] / n})
    checked[f"{name}/fhs-seq/calls_per_fact"] = sum(map(len, calls)) / n
show(pd.DataFrame(cost), caption=f"FHS-Seq cost per fact with {display_name(choice.model)}, selector excluded")

# %% [markdown]
# ## Check against recorded values

# %%
fingerprints = study.input_fingerprints({name: study.facts(name, llm=True) for name in datasets}, choice)
report = check({k: v for k, v in checked.items() if v is not None}, chapter="06_fhs_seq", profile=profile,
               save=not protocol_check, inputs=fingerprints)
if protocol_check:
    print(f"PROTOCOL CHECK: {len(checked)} metrics produced; not compared with recorded values.")
else:
    report.assert_ok()

# %% tags=["remove-input"]
print(f"page time: {time.perf_counter() - page_started:.0f} s (profile {profile}; "
      "the Provenance page lists every chapter's time)")
