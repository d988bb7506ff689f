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
# # Pipeline check
#
# This short chapter proves that the book's machinery works end to end before any
# reproduction runs: the `fhs` package imports, the data directory is found, a figure
# renders, and the chapter's numbers pass a regression check against recorded values.
#
# The numbers here are simple counts over the two FinTagging files, so the check is
# exact, and two of them have a counterpart in the paper.

# %% tags=["parameters"]
profile = "cpu"  # which row of notebooks/profiles.yaml this run uses
limit = None  # facts to read from the FinCL subset; None reads all 500

# %% [markdown]
# We import the package, the regression checker and the shared report helpers.

# %%
import collections
import json

import matplotlib.pyplot as plt
import pandas as pd

import fhs
from fhs.check import check
from fhs.datadir import SOURCES, data_dir, source_dir
from fhs.errors import InputError
from fhs.report import OURS_COLOR, profile_note, show, use_style
from fhs.text import token_set

use_style()
print(f"fhs {fhs.__version__}")

# %% [markdown]
# ## The data directory
#
# Every loader asks `fhs.datadir` for its folder, so one table tells whether each
# source is in place under `$FHS_DATA` (see {doc}`data` for how to obtain each one).

# %%
def source_status(name: str) -> str:
    try:
        source_dir(name)
    except InputError as error:  # the message names the missing file and its fix
        return f"missing: {error}"
    return "present"


sources = pd.DataFrame([
    {"source": name, "status": source_status(name), "license": spec.license}
    for name, spec in SOURCES.items()
])
print(f"data directory: {data_dir()}")
show(sources)

# %% [markdown]
# ## The concept inventory
#
# The financial taxonomy is the 2024 US-GAAP inventory used by FinTagging, one JSON
# record per concept. We count the concepts and their datatypes.

# %%
fintagging = source_dir("fintagging")
with (fintagging / "us_gaap_2024_BM25.jsonl").open(encoding="utf-8") as handle:
    concepts = [json.loads(line) for line in handle if line.strip()]
datatypes = collections.Counter(c["entity_type"] for c in concepts)
print(f"{len(concepts):,} concepts, {len(datatypes)} datatypes")
show(pd.DataFrame(datatypes.most_common(6), columns=["datatype", "concepts"]))

# %% [markdown]
# Short labels are the hard case for BM25 (the paper's label-coverage term exists for
# them), so the figure shows how many distinct tokens a concept name yields under the
# paper's tokenizer.

# %% tags=["hide-input"]
label_tokens = pd.Series([len(token_set(c["us_gaap_tag"])) for c in concepts])
fig, ax = plt.subplots()
bins = range(1, label_tokens.max() + 2)
ax.hist(label_tokens, bins=bins, align="left", color=OURS_COLOR)
ax.set_xlabel("distinct tokens in the concept name (fhs.text.token_set)")
ax.set_ylabel("concepts")
ax.set_title("US-GAAP 2024: label length")
plt.show()

# %% [markdown]
# ## The located facts
#
# The FinCL subset holds located facts with their gold concept; we count them by
# modality and check that every gold concept is in the inventory.

# %%
facts = pd.read_csv(fintagging / "FinCL-eval-subset.csv", nrows=limit)
names = {c["us_gaap_tag"] for c in concepts}
gold = facts["answer"].str.removeprefix("us-gaap:")
gold_in_inventory = gold.isin(names).mean()
print(facts["category"].value_counts().to_string())
print(f"gold concept in the inventory: {gold_in_inventory:.1%}")

# %% [markdown]
# ## Regression check
#
# The chapter's numbers go to the checker, which compares them with the values recorded
# in `fhs/regressions/00_pipeline_check.yaml` for this profile and with the paper.

# %%
profile_note(profile)  # no model argument: this chapter makes no LLM call

# %%
results = {
    "inventory/concepts": len(concepts),
    "inventory/datatypes": len(datatypes),
    "inventory/mean_label_tokens": label_tokens.mean(),
    "fincl/facts": len(facts),
    "fincl/table_facts": int((facts["category"] == "table").sum()),
    "fincl/gold_in_inventory": gold_in_inventory,
}
check(results, chapter="00_pipeline_check", profile=profile).assert_ok()
