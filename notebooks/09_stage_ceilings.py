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
# # What FHS can do with a perfect model
#
# The gold-query probe of chapter 1 asks, at full scale and without a model, how far the
# index reaches once the query names the target. This chapter asks the same of every stage
# FHS hands to a language model: with perfect hypotheses, a perfect verifier and a perfect
# selector, where does the gold end up, and how much noise may they carry before FHS is no
# better than direct retrieval? **This is an analysis tool, not a reproduction**: the
# answers come from an *oracle model* that reads the fact's gold concept, which no run
# profile can select.

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper | gpu-sample | paper-full: the oracle runs alike under every one
runs_dir = "runs"  # where run records are cached; a rebuild reads them back
datasets = ["fincl", "ixbrl", "codiesp"]  # or the path of your dataset spec file (book/adapting.md)
hypothesis_noise = [0.25, 0.5, 0.75, 0.9, 1.0]  # levels P besides 0 (fhs run --oracle-noise, "hypotheses")
verdict_noise = [0.1, 0.25, 0.5, 1.0]  # levels Q besides 0 (fhs run --oracle-noise, "verdicts")
sample = {}  # seed, bootstrap_resamples (fhs/book/page.py); {} takes the defaults

# %% tags=["hide-input"]
import time

import matplotlib.pyplot as plt
import pandas as pd

from fhs.book.chapters import stage_ceilings
from fhs.book.page import open_page
from fhs.book.report import profile_note, show, use_style

use_style()
page = open_page("09_stage_ceilings", profile, runs_dir, sample=sample, llm=False)
study, interval = page.study, page.interval
facts = {name: stage_ceilings.oracle_facts(study, name) for name in datasets}
labels = {name: study.dataset_name(name) for name in datasets}  # a spec file's runs go by its name
profile_note(profile, facts={labels[name]: len(used) for name, used in facts.items()})

# %% tags=["hide-input"]
started = time.perf_counter()
runs = stage_ceilings.oracle_runs(study, datasets, facts, hypothesis_noise, verdict_noise)
baselines = {(name, method): study.run(name, method, facts=facts[name])
             for name in datasets for method in ("direct", "oracle")}
rows_by_run = {key: stage_ceilings.stage_rows(run) for key, run in runs.items()}
distinct = {id(run): run for run in runs.values()}.values()  # noise level 0 is one run under two keys
requests = sum(fact["cost"]["calls"] for run in distinct for fact in run.summaries)
tokens = sum(fact["cost"]["tokens_in"] + fact["cost"]["tokens_out"] for run in distinct for fact in run.summaries)
method_seconds = sum(r["seconds"] for key, rows in rows_by_run.items() if key[1] != "verdicts" or key[2] > 0
                     for r in rows)
print(f"{len(distinct)} oracle runs: {requests:,} stage requests answered by the oracle, {tokens} model tokens; "
      f"FHS took {method_seconds / 60:.1f} min over their facts when the records were written.\n"
      f"This page's runs, with {len(baselines)} LLM-free runs beside them: {time.perf_counter() - started:.0f} s "
      "(a rebuild reads the records back).")

# %% [markdown]
# ## Stage ceilings
#
# One noiseless run gives all three ceilings: the gold's rank in the fused pool (perfect
# hypotheses only), in the final order (+ a perfect verifier), and the selector's pick
# (+ a perfect selector), beside direct retrieval and the gold-query probe on the same facts.

# %% tags=["hide-input"]
stages = {name: rows_by_run[(name, "hypotheses", 0.0)] for name in datasets}
show(stage_ceilings.ceiling_table(study, datasets, baselines, stages, interval),
     caption=stage_ceilings.ceiling_caption(labels.values()))

# %% tags=["hide-input"]
print("\n".join(stage_ceilings.ceiling_lines(labels, stages, baselines)))

# %% [markdown]
# Without the verifier, Eq. 3 is the pool's order. Beside a dataset that stands for one of
# the paper's benchmarks, the paper's FHS row (Qwen3-32B) follows; intervals are 95%
# context-clustered bootstraps.
#
# How to read the rows above. The selector's ceiling is Recall@200 of the final list, the
# reach of retrieval and fusion: a perfect selector picks whatever the pool holds. Where the
# pool's Recall@1 sits well below the probe's although its definition query *is* the probe's
# text, the label form is why: table facts also issue a label-style query rendered from the
# oracle's category names, which can be generic, and summed RRF gives its ranking as much
# weight as the definition form's, so concepts that match the generic label can climb above
# the gold. Text facts issue the definition form only. The verifier can recover part of such
# a loss, not all of it: the gold agrees with itself on every profiled dimension, but so does
# every candidate that shares its profile. The lines above give each dataset's own numbers.

# %% [markdown] tags=["needs-fincl", "needs-codiesp"]
# On the paper's datasets the label form is what costs Recall@1: US-GAAP's category names
# such as "liabilities, current" are generic, while CodiEsp's text facts issue the
# definition form only and their pool stays near the probe. A model's own ROLE and EVENT
# values would make the label form more specific, so on US-GAAP this row is a floor for
# hypotheses as precise as the domain's profiles, not for a perfect reader.

# %% [markdown]
# ## What the oracle knows
#
# The paper's evidence for FHS needs Qwen3-32B on a GPU; on a CPU the book can show the
# LLM methods only on a few facts with a tiny model, so this chapter's rows are what the
# architecture allows at full scale. The oracle is `fhs run --backend oracle`
# (`fhs/llm/oracle.py`); no reported result of the other chapters comes from it. It
# separates what the method's architecture can do from what a given model does.
#
# As the paper states for its probe, here is exactly what each stage is told. "Gold"
# is the fact's first gold concept in the taxonomy.
#
# - **Hypotheses.** On each of the six dimensions, the gold's categories on the domain's
#   category profile of the same name (`fhs/data/domains/*.yaml`, the vocabularies the
#   verifier's window uses), or `UNRESOLVED` where it has none: a dimension the domain
#   profiles no category on stays `UNRESOLVED`. The definition-style query is the gold's
#   **label and definition**, the probe's text; the oracle never copies the id. All J = 2
#   samples are the same.
# - **Verifier.** For each candidate in the window and each dimension: *support* where the
#   candidate's categories equal the gold's, *abstain* where both have none, *contradict*
#   otherwise, whatever the hypothesis shown says.
# - **Selector.** The gold if it is in the list shown (up to 200 candidates, the paper's
#   setting), else the list's first candidate, the method's own top.
#
# Everything else is the deployed FHS of the other chapters: the paper's configuration,
# BM25 with the coverage term, RRF fusion, the profile-diverse window, mean fill,
# β = 0.6. The oracle runs at the `paper` profile's sample sizes whatever the book's
# profile: every fact of a dataset spec, and the built-in datasets' samples of that profile.

# %% [markdown] tags=["needs-fincl", "needs-ixbrl", "needs-codiesp"]
# On the paper's datasets: US-GAAP profiles no ROLE or EVENT, so those stay `UNRESOLVED`
# there; ICD-10-CM's FAMILY is the code's chapter number; the CodiEsp probe leads with the
# code, which the oracle's query does not. It runs on every FinCL fact, the iXBRL test
# facts the `paper` profile samples, and every CodiEsp mention our relocator placed.

# %% [markdown]
# ## How much noise FHS tolerates
#
# Hypothesis noise P replaces each dimension value, with probability P, by another of the
# domain's values or `UNRESOLVED`, and replaces the definition query, with the same
# probability, by the label and definition of another concept of the fact's datatype;
# the verdicts stay perfect. Verdict noise Q flips each support or contradict verdict
# with probability Q (abstentions stay); the hypotheses stay perfect. Draws are seeded
# and nested: whatever is corrupted at one level is corrupted, the same way, at every
# higher one. Dashed lines are direct retrieval; dotted ones the fused pool alone, which
# verdict noise leaves as it is.

# %% tags=["hide-input"]
frames = {(label, kind): stage_ceilings.curves(rows_by_run, name, kind) for name, label in labels.items()
          for kind in ("hypotheses", "verdicts")}
direct = {label: baselines[(name, "direct")].metrics for name, label in labels.items()}
stage_ceilings.noise_figure(frames, direct, list(labels.values()))
plt.show()

# %%
crossings = stage_ceilings.crossing_rows(frames, direct)
show(crossings, caption="The noise level at which FHS falls to direct retrieval (linear between measured levels; "
                        "empty: it stays above)")

# %% tags=["hide-input"]
print("\n".join(stage_ceilings.crossing_lines(crossings)))

# %% [markdown]
# Hypothesis noise corrupts each item independently, so at P the share of hypotheses whose
# definition query still names the gold is 1 − P, and both samples miss it with probability
# P². The verdicts are perfect on those curves and only reorder the pool, so where the gold
# has left the pool no verifier brings it back: the fused pool's reach bounds every later
# stage. Verdict noise is the harsher test. The verifier adds β·v̄ to scores that fusion
# has range-normalised to [0, 1], so a handful of flipped verdicts can lift a wrong
# candidate over the gold; where the verifier "stops helping" above, FHS with noisy
# verdicts ranks worse than the same hypotheses without any verifier.

# %% [markdown]
# ## Check against recorded values
#
# The oracle and retrieval are deterministic for a seed, so every number above is
# compared with the value recorded in `fhs/book/regressions/09_stage_ceilings.yaml` to four
# decimals; a user's dataset spec gets its own values (NEW) the first time.

# %%
results = stage_ceilings.stage_ceiling_metrics(labels, stages, baselines, frames)
page.close(results, inputs=study.input_fingerprints({labels[name]: used for name, used in facts.items()}))
