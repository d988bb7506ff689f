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
# # Main results: FHS against direct and one-pass structured grounding
#
# Tables 4 and 5 of the paper compare FHS with the baselines on the financial tagging
# benchmark and on CodiEsp. FHS wins at the head of the ranking: Recall@1 0.185 against
# 0.041 for direct retrieval on FinTagging, 0.264 against 0.201 for the strongest
# baseline (one-pass structured grounding) on CodiEsp, with final accuracy after the
# shared listwise selector of 0.255 and 0.330.
#
# This chapter runs three rows of those tables through one code path:
#
# * **direct**: the raw serialized fact is the query (no model call before the selector);
# * **structured**: one factorized hypothesis, greedy, rendered into a label-style and a
#   definition-style query, fused, no verifier (1 call);
# * **FHS**: J = 2 hypotheses sampled at T = 0.8, every rendering retrieved and fused
#   with summed RRF, a dimension-level verifier over a profile-diverse window, and
#   $\widetilde S + \beta\,\bar v$ with $\beta = 0.6$ (2 + 2 calls).
#
# Every method's final list then goes through the same listwise selector, whose top-1
# is "Acc.". Recall and MRR are measured before the selector.

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper (fhs/profiles.py)
runs_dir = "runs"  # where run records are cached
datasets = ["fincl", "codiesp"]  # add "ixbrl" on a GPU box
llm_limit = None  # facts per dataset (a context-level sample); None takes the profile size
backend = None  # llama_cpp, openai or vllm; None takes the profile backend
model = None  # None takes the profile model
base_url = None  # OpenAI-compatible server(s), comma-separated; None takes the profile URL
runs = 1  # seeded runs per method (the paper: 3)
seed = 20260724  # bootstrap seed
bootstrap_resamples = 2000
cache_dir = ".fhs-cache"  # every model call is cached here; a rebuild replays it
relocation_documents = 6  # CodiEsp documents relocated by the LLM relocator for the comparison
protocol_check = False  # True: a tiny-sample run of the protocol, not numbers to compare or record

# %% [markdown]
# The model, the sample and every FHS knob come from the profile; each call goes through
# a persistent response cache, so re-executing this page replays the calls.

# %%
import random
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fhs.check import check
from fhs.datadir import data_dir
from fhs.datasets.codiesp import load_split
from fhs.evaluate import paired_difference
from fhs.experiment import ModelChoice
from fhs.models import display_name
from fhs.paper import paper_value
from fhs.profiles import get_profile
from fhs.relocate import LLMRelocator
from fhs.report import Estimate, NEUTRAL_COLOR, ORACLE_COLOR, OURS_COLOR, profile_note, show, use_style
from fhs.runner import call_totals
from fhs.sampling import sample_by_context
from fhs.study import Study

use_style()
study = Study.for_profile(profile, runs_dir, progress=False)
if llm_limit is not None:
    study.profile = replace(study.profile, llm_facts=int(llm_limit))
choices = [ModelChoice.resolve(profile, backend=backend, model=model,
                               base_urls=base_url.split(",") if base_url else None,
                               seed=s, cache=Path(cache_dir) / "responses.sqlite") for s in range(runs)]
METHODS = ["direct", "structured", "fhs"]
METRICS = ["recall@1", "recall@10", "recall@50", "recall@200", "mrr", "accuracy"]
interval = dict(resamples=bootstrap_resamples, seed=seed)
profile_note(profile, display_name(choices[0].model))
if protocol_check:
    print(f"PROTOCOL CHECK: profile {profile} with {choices[0].model} on a tiny sample; these are not "
          "paper numbers and are neither compared with nor recorded as this profile's values.")

# %% [markdown]
# ## The runs
#
# Each method runs on the same facts: the profile's context-level sample of each test
# set (whole tables or documents, so a context's facts stay together).

# %%
results = {}
for name in datasets:
    for method in METHODS:
        results[(name, method)] = [study.run_llm(name, method, choice) for choice in choices]
sizes = {name: len(results[(name, "fhs")][0].records) for name in datasets}
print("facts per dataset:", sizes, "| model:", choices[0].model, "| seeded runs:", runs)

# %% [markdown]
# ## Tables 4 and 5
#
# Our value is the mean over seeded runs with a 95% context-clustered bootstrap interval
# of the first run; the paper's value sits below it. The paper's numbers come from
# Qwen3-32B on the full test splits (2,509 FinTagging facts, 3,144 CodiEsp facts).

# %%
def mean_metric(runs_, metric):
    values = [r.metrics.get(metric) for r in runs_ if r.metrics.get(metric) is not None]
    return float(np.mean(values)) if values else None


rows = []
for name in datasets:
    for method in METHODS:
        runs_ = results[(name, method)]
        row = {"dataset": name, "method": method, "facts": len(runs_[0].records)}
        for m in METRICS:
            ci = runs_[0].interval(m, **interval)
            row[m] = Estimate(mean_metric(runs_, m), ci.low, ci.high)
        rows.append(row)
        rows.append({"dataset": name, "method": f"{method} (paper)",
                     "facts": paper_value(name, method, "facts"),
                     **{m: paper_value(name, method, m) for m in METRICS}})
main_table = pd.DataFrame(rows)
show(main_table, caption="Tables 4 and 5: ours (95% interval) and the paper's")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets), 3.2), sharey=True, layout="constrained")
axes = np.atleast_1d(axes)
for ax, name in zip(axes, datasets):
    x = np.arange(len(METHODS))
    for offset, metric, color in ((-0.2, "recall@1", OURS_COLOR), (0.0, "mrr", NEUTRAL_COLOR),
                                  (0.2, "accuracy", ORACLE_COLOR)):
        ours = [mean_metric(results[(name, m)], metric) or 0.0 for m in METHODS]
        ax.bar(x + offset, ours, width=0.2, color=color, label=metric)
        paper = [paper_value(name, m, metric) for m in METHODS]
        ax.scatter(x + offset, [p if p is not None else np.nan for p in paper], marker="_", s=300,
                   color="black", zorder=3, label="paper" if metric == "recall@1" else None)
    ax.set_xticks(x, METHODS)
    ax.set_title(name)
axes[0].set_ylabel("score")
axes[0].legend(fontsize=8)
fig.suptitle("Head-of-list metrics per method (bars: ours; black ticks: the paper)")
plt.show()

# %% [markdown]
# ## FHS minus each baseline
#
# The paper's claims are differences at the head of the list. Each difference is paired
# per fact and bootstrapped by context, so an interval that crosses zero means this
# sample cannot separate the two methods.

# %%
contrasts = []
for name in datasets:
    fhs_run = results[(name, "fhs")][0]
    for baseline in ("direct", "structured"):
        base_run = results[(name, baseline)][0]
        row = {"dataset": name, "contrast": f"fhs - {baseline}"}
        for m in ("recall@1", "recall@10", "mrr", "accuracy"):
            d = paired_difference(fhs_run.records, base_run.records, m, **interval)
            row[m] = Estimate(d.estimate, d.low, d.high)
        contrasts.append(row)
show(pd.DataFrame(contrasts), caption="Paired differences, 95% context-clustered bootstrap")

# %% [markdown]
# ## Tables and text are not equally hard
#
# A narrative sentence often names its concept; a table cell's meaning is spread over
# its row and column headers. The paper's direct accuracy is 0.339 on text against 0.117
# on tables, and FHS gains most on tables (+0.129 accuracy).

# %%
split = []
for name in datasets:
    for method in METHODS:
        for modality, block in results[(name, method)][0].metrics["by_modality"].items():
            split.append({"dataset": name, "method": method, "modality": modality, "facts": block["n_facts"],
                          "recall@1": block["recall@1"], "mrr": block["mrr"], "accuracy": block.get("accuracy")})
show(pd.DataFrame(split), caption="Per-modality results (first run)")

# %% [markdown]
# ## What it costs
#
# Model calls per fact include the selector; tokens and seconds are what the calls took
# when they were made (a cached replay costs nothing, but the table reports the
# original cost). The paper's FHS makes 4 calls per fact before the selector.

# %%
cost = []
for name in datasets:
    for method in METHODS:
        records = results[(name, method)][0].records
        totals = call_totals(records)
        n = max(len(records), 1)
        calls = totals["llm_calls"] + totals["cache_hits"]
        cost.append({"dataset": name, "method": method, "calls / fact": calls / n,
                     "tokens in / fact": totals["tokens_in"] / n, "tokens out / fact": totals["tokens_out"] / n,
                     "model seconds / fact": totals["recorded_seconds"] / n})
cost = pd.DataFrame(cost)
show(cost, caption=f"Cost per fact with {display_name(choices[0].model)} ({choices[0].backend})")

# %% [markdown]
# ## One fact, stage by stage
#
# The viewer below follows one fact through FHS (a table fact whose gold concept reached
# the verifier's window, when the sample has one): the two sampled
# hypotheses (UNRESOLVED dimensions left blank), the queries they render, the
# verifier's window with each candidate's verdicts and consensus support $\bar v$, and
# where the gold concept ends up.

# %%
SYMBOL = {"support": "+", "contradict": "-", "abstain": "."}


def verdict_string(entry):
    """F+ R+ E- Q. S. T. : one symbol per dimension (support, contradict, abstain)."""
    return " ".join(f"{dim[0]}{SYMBOL.get(value, '?')}" for dim, value in entry.items()) if entry else "not judged"


def show_fact(record, taxonomy):
    dims = pd.DataFrame([{**h["dimensions"], "retrieval_query": h["retrieval_query"], "source": h["source"]}
                         for h in record["hypotheses"]])
    show(dims, caption=f"Hypotheses for fact {record['id']} (gold: {', '.join(record['gold'])})")
    show(pd.DataFrame(record["queries"]), caption="Rendered queries (each retrieved to depth 200)")
    verifier = record.get("verifier")
    if verifier:
        window = []
        for cid in verifier["window"]["ids"]:
            row = {"candidate": cid, "gold": "yes" if cid in record["gold"] else "",
                   "pool rank": record["pool"]["ids"].index(cid) + 1,
                   "final rank": record["ranking"].index(cid) + 1 if cid in record["ranking"] else None}
            for j, verdicts in enumerate(verifier["verdicts"], start=1):
                row[f"h{j}"] = verdict_string(verdicts["entries"].get(cid)) if verdicts["asked"] else "not asked"
            row["v̄"] = verifier["vbar"].get(cid)
            window.append(row)
        show(pd.DataFrame(window), caption="Verifier window: verdicts per dimension, consensus support, ranks")
    print("gold rank after fusion:", next((i + 1 for i, c in enumerate(record["pool"]["ids"]) if c in record["gold"]), None),
          "| after the verifier:", record["rank"], "| selector chose:", record.get("selected"),
          "(correct)" if record.get("correct") else "")


def interest(record):
    """Prefer a table fact whose gold concept reached the verifier's window, then the fused pool."""
    window = record["verifier"]["window"]["ids"] if record.get("verifier") else []
    in_pool = any(g in record["pool"]["ids"] for g in record["gold"])
    return (any(g in window for g in record["gold"]), in_pool, record["modality"] == "table")


example_name = datasets[0]
fhs_records = results[(example_name, "fhs")][0].records
example = max(fhs_records, key=interest)
show_fact(example, study.experiment(example_name).taxonomy)

# %% [markdown]
# How discriminating are the verdicts? The verifier can only reorder candidates when it
# tells them apart: a model that supports every candidate on every dimension gives
# every candidate the same $\bar v$, and Eq. 3 leaves the fused order unchanged. The paper
# reports that Qwen3-32B left about one dimension in seven unresolved.

# %%
shares = []
for name in datasets:
    counts = {"support": 0, "contradict": 0, "abstain": 0}
    for record in results[(name, "fhs")][0].records:
        for verdicts in (record.get("verifier") or {}).get("verdicts", []):
            for entry in verdicts["entries"].values():
                for value in entry.values():
                    counts[value] = counts.get(value, 0) + 1
    total = max(sum(counts.values()), 1)
    shares.append({"dataset": name, "verdicts": total, **{k: v / total for k, v in counts.items()}})
show(pd.DataFrame(shares), caption="Share of the verifier's dimension verdicts (first run)")

# %% [markdown]
# ## CodiEsp relocation: the deterministic relocator and the LLM relocator
#
# The paper asks its model to copy the English phrase that matches each Spanish mention
# and keeps only exact substrings. We run that LLM relocator with this profile's model on
# a seeded sample of test documents, beside the deterministic relocator (no model) used
# for the facts above.

# %%
relocation = {}
if "codiesp" in datasets:
    taxonomy = study.experiment("codiesp").taxonomy
    all_docs = sorted({f.context_id for f in load_split(data_dir(study.data), taxonomy).all_facts})
    random.Random(seed).shuffle(all_docs)
    sample_docs = set(all_docs[:relocation_documents])
    deterministic = load_split(data_dir(study.data), taxonomy, documents=sample_docs)
    with_llm = load_split(data_dir(study.data), taxonomy, documents=sample_docs,
                          relocator=LLMRelocator(choices[0].llm()))
    relocation = {"deterministic": deterministic.stats["exact"] / deterministic.stats["facts"],
                  "llm": with_llm.stats["exact"] / with_llm.stats["facts"]}
    show(pd.DataFrame([{"relocator": k, "documents": len(sample_docs), "mentions": deterministic.stats["facts"],
                        "exact relocations": v} for k, v in relocation.items()]),
         caption="Share of mentions relocated to an exact English substring (paper: 3,144 of 3,431 = 0.916)")

# %% [markdown]
# ## Check against recorded values
#
# LLM outputs are replayed from the cache, so on the same machine these numbers repeat
# exactly; across machines llama.cpp's arithmetic may differ slightly, hence the tolerance.

# %%
checked = {}
for name in datasets:
    checked[f"{name}/facts"] = sizes[name]
    for method in METHODS:
        for m in METRICS:
            value = mean_metric(results[(name, method)], m)
            if value is not None:
                checked[f"{name}/{method}/{m}"] = value
        checked[f"{name}/{method}/calls_per_fact"] = float(
            cost[(cost.dataset == name) & (cost.method == method)]["calls / fact"].iloc[0])
for relocator, rate in relocation.items():
    checked[f"codiesp/relocation/{relocator}"] = rate
report = check(checked, chapter="02_main_results", profile=profile, save=not protocol_check)
if protocol_check:
    print(f"PROTOCOL CHECK: {len(checked)} metrics produced; not compared with recorded values.")
else:
    report.assert_ok()
