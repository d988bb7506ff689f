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
profile = "cpu"  # smoke | cpu | paper | gpu-sample | paper-full (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached; a rebuild reads them back
datasets = ["fincl"]  # built-in names or spec files (the paper's Table 20 is on its financial benchmark)
server = {}  # backend, model, base_url, max_in_flight, thinking, replay, cache_dir; {} takes the profile's
sample = {}  # llm_limit, llm_fraction, runs, seed, bootstrap_resamples, protocol_check (fhs/book/page.py)

# %% [markdown]
# The facts are the same context-level sample as the main-results chapter, and the
# response cache is shared with it: FHS-Seq's round 1 asks exactly FHS's questions, so its
# two generator calls and its round-1 verifier calls replay FHS's answers.

# %% tags=["hide-input"]
import matplotlib.pyplot as plt
import pandas as pd

from fhs.book.chapters import fhs_seq
from fhs.book.page import open_page
from fhs.book.report import fmt_estimate, profile_note, show, use_style
from fhs.llm.models import display_name
from fhs.method.config import FHSConfig
from fhs.method.fhs_seq import STOP_REASONS
from fhs.run.tables import seq_diagnostics

use_style()
page = open_page("06_fhs_seq", profile, runs_dir, server=server, sample=sample)
study, choice, choices, seeds, interval = page.study, page.choice, page.choices, page.seeds, page.interval
datasets = [study.dataset_name(name) for name in datasets]  # a spec file is read once, then goes by its name
profile_note(profile, display_name(choice.model),
             facts={name: len(study.facts(name, llm=True)) for name in datasets}, seeds=seeds)

# %% [markdown]
# ## The runs

# %%
seq_groups = {name: [study.run_llm(name, "fhs-seq", c) for c in choices] for name in datasets}
fhs_groups = {name: [study.run_llm(name, "fhs", c) for c in choices] for name in datasets}
by_seed = {name: [seq_diagnostics.with_round_ranks(run.records) for run in seq_groups[name]] for name in datasets}
# Shares (rounds, stopping reasons, revisions) pool the seeded runs: every run holds the same
# facts, so a pooled share is the mean of the runs' shares. Table 20 is computed per run.
records = {name: [r for recs in by_seed[name] for r in recs] for name in datasets}
config = seq_groups[datasets[0]][0].metrics.get("config", {}).get("fhs")
print({name: len(by_seed[name][0]) for name in datasets}, "facts | model:", choice.model,
      "| seeded runs:", len(seeds))

# %% [markdown]
# Round 1 is FHS: with the same sample, seed and cache, FHS-Seq's round-1 list should be
# FHS's final list fact by fact.

# %%
for name in datasets:
    print(f"{name}: round-1 list identical to FHS's final list for "
          f"{fhs_seq.round1_is_fhs(by_seed[name], fhs_groups[name]):.0%} of facts (every seeded run)")

# %% [markdown]
# ## Table 20: does the loop improve on its own first round?
#
# Recall@50 after round 1 and after the full episode, their paired difference with a
# 95% context-clustered bootstrap interval, and how much of the top-50 pool the later
# rounds replace (averaged over all facts; a fact that stops after round 1 replaces
# nothing).

# %%
checked = {}
for name in datasets:
    table, note, values = fhs_seq.table20(name, by_seed[name], interval)
    show(table, caption=f"Table 20 on {name} ({len(by_seed[name][0])} facts): ours with 95% context-clustered "
                        f"intervals{note}")
    checked.update(values)

# %% [markdown]
# ## How many rounds, and why the loop stopped
#
# The loop stops when no dimension is net-unsupported, at the four-round budget, or when
# a revision cannot be used (it did not parse, or left its target unchanged). The paper
# reports 0.733 of facts using all four rounds and 0.174 stopping after round 1, every
# early stop being for lack of an unsupported dimension.

# %% tags=["hide-input"]
fhs_seq.rounds_figure(records, STOP_REASONS)
plt.show()

# %%
rows, values = fhs_seq.stop_rows(records)
checked.update(values)
show(pd.DataFrame(rows), caption="Stopping reasons")

# %% [markdown]
# Which dimensions did the loop revise, and did the model keep to its one dimension?
# `restored` counts revisions where another dimension changed and was put back.

# %%
revisions = fhs_seq.revisions_frame(records)
if len(revisions):
    show(revisions, caption="Revision calls by target dimension")
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
oracle_rows = []
for name in datasets:
    rows, values, gain = fhs_seq.oracle_rows(name, by_seed[name],
                                             FHSConfig.from_dict(config) if config else FHSConfig(), interval)
    oracle_rows += rows
    checked.update(values)
    print(f"{name}: oracle minus FHS round 1, Recall@1 {fmt_estimate(gain)}")
show(pd.DataFrame(oracle_rows), caption="Oracle selection among FHS's own hypotheses (paper: Table 6 and Table 4)")

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
show(pd.DataFrame(rows), caption="FHS-Seq minus FHS, paired per fact (95% context-clustered interval)")

# %% [markdown]
# ## What it costs
#
# Model calls per fact before the selector (the design allows 4 to 19), with the tokens
# the calls read and wrote. Re-verifying an unchanged hypothesis over an unchanged window
# is the same request, served by the response cache: the "cached" column counts those.

# %%
cost = [fhs_seq.cost_row(name, seq_groups[name]) for name in datasets]
checked.update({f"{row['dataset']}/fhs-seq/calls_per_fact": row["calls / fact"] for row in cost})
show(pd.DataFrame(cost), caption=f"FHS-Seq cost per fact with {display_name(choice.model)}, selector excluded")

# %% [markdown]
# ## Check against recorded values

# %%
fingerprints = study.input_fingerprints({name: study.facts(name, llm=True) for name in datasets}, choice)
page.close({k: v for k, v in checked.items() if v is not None}, inputs=fingerprints)
