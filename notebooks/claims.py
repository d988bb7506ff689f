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
# # Claims and where this build stands
#
# Each claim a chapter of this book tests (the paper's, and the comparisons the book adds),
# judged on the values this build's chapters recorded: the paper's figure where it gives one
# and ours on one row, and a standing computed from them.

# %% tags=["parameters"]
profile = "cpu"  # the profile of this build
runs_dir = "runs"  # where the chapters saved their values

# %% tags=["hide-input"]
from fhs.book.claims import paper_datasets, read_results, verdicts
from fhs.book.claims_page import by_chapter, claims_frame, tally
from fhs.book.report import show, show_notes
from fhs.llm.models import display_name
from fhs.run.profiles import get_profile

results = read_results(runs_dir, profile)
judged = verdicts(results, profile)
show_notes([f"Profile `{profile}`; model {display_name(get_profile(profile).model)} for the claims that need "
            f"one; {len(judged)} claims judged on the values {len(results)} chapters recorded."
            + ("" if paper_datasets(results) else " This book ran only the user's datasets, so it shows the "
               "comparisons any dataset allows (the probe and the perfect-model stages against direct "
               "retrieval) and none of the paper's claims about its own datasets.")])
show(tally(judged), caption="Claims by standing")

# %% [markdown]
# - **holds**: the 95% interval of our comparison lies on the claim's side of zero (a value
#   claim: the paper's figure lies within our interval, give or take the claim's margin);
# - **does not hold**: the interval lies on the other side, or it excludes the paper's effect;
# - **too few facts to judge**: the interval is wider than the paper's effect, with about how
#   many facts would separate it;
# - **needs the paper profile**: this profile does not measure it.
#
# Each claim is written once beside the chapter that tests it (the `claims:` list of its
# regression file, `fhs/book/regressions/`). The saved values keep no per-fact results, so
# the interval comes from each mean and its number of facts (Wilson's score interval; Newcombe's
# for a difference of two): it ignores the pairing of two methods on the same facts, which
# widens it, and the clustering of facts in contexts, which narrows it; the chapters' paired,
# context-clustered bootstraps are the finer reading. Beside each
# claim that needs a model, chapter 9's perfect model on every test fact (the fused pool, then
# the verifier's reordering) says what the architecture allows.

# %% tags=["hide-input"]
for chapter, group in by_chapter(judged).items():
    show(claims_frame(group), caption=chapter)
