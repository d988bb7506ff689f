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
# FHS-Seq (Section 4.5) is the natural agentic alternative to FHS's one parallel fan: a
# sequential loop that keeps every part of FHS and revises one dimension of its hypothesis
# per round from what retrieval and the verifier returned. Its round 1 is FHS, so round 1
# against the full episode isolates what the later rounds add. The paper's answer (Table 20,
# Appendix F.1): they replace 13.8% of the top-50 pool and move Recall@50 by −0.006
# [−0.016, +0.002]; they change the pool without improving it.

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper | gpu-sample | paper-full (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached; a rebuild reads them back
datasets = ["fincl"]  # built-in names or spec files (the paper's Table 20 is on its financial benchmark)
server = {}  # backend, model, base_url, max_in_flight, thinking, replay, cache_dir; {} takes the profile's
sample = {}  # llm_limit, llm_fraction, runs, seed, bootstrap_resamples, protocol_check (fhs/book/page.py)

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import pandas as pd

from fhs.book.chapters import fhs_seq
from fhs.book.chapters.main_lead import protocol_run
from fhs.book.page import open_page
from fhs.book.report import fmt_estimate, profile_note, show, show_notes, use_style
from fhs.book.sampled import Sampled, ran_line
from fhs.llm.models import display_name
from fhs.method.config import FHSConfig
from fhs.method.fhs_seq import STOP_REASONS
from fhs.run.tables import seq_diagnostics

use_style()
page = open_page("06_fhs_seq", profile, runs_dir, server=server, sample=sample)
study, choice, choices, seeds, interval = page.study, page.choice, page.choices, page.seeds, page.interval
datasets = [study.dataset_name(name) for name in datasets]  # a spec file is read once, then goes by its name
sampled = Sampled(protocol_run(choice.backend))  # a CPU model's few facts: the tables after Table 20 fold
profile_note(profile, display_name(choice.model),
             facts={name: len(study.facts(name, llm=True)) for name in datasets}, seeds=seeds)

# %% tags=["hide-input"]
seq_groups = {name: [study.run_llm(name, "fhs-seq", c) for c in choices] for name in datasets}
fhs_groups = {name: [study.run_llm(name, "fhs", c) for c in choices] for name in datasets}
by_seed = {name: [seq_diagnostics.with_round_ranks(run.records) for run in seq_groups[name]] for name in datasets}
# Shares (rounds, stopping reasons, revisions) pool the seeded runs: every run holds the same
# facts, so a pooled share is the mean of the runs' shares. Table 20 is computed per run.
records = {name: [r for recs in by_seed[name] for r in recs] for name in datasets}
config = seq_groups[datasets[0]][0].metrics.get("config", {}).get("fhs")
sampled.say(", ".join(f"{name}: {len(by_seed[name][0])} facts" for name in datasets)
            + f" | model: {choice.model} | seeded runs: {len(seeds)}")

# %% [markdown]
# ## Table 20: does the loop improve on its own first round?
#
# Recall@50 after round 1 and after the full episode, their paired difference with a
# 95% context-clustered bootstrap interval, and how much of the top-50 pool the later
# rounds replace (averaged over all facts; a fact that stops after round 1 replaces
# nothing).

# %% tags=["hide-input"]
checked = {}
for name in datasets:
    table, note, values = fhs_seq.table20(name, by_seed[name], interval)
    show(table, caption=f"Table 20 on {name} ({len(by_seed[name][0])} facts): ours with 95% context-clustered "
                        f"intervals{note}")
    checked.update(values)
sampled.lead(["rounds and stops", "revisions", "the oracle", "the selector", "the cost"])

# %% [markdown]
# ## The loop
#
# FHS-Seq keeps every part of FHS (generator, renderer, retriever, fusion, verifier) and
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
# In the paper the gold never enters the pool for 0.298 of facts, and perfect selection
# among FHS's own hypotheses would buy little (Table 6's oracle row).
#
# This page shows the paper's variant: the verifier-scored list after the last round is
# the final list, and unjudged candidates get the mean support (as in FHS). The authors'
# code differs in both (zero fill, and the plain re-fusion as the final list); those are
# the options `seq_fill="zero"` and `seq_final="refusion"` (see `book/deviations.md`).

# %% [markdown]
# ## The runs
#
# The facts are the same context-level sample as the main-results chapter, and the
# response cache is shared with it: FHS-Seq's round 1 asks exactly FHS's questions, so its
# two generator calls and its round-1 verifier calls replay FHS's answers.
#
# Round 1 is FHS: with the same sample, seed and cache, FHS-Seq's round-1 list should be
# FHS's final list fact by fact.

# %%
for name in datasets:
    sampled.say(f"{name}: round-1 list identical to FHS's final list for "
                f"{fhs_seq.round1_is_fhs(by_seed[name], fhs_groups[name]):.0%} of facts (every seeded run)")

# %% [markdown]
# ## How many rounds, and why the loop stopped
#
# The loop stops when no dimension is net-unsupported, at the four-round budget, or when
# a revision cannot be used (it did not parse, or left its target unchanged). The paper
# reports 0.733 of facts using all four rounds and 0.174 stopping after round 1, every
# early stop being for lack of an unsupported dimension.

# %% tags=["hide-input"]
if sampled.protocol:
    show_notes(["The rounds figure is drawn under the paper and gpu-sample profiles; on this sample the stopping "
                "reasons are in the folded block."])
else:
    fhs_seq.rounds_figure(records, STOP_REASONS)
    plt.show()

# %%
rows, values = fhs_seq.stop_rows(records)
checked.update(values)
sampled.show(pd.DataFrame(rows), "Stopping reasons")

# %% [markdown]
# Which dimensions did the loop revise, and did the model keep to its one dimension?
# `restored` counts revisions where another dimension changed and was put back.

# %%
revisions = fhs_seq.revisions_frame(records)
if len(revisions):
    sampled.show(revisions, "Revision calls by target dimension")
else:
    sampled.say("no revision call in this sample")

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
oracle_rows = []
for name in datasets:
    rows, values, gain = fhs_seq.oracle_rows(name, by_seed[name],
                                             FHSConfig.from_dict(config) if config else FHSConfig(), interval)
    oracle_rows += rows
    checked.update(values)
    sampled.say(f"{name}: oracle minus FHS round 1, Recall@1 {fmt_estimate(gain)}")
sampled.show(pd.DataFrame(oracle_rows), "Oracle selection among FHS's own hypotheses (paper: Table 6 and Table 4)")

# %% [markdown]
# ## After the selector: FHS-Seq against FHS
#
# The paper reports lower final accuracy for FHS-Seq than for FHS (Table 4). Both final
# lists go through the same listwise selector.

# %%
rows = [fhs_seq.selector_row(name, seq_groups[name], fhs_groups[name], interval) for name in datasets]
for row in rows:
    accuracy = row["fhs-seq accuracy"]
    checked[f"{row['dataset']}/fhs-seq/accuracy"] = accuracy.value if accuracy is not None else None
sampled.show(pd.DataFrame(rows), "FHS-Seq minus FHS, paired per fact (95% context-clustered interval)")

# %% [markdown]
# ## What it costs
#
# Model calls per fact before the selector (the design allows 4 to 19), with the tokens
# the calls read and wrote. Re-verifying an unchanged hypothesis over an unchanged window
# is the same request, served by the response cache: the "cached" column counts those.

# %%
cost = [fhs_seq.cost_row(name, seq_groups[name]) for name in datasets]
checked.update({f"{row['dataset']}/fhs-seq/calls_per_fact": row["calls / fact"] for row in cost})
sampled.show(pd.DataFrame(cost), f"FHS-Seq cost per fact with {display_name(choice.model)}, selector excluded")
sampled.fold(ran_line([run for group in seq_groups.values() for run in group], "FHS-Seq"))

# %% [markdown]
# ## Check against recorded values

# %%
fingerprints = study.input_fingerprints({name: study.facts(name, llm=True) for name in datasets}, choice)
page.close({k: v for k, v in checked.items() if v is not None}, inputs=fingerprints)
