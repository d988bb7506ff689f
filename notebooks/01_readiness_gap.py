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
# # The retrieval-readiness gap
#
# The paper's first claim needs no language model at all. Serialize a located fact as
# it stands (value, datatype, visible context) and use it as a BM25 query: the gold
# concept is usually *reachable* (inside the top 200) but badly *placed* (rarely in the
# top 10). Replace that query with the gold concept's own label and definition and the
# same index returns the target at the head of the list for nearly every fact. The
# missing piece is the query, not the index (Section 3.3, Table 1's raw row, and the
# gold-query probe of Appendix E.1).
#
# This chapter measures both ends of that gap on three datasets, then looks at the one
# index component every method shares, the label-coverage term of Eq. 6 (Table 13).

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached; a rebuild reads them back
datasets = ["fincl", "ixbrl", "codiesp"]
bootstrap_resamples = 2000  # the paper's context-clustered bootstrap
seed = 20260724  # the bootstrap seed the authors used
retrieval_limit = None  # facts per dataset (a context-level sample); None takes the profile size
protocol_check = False  # True: a tiny-sample run of the protocol, not numbers to compare or record

# %% tags=["remove-cell"]
import time

page_started = time.perf_counter()  # the page says at its end how long it took

# %% [markdown]
# Everything below calls the `fhs` package; runs are cached under `runs/<profile>/`, so
# re-executing this page costs a few seconds once the records exist.

# %%
from dataclasses import replace

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from fhs.book.check import check
from fhs.book.report import Estimate, ORACLE_COLOR, OURS_COLOR, profile_note, show, use_style
from fhs.book.study import Study
from fhs.data.datadir import data_dir
from fhs.data.datasets.codiesp import load_split
from fhs.data.datasets.stats import dataset_stats
from fhs.paper import PAPER, RELOCATION as PAPER_RELOCATION, relocation_rate as paper_relocation_rate
from fhs.run.evaluate import by_group, paired_difference, recall_curve

use_style()
study = Study.for_profile(profile, runs_dir, progress=False)  # runs print no progress bars into the page
if retrieval_limit is not None:
    study.profile = replace(study.profile, retrieval_facts=int(retrieval_limit))
if protocol_check:
    print(f"PROTOCOL CHECK: profile {profile} on a tiny sample; these are not paper numbers "
          "and are neither compared with nor recorded as this profile's values.")
METRICS = ["recall@1", "recall@10", "recall@50", "recall@200", "mrr"]
interval = dict(resamples=bootstrap_resamples, seed=seed)
profile_note(profile, facts={name: len(study.facts(name)) for name in datasets})

# %% [markdown]
# ## The data
#
# FinCL is the 500-fact FinTagging evaluation subset (not the paper's 2,509-fact split,
# see {doc}`data`); `ixbrl` holds every us-gaap fact of the SEC filings tagged with the
# 2024 or 2025 taxonomy; CodiEsp holds the test split's diagnosis mentions whose code is
# in our ICD-10-CM inventory, relocated into the English translation by the
# deterministic relocator (no LLM; a later chapter adds the paper's LLM relocator).

# %%
rows = []
for name in datasets:
    experiment = study.experiment(name)
    stats = dataset_stats(study.facts(name))
    rows.append({
        "dataset": name,
        "facts": stats["n_facts"],
        "contexts": stats["n_contexts"],
        "table facts": stats["facts_by_modality"].get("table", 0),
        "text facts": stats["facts_by_modality"].get("text", 0),
        "facts per table": round(stats["facts_per_table_context"]["mean"] or 0, 1),
        "gold concepts": stats["n_gold_concepts"],
        "taxonomy": f"{experiment.taxonomy.name} ({len(experiment.taxonomy):,})",
    })
show(pd.DataFrame(rows), caption="Test data used in this chapter")

# %% [markdown]
# CodiEsp needs one more number. A mention is annotated on the Spanish text; we keep a
# fact for retrieval only when its English span is an exact substring of the aligned
# English sentence. Facts that cannot be relocated still have a gold code, so the oracle
# probe runs on all of them.

# %%
codiesp = load_split(data_dir(study.data), study.experiment("codiesp").taxonomy) if "codiesp" in datasets else None
if codiesp is not None:
    s = codiesp.stats
    relocation_rate = s["exact"] / s["facts"]
    print(f"diagnosis rows in testX.tsv: {s['diagnosis_rows']:,}")
    print(f"codes in the inventory: {s['facts']:,} ({s['facts'] / s['diagnosis_rows']:.1%} of rows)")
    print(f"relocated exactly: {s['exact']:,} ({relocation_rate:.1%}); the paper relocated "
      f"{PAPER_RELOCATION['exact']:,} of {PAPER_RELOCATION['mentions']:,} ({paper_relocation_rate():.1%}) with an LLM")

# %% [markdown]
# ## Raw evidence against the gold query
#
# `direct` issues the raw serialized fact, `<value> <datatype> <visible context>`;
# `oracle` issues the gold concept's label and definition behind the same prefix (on
# CodiEsp the code leads, as in the authors' probe). Both use the deployed index: BM25
# within the fact's datatype plus the label-coverage term with $w_{cov} = 1$.

# %%
direct = {name: study.run(name, "direct") for name in datasets}
oracle = {name: study.run(name, "oracle") for name in datasets}
if codiesp is not None:
    oracle["codiesp"] = study.run("codiesp", "oracle", facts=codiesp.all_facts, tag="all")


def metric_table(runs_by_name, paper_rows):
    frame = []
    for (dataset, method), run in runs_by_name.items():
        row = {"dataset": dataset, "query": method, "facts": len(run.records)}
        for m in METRICS:
            ci = run.interval(m, **interval)
            row[m] = Estimate(ci.estimate, ci.low, ci.high)
        frame.append(row)
        paper = paper_rows.get((dataset, method))
        if paper:
            frame.append({"dataset": dataset, "query": f"{method} (paper)", "facts": paper.get("facts"),
                          **{m: paper.get(m) for m in METRICS}})
    return pd.DataFrame(frame)


paper_rows = {
    ("fincl", "direct"): PAPER["fintagging"]["direct"],
    ("fincl", "oracle"): PAPER["fintagging"]["oracle"],
    ("codiesp", "direct"): PAPER["codiesp"]["direct"],
    ("codiesp", "oracle"): PAPER["codiesp"]["oracle"],
}
table1 = metric_table({(n, m): r for m, group in (("direct", direct), ("oracle", oracle)) for n, r in group.items()},
                      paper_rows)
show(table1, caption="Raw serialized fact vs gold query (95% context-clustered bootstrap intervals)")

# %% [markdown]
# The paper's reading holds here. On FinCL the raw fact reaches the top 200 for about
# two thirds of facts but the top 10 for under a quarter, close to the paper's 24.0%
# and MRR 0.111; the gold query puts every fact in the top 10. The FinCL subset is a
# different sample of the same benchmark, so small differences are expected. Our
# CodiEsp raw queries do better than the paper's: our facts are the ones a
# deterministic relocator could place, which tend to be mentions whose English wording
# is close to the Spanish (and hence to the ICD label), and our inventory and
# definitions differ (FY2021 codes, no alphabetic-index paths).

# %% [markdown]
# Our CodiEsp gold-query probe stays below the paper's R@1 0.998 / MRR 0.999 (R@10 = 1.0
# as in the paper), and the cause is known. Every miss sits at rank 2 or 3 behind a
# sibling code whose longer title is spelled out word for word by the gold code's own
# hierarchy path in the concept text (D61.9 *Aplastic anemia* for D64.9 *Anemia,
# unspecified*, via the block "Aplastic and other anemias ..."), so the label-coverage
# term of Eq. 6 favours the sibling. The authors' index text also lists up to 20
# alphabetic-index entries per code, which the `simple-icd-10-cm` package does not carry;
# they lengthen the query (diluting that advantage) and give the gold code words its
# siblings lack. Without the hierarchy path the probe reaches 0.996 / 0.998, but we keep
# the path because the authors index it. The code-set year plays no part: no miss is a
# tie or a duplicate title. The paper's probe ran on the exactly relocated facts, so both
# sets are shown below (see {doc}`deviations`).

# %%
if codiesp is not None:
    exact_oracle = study.run("codiesp", "oracle")  # the exactly relocated facts
    show(metric_table({("codiesp", "oracle, all mentions"): oracle["codiesp"],
                       ("codiesp", "oracle, exactly relocated"): exact_oracle},
                      {("codiesp", "oracle, exactly relocated"): PAPER["codiesp"]["oracle"]}),
         caption="CodiEsp gold-query probe on all in-inventory mentions and on the exactly relocated set")

# %% [markdown]
# ## Where the gold concept lands
#
# The curve is recall at every depth from 1 to 200: the share of facts whose gold
# concept sits at that rank or better. The distance between the two curves at depth 1 is
# the gap the rest of the book tries to close.

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.4), sharey=True, layout="constrained")
axes = np.atleast_1d(axes)
depth = np.arange(1, 201)
for ax, name in zip(axes, datasets):
    for run, label, color in ((direct[name], "raw fact", OURS_COLOR), (oracle[name], "gold query", ORACLE_COLOR)):
        ax.plot(depth, recall_curve([r["rank"] for r in run.records]), label=label, color=color)
    ax.set_xscale("log")
    ax.set_title(name)
    ax.set_xlabel("depth k")
    for k in (10, 200):
        ax.axvline(k, color="0.8", lw=0.8, zorder=0)
axes[0].set_ylabel("Recall@k")
axes[0].legend(loc="lower right")
fig.suptitle("Reachable but badly placed: recall at every depth, raw fact vs gold query")
plt.show()

# %% [markdown]
# ## The label-coverage term
#
# Eq. 6 adds $w_{cov}\,(|Q\cap L|/|L| + |Q\cap L|/|Q|)$ to the range-normalised BM25
# score, where $L$ is the concept label's token set and $Q$ the query's. Switching it
# off ($w_{cov} = 0$) shows what it is worth for each query form; the paper reports the
# largest Recall@10 gain for raw context (Table 13, Panel A). Differences are paired per
# fact and bootstrapped by context.

# %%
no_cov = {(name, method): study.run(name, method, w_cov=0.0)
          for name in datasets for method in ("direct", "oracle")}
panel_a = []
for (name, method), run0 in no_cov.items():
    run1 = (direct if method == "direct" else oracle)[name]
    if method == "oracle" and name == "codiesp":
        run1 = study.run("codiesp", "oracle")  # the relocated facts, paired with run0
    row = {"dataset": name, "query": method}
    for m in ("recall@10", "mrr"):
        row[f"{m}, w_cov 0"] = run0.metrics[m]
        row[f"{m}, w_cov 1"] = run1.metrics[m]
        d = paired_difference(run1.records, run0.records, m, **interval)
        row[f"Δ {m}"] = Estimate(d.estimate, d.low, d.high)
    panel_a.append(row)
show(pd.DataFrame(panel_a), caption="Table 13, Panel A: the coverage term on and off")

# %% [markdown]
# The paper's mechanism is a length correction: one- and two-token labels are never in
# the top 10 without the term. We group facts by the number of distinct tokens in their
# gold concept's label and compare Recall@10 of the raw query with and without it.

# %%
def label_length_bin(record, taxonomy):
    gold = next((taxonomy[g] for g in record["gold"] if g in taxonomy), None)
    if gold is None:
        return "n/a"
    n = len(set(gold.label_text.split()))
    return f"{n}" if n < 5 else "5+"


panel_b = []
for name in datasets:
    taxonomy = study.experiment(name).taxonomy
    with_cov = by_group(direct[name].records, lambda r: label_length_bin(r, taxonomy))
    without = by_group(no_cov[(name, "direct")].records, lambda r: label_length_bin(r, taxonomy))
    for length in sorted(with_cov, key=lambda b: (len(b), b)):
        panel_b.append({"dataset": name, "label words": length, "facts": with_cov[length]["n_facts"],
                        "Recall@10, w_cov 0": without[length]["recall@10"],
                        "Recall@10, w_cov 1": with_cov[length]["recall@10"],
                        "gain": with_cov[length]["recall@10"] - without[length]["recall@10"]})
panel_b = pd.DataFrame(panel_b)
show(panel_b, caption="Table 13, Panel B: raw-query Recall@10 by gold label length")

# %% tags=["hide-input"]
fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.2), sharey=True, layout="constrained")
axes = np.atleast_1d(axes)
for ax, name in zip(axes, datasets):
    part = panel_b[panel_b["dataset"] == name]
    x = np.arange(len(part))
    ax.bar(x - 0.2, part["Recall@10, w_cov 0"], width=0.4, label="$w_{cov}=0$", color="0.7")
    ax.bar(x + 0.2, part["Recall@10, w_cov 1"], width=0.4, label="$w_{cov}=1$", color=OURS_COLOR)
    ax.set_xticks(x, part["label words"])
    ax.set_title(name)
    ax.set_xlabel("words in the gold label")
axes[0].set_ylabel("Recall@10 (raw query)")
axes[0].legend()
fig.suptitle("The coverage term rescues short labels")
plt.show()

# %% [markdown]
# ## Check against recorded values
#
# The numbers above are compared with the values recorded for this profile in
# `fhs/book/regressions/01_readiness_gap.yaml` and with the paper's, where it reports one.
# Retrieval is deterministic, so the recorded values must match to four decimals.

# %%
results = {}
for name in datasets:
    for method, group in (("direct", direct), ("oracle", oracle)):
        for m in METRICS:
            results[f"{name}/{method}/{m}"] = group[name].metrics[m]
    for method in ("direct", "oracle"):
        for m in ("recall@10", "mrr"):
            results[f"{name}/{method}-wcov0/{m}"] = no_cov[(name, method)].metrics[m]
    results[f"{name}/facts"] = len(direct[name].records)
if codiesp is not None:
    results["codiesp/relocation_rate"] = relocation_rate
    for m in ("recall@1", "mrr"):
        results[f"codiesp/oracle-exact/{m}"] = exact_oracle.metrics[m]
used = {name: study.facts(name) for name in datasets}
if codiesp is not None:
    used["codiesp"] = list(codiesp.all_facts)  # the relocated facts are a subset of these
report = check(results, chapter="01_readiness_gap", profile=profile, save=not protocol_check,
               inputs=study.input_fingerprints(used))
if protocol_check:
    print(f"PROTOCOL CHECK: {len(results)} metrics produced; not compared with recorded values.")
else:
    report.assert_ok()

# %% tags=["remove-input"]
print(f"page time: {time.perf_counter() - page_started:.0f} s (profile {profile}; "
      "the Provenance page lists every chapter's time)")
