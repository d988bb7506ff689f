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
# This chapter measures both ends of that gap on each dataset of the page, sets a query of the
# value's own headers beside the raw fact (an addition to the paper), then looks at the one
# index component every method shares, the label-coverage term of Eq. 6 (Table 13).

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper | gpu-sample | paper-full (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached; a rebuild reads them back
datasets = ["fincl", "ixbrl", "codiesp"]
retrieval_limit = None  # facts per dataset (a context-level sample); None takes the profile size
sample = {}  # seed, bootstrap_resamples, protocol_check (fhs/book/page.py); {} takes the defaults

# %% [markdown]
# Everything below calls the `fhs` package; runs are cached under `runs/<profile>/`, so
# re-executing this page costs a few seconds once the records exist.

# %% tags=["hide-input"]
from dataclasses import replace

import matplotlib.pyplot as plt
import pandas as pd

from fhs.book.chapters import readiness
from fhs.book.page import open_page
from fhs.book.caveats import depth_caveats, interval_caveats
from fhs.book.report import profile_note, show, show_notes, use_style
from fhs.paper import PAPER

use_style()
page = open_page("01_readiness_gap", profile, runs_dir, sample=sample, llm=False)
study, interval = page.study, page.interval
if retrieval_limit is not None:
    study.profile = replace(study.profile, retrieval_facts=int(retrieval_limit))
profile_note(profile, facts={study.dataset_name(name): len(study.facts(name)) for name in datasets})

# %% [markdown]
# ## The data

# %% [markdown] tags=["needs-fincl", "needs-ixbrl", "needs-codiesp"]
# FinCL is the 500-fact FinTagging evaluation subset (not the paper's 2,509-fact split,
# see {doc}`data`); `ixbrl` holds every us-gaap fact of the SEC filings tagged with the
# 2024 or 2025 taxonomy; CodiEsp holds the test split's diagnosis mentions whose code is
# in our ICD-10-CM inventory, relocated into the English translation by the
# deterministic relocator (no LLM; a later chapter adds the paper's LLM relocator).

# %%
show(pd.DataFrame(readiness.data_rows(study, datasets)), caption="Test data used in this chapter")
show_notes(readiness.own_dataset_lines(study, datasets))

# %% [markdown] tags=["needs-codiesp"]
# CodiEsp needs one more number. A mention is annotated on the Spanish text; we keep a
# fact for retrieval only when its English span is an exact substring of the aligned
# English sentence. Facts that cannot be relocated still have a gold code, so the oracle
# probe runs on all of them.

# %% tags=["needs-codiesp"]
from fhs.data.datadir import data_dir
from fhs.data.datasets.codiesp import load_split

codiesp = load_split(data_dir(study.data), study.experiment("codiesp").taxonomy) if "codiesp" in datasets else None
relocation_rate = codiesp.stats["exact"] / codiesp.stats["facts"] if codiesp is not None else None
relocated = {"codiesp": list(codiesp.all_facts)} if codiesp is not None else {}  # these hold the exact ones
if codiesp is not None:
    print("\n".join(readiness.relocation_lines(codiesp.stats)))

# %% [markdown]
# ## Raw evidence against the gold query
#
# `direct` issues the raw serialized fact, `<value> <datatype> <visible context>`;
# `oracle` issues the gold concept's label and definition behind the same prefix (a spec's
# `oracle:` may lead with the code). Both use the deployed index: BM25 within the fact's
# datatype plus the label-coverage term with $w_{cov} = 1$.

# %% [markdown] tags=["needs-codiesp"]
# On CodiEsp the code leads, as in the authors' probe, and the probe runs on every
# in-inventory mention, relocated or not.

# %%
direct = {name: study.run(name, "direct") for name in datasets}
oracle = {name: study.run(name, "oracle") for name in datasets}

# %% tags=["needs-codiesp"]
if codiesp is not None:
    oracle["codiesp"] = study.run("codiesp", "oracle", facts=codiesp.all_facts, tag="all")

# %%
runs_by_method = {(n, m): r for m, group in (("direct", direct), ("oracle", oracle)) for n, r in group.items()}
table1 = readiness.metric_table(runs_by_method, readiness.PAPER_ROWS, interval)
show(table1, caption="Raw serialized fact vs gold query (95% context-clustered bootstrap intervals)")
samples = {study.dataset_name(name): study.facts(name) for name in datasets}
show_notes(interval_caveats(samples) + depth_caveats(
    samples, {study.dataset_name(name): study.experiment(name).taxonomy for name in datasets}))

# %% [markdown] tags=["needs-fincl", "needs-codiesp"]
# The paper's reading holds here. On FinCL the raw fact reaches the top 200 for about
# two thirds of facts but the top 10 for under a quarter, close to the paper's 24.0%
# and MRR 0.111; the gold query puts every fact in the top 10. The FinCL subset is a
# different sample of the same benchmark, so small differences are expected. Our
# CodiEsp raw queries do better than the paper's: our facts are the ones a
# deterministic relocator could place, which tend to be mentions whose English wording
# is close to the Spanish (and hence to the ICD label), and our inventory and
# definitions differ (FY2021 codes, no alphabetic-index paths).

# %% [markdown] tags=["needs-codiesp"]
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

# %% tags=["needs-codiesp"]
exact_oracle, probe_on_relocated = None, {}
if codiesp is not None:
    exact_oracle = study.run("codiesp", "oracle")  # the exactly relocated facts
    probe_on_relocated = {("codiesp", "oracle"): exact_oracle}  # paired below with the w_cov 0 run
    show(readiness.metric_table({("codiesp", "oracle, all mentions"): oracle["codiesp"],
                                 ("codiesp", "oracle, exactly relocated"): exact_oracle},
                                {("codiesp", "oracle, exactly relocated"): PAPER["codiesp"]["oracle"]}, interval),
         caption="CodiEsp gold-query probe on all in-inventory mentions and on the exactly relocated set")

# %% [markdown]
# ## A query of the value's own location (an addition)
#
# `direct` serialises the whole visible context, as the paper does, so every cell of one table
# issues nearly the same query. `direct-located` is this companion's addition, off by default
# (`fhs run --method direct-located`, see {doc}`deviations`): the same single search with the
# value, its datatype and its row and column headers, or for a text mention its sentence. It is
# shown for each dataset whose facts have headers, beside the paper's serialisation on the same
# facts, with the paired difference bootstrapped by context.

# %%
located = {name: study.run(name, readiness.LOCATED) for name in readiness.with_headers(study, datasets)}
if located:
    show(pd.DataFrame(readiness.located_rows(direct, located, interval)),
         caption="The paper's serialisation and the located query (95% context-clustered bootstrap intervals)")
    show_notes(readiness.located_lines({study.dataset_name(name): study.facts(name) for name in located}))
else:
    print("No dataset on this page has facts with row or column headers, so the located query is not shown.")

# %% [markdown]
# ## Where the gold concept lands
#
# The curve is recall at every depth from 1 to 200: the share of facts whose gold
# concept sits at that rank or better. The distance between the two curves at depth 1 is
# the gap the rest of the book tries to close.

# %% tags=["hide-input"]
readiness.depth_figure(direct, oracle, datasets)
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
no_cov = {(name, method): study.run(name, method, w_cov=0.0) for name in datasets for method in ("direct", "oracle")}
with_cov = {(name, method): (direct if method == "direct" else oracle)[name] for name, method in no_cov}
with_cov.update(probe_on_relocated)  # where the probe ran on a subset of the facts, that run
show(pd.DataFrame(readiness.coverage_rows(no_cov, with_cov, interval)),
     caption="Table 13, Panel A: the coverage term on and off")

# %% [markdown]
# The paper reads the term as a length correction: in its Table 13, one- and two-token
# labels are never in the top 10 without the term. We group facts by the number of distinct
# tokens in their gold concept's label and compare Recall@10 of the raw query with and
# without it; the lines under the table say, per dataset of this page, where the gain lies.

# %%
panel_b = pd.DataFrame([row for name in datasets for row in readiness.label_length_rows(
    direct[name], no_cov[(name, "direct")], study.experiment(name).taxonomy)])
show(panel_b, caption="Table 13, Panel B: raw-query Recall@10 by gold label length")
show_notes(readiness.label_length_lines(panel_b))

# %% tags=["hide-input"]
readiness.label_length_figure(panel_b, datasets)
plt.show()

# %% [markdown]
# ## Check against recorded values
#
# The numbers above are compared with the values recorded for this profile in
# `fhs/book/regressions/01_readiness_gap.yaml` and with the paper's, where it reports one.
# Retrieval is deterministic, so the recorded values must match to four decimals.

# %%
results = readiness.readiness_metrics(direct, oracle, no_cov, datasets, relocation_rate, exact_oracle, located)
used = {**{name: study.facts(name) for name in datasets}, **relocated}
page.close(results, inputs=study.input_fingerprints(used))
