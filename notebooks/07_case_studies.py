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
# # Case studies: single facts, stage by stage
#
# Appendix G of the paper follows two facts through FHS (Tables 21-25): a table cell
# from a restricted-stock-unit rollforward, where the verifier lifts the gold concept
# from seventh to first, and a sentence about a securitization facility, where only one
# of the two hypotheses points the verifier the right way. This chapter first redraws
# those two examples with their arithmetic computed by the scoring code the tests check
# (`fhs/book/chapters/worked_examples.py`), then picks cases from our own runs by a rule fixed
# before looking at any outcome and shows each with the per-fact explorer (`fhs show`).

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper | gpu-sample | paper-full (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached (shared with the main-results chapter)
datasets = ["fincl", "codiesp"]  # add "ixbrl" on a GPU box
server = {}  # backend, model, base_url, max_in_flight, thinking, replay, cache_dir; {} takes the profile's
sample = {}  # llm_limit, llm_fraction, protocol_check (fhs/book/page.py); one seeded run: the cases are single facts
baseline = "structured"  # the strongest baseline of Tables 4 and 5, fixed before any run

# %% tags=["hide-input"]
from pathlib import Path

import matplotlib.pyplot as plt
from IPython.display import HTML, Markdown, display

from fhs.book.chapters import case_studies, worked_examples
from fhs.book.page import open_page
from fhs.book.report import profile_note, show, use_style
from fhs.llm.models import display_name
from fhs.method.registry import METHODS

use_style()
page = open_page("07_case_studies", profile, runs_dir, server=server, sample=sample, seeds=(0,))
study, choice = page.study, page.choice

# %% [markdown]
# ## Worked example 1: the RSU rollforward (Tables 21-22)
#
# The fact is a table cell: 1,229,202 nonvested restricted stock units at the end of the
# year. Fusion ranks the options concept (`...OptionsNonvestedNumberOfShares`) first and
# the gold (`...EquityInstrumentsOtherThanOptionsNonvestedNumber`) seventh. Under the
# first hypothesis the verifier contradicts the options concept on ROLE (options are not
# "other than options"); under the second it supports both. The chart shows each
# candidate's final score split into the fused score $\widetilde S$ and the verifier's
# contribution $\beta\,\bar v$.

# %% tags=["hide-input"]
rsu = worked_examples.score_example(worked_examples.rsu_example())
case_studies.example_figure(rsu, "Worked example 1: the RSU rollforward (* = dimension the hypothesis left UNRESOLVED)")
plt.show()
display(Markdown(case_studies.rsu_text(rsu)))

# %% [markdown]
# ## Worked example 2: the securitization facility (Tables 23-24)
#
# A sentence reports that an amended securitization facility's commitments rose to a new
# maximum. The first hypothesis follows the amendment framing (EVENT), and the verifier
# contradicts every candidate on it; the second resolves only FAMILY and ROLE, on which
# the borrowing-capacity concepts are supported and the facility-cost concepts are not.
# Excluding abstentions (the paper's scoring) the gold's $\bar v$ is the mean of 0 and 1;
# counting them as non-support (the authors' code, a denominator of six) it shrinks.

# %% tags=["hide-input"]
securitization = worked_examples.score_example(worked_examples.securitization_example())
strict = worked_examples.score_example(worked_examples.securitization_example(), "strict")
case_studies.example_figure(securitization, "Worked example 2: the securitization facility (paper scoring)")
plt.show()
display(Markdown(case_studies.securitization_text(securitization, strict)))

# %% [markdown]
# ## Cases from our own runs
#
# **The rule, fixed before any run was looked at.** For each dataset and each modality,
# walk the profile's context-level sample in its fixed order and take the first fact
# where FHS and the strongest baseline of Tables 4 and 5 (one-pass structured grounding)
# disagree at rank 1: exactly one of the two has the gold concept first (before the
# selector). If no fact of that modality disagrees there, take the first whose gold
# ranks differ at all; if none does, the modality has no case. Every registered method
# then runs on the same facts, and the case table gives each method's gold rank
# (Table 25's layout), with the selector's verdict where it ran.

# %% tags=["hide-input"]
methods = list(METHODS)  # every method registered when the chapter runs
profile_note(profile, display_name(choice.model),
             facts={name: len(study.facts(name, llm=True)) for name in datasets}, seeds=(choice.seed,))

# %%
runs = {(name, method): study.run_llm(name, method, choice) for name in datasets for method in methods}
print("methods:", ", ".join(methods), "| facts per dataset:",
      {name: len(runs[(name, "fhs")].records) for name in datasets})
cases = case_studies.choose_cases({name: [fact.id for fact in study.facts(name, llm=True)] for name in datasets},
                                  {name: runs[(name, "fhs")].records for name in datasets},
                                  {name: runs[(name, baseline)].records for name in datasets})
show(case_studies.frame_or_empty(cases, case_studies.CASE_COLUMNS), caption="Cases chosen by the rule")

# %% [markdown]
# ### Gold rank per method (Table 25's layout)
#
# The rank of the gold concept in each method's final list before the selector ("—": not
# in the top 200); ✓ / ✗ is the shared selector's top-1 where it ran.

# %%
table25 = case_studies.gold_rank_table(cases, {key: run.records for key, run in runs.items()}, methods)
show(case_studies.frame_or_empty(table25, ["dataset", "modality", "fact", *methods]),
     caption="Gold rank per method for each case (✓/✗: the selector's choice)")

# %% [markdown]
# ### Each case in the explorer
#
# Each page below is what `fhs show RUN --fact ID --compare RUN2 ...` writes: the context
# with the fact marked, then one column per method (FHS first, then the baseline, then
# the rest): hypotheses, queries, ranking heads, the fused pool, the verifier's verdict
# heatmaps, the Eq. 3 decomposition and the selector's choice. The same pages are saved
# under `_static/cases/` for opening full-size.

# %%
static = Path("_static") / "cases"  # chapters run from the book's root; Sphinx copies _static/
order_of_methods = ["fhs", baseline] + [m for m in methods if m not in ("fhs", baseline)]
pages = {}
for case in cases:
    paths = [runs[(case["dataset"], m)].path for m in order_of_methods]
    case_html = case_studies.case_page(case, paths, static, data=study.data)
    pages[(case["dataset"], case["modality"])] = case_html
    display(Markdown(f"**{case['dataset']}, {case['modality']}**: fact `{case['fact']}` ({case['chosen because']})"))
    display(HTML(case_studies.embedded(case_html)))

# %% [markdown]
# ## Check against recorded values
#
# The worked examples are exact arithmetic and must match the paper to its printed
# precision; the case counts depend on the profile's model and sample.

# %%
checked = case_studies.case_study_metrics(rsu, securitization, strict, cases, len(pages), table25, baseline)
used = {name: study.facts(name, llm=True) for name in datasets}
# The worked examples need no model: on every profile they must equal the paper's printed values.
assert not case_studies.paper_mismatches(checked), case_studies.paper_mismatches(checked)
page.close(checked, inputs=study.input_fingerprints(used, choice))
