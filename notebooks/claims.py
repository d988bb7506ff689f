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
# # The paper's claims in this build
#
# Each row is one claim the paper makes and a chapter of this book tests, written once beside
# that chapter (the `claims:` list of its regression file, `fhs/book/regressions/`), and judged
# here on the values the chapter recorded when it ran. The standing is computed, never typed:
#
# - **holds**: the 95% interval of our comparison lies on the paper's side of zero (a value
#   claim: the paper's figure lies within our interval, give or take the claim's margin);
# - **does not hold**: the interval lies on the other side, or it excludes the paper's effect;
# - **too few facts to judge**: the interval is wider than the paper's effect, with the number
#   of facts that would separate it;
# - **needs the `paper` profile**: this profile does not measure it.
#
# The interval comes from each mean and its number of facts (Wilson's score interval; Newcombe's
# for a difference), which is wider than the paired bootstrap the chapters show, so a claim that
# holds here holds there. For each claim that needs a model, chapter 9's stages under a perfect
# model (the fused pool and the verifier's reordering, on every test fact) say what the
# architecture allows.

# %% tags=["parameters"]
profile = "cpu"  # the profile of this build
runs_dir = "runs"  # where the chapters saved their values

# %% tags=["hide-input"]
from fhs.book.claims import paper_datasets, read_results, verdicts
from fhs.book.claims_page import claims_frame, tally
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
# ## Every claim

# %% tags=["hide-input"]
show(claims_frame(judged), caption="The paper's claims: the paper's figure and ours on one row")
