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
# (`fhs/book/worked_examples.py`), then picks cases from our own runs by a rule fixed
# before looking at any outcome and shows each with the per-fact explorer (`fhs show`).

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached (shared with the main-results chapter)
datasets = ["fincl", "codiesp"]  # add "ixbrl" on a GPU box
llm_limit = None  # facts per dataset (a context-level sample); None takes the profile size
llm_fraction = None  # a share of every LLM sample (make rehearsal); None takes all of it
backend = None  # llama_cpp, openai or vllm; None takes the profile backend
model = None  # None takes the profile model
base_url = None  # OpenAI-compatible server(s), comma-separated; None takes the profile URL
max_in_flight = None  # requests in flight per server URL; None takes the profile's (paper: 128)
thinking = None  # Qwen3's thinking mode (True/False); None takes the profile's (off, as in the paper)
replay = None  # an `fhs archive` file that answers every model call, no server (`make book` with REPLAY set to it)
seed = 20260724  # unused here; kept so every chapter takes the profile's parameters
cache_dir = ".fhs-cache"  # every model call is cached here; a rebuild replays it
baseline = "structured"  # the strongest baseline of Tables 4 and 5, fixed before any run

# %% tags=["remove-cell"]
import time

page_started = time.perf_counter()  # the page says at its end how long it took

# %%
import html
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from IPython.display import HTML, Markdown, display

from fhs.book import worked_examples as W
from fhs.book.check import check
from fhs.book.explorer import write_explorer
from fhs.book.report import NEUTRAL_COLOR, OURS_COLOR, profile_note, show, use_style
from fhs.book.study import Study
from fhs.llm.models import display_name
from fhs.method.registry import METHODS
from fhs.paper import PAPER
from fhs.run.inputs import ModelChoice

use_style()
PAPER_G = PAPER["appendix-g"]

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

# %%
VERDICT_CODE = {"support": 2, "abstain": 1, "contradict": 0}
VERDICT_COLORS = ["#c1121f", "#adb5bd", "#2d6a4f"]


def short(cid, n=34):
    """The end of a long concept name, where US-GAAP names differ."""
    return cid if len(cid) <= n else "…" + cid[-(n - 1):]


def draw_example(scored, title):
    """Left: the verdict grid per hypothesis. Right: S~ + beta * v̄ per candidate, in final order."""
    example = scored.example
    ids = list(scored.final.ids)
    fig, axes = plt.subplots(1, len(example.hypotheses) + 1, figsize=(13, 0.45 * len(ids) + 1.6),
                             gridspec_kw={"width_ratios": [1] * len(example.hypotheses) + [2.2]},
                             layout="constrained")
    for j, (ax, verdicts, h) in enumerate(zip(axes, scored.verdicts, example.hypotheses)):
        grid = np.array([[VERDICT_CODE.get(verdicts.get(cid, {}).get(d, "abstain"), 1) for d in W.DIMS] for cid in ids])
        ax.imshow(grid, cmap=plt.matplotlib.colors.ListedColormap(VERDICT_COLORS), vmin=0, vmax=2, aspect="auto")
        ax.set_xticks(range(len(W.DIMS)), [d[:4] + ("" if h.is_resolved(d) else "*") for d in W.DIMS], fontsize=8)
        ax.set_yticks(range(len(ids)), [short(c) for c in ids] if j == 0 else [], fontsize=8)
        for i, cid in enumerate(ids):
            ax.text(len(W.DIMS) - 0.4, i, f"{scored.support[j][cid]:.3f}", va="center", fontsize=8)
        ax.set_title(f"h{j + 1} verdicts (v$_{j + 1}$ at right)", fontsize=9)
        ax.grid(False)
    ax = axes[-1]
    y = np.arange(len(ids))
    s = np.array([scored.s_tilde(c) for c in ids])
    bonus = np.array([scored.beta * scored.vbar[c] for c in ids])
    colors = [OURS_COLOR if c == example.gold else NEUTRAL_COLOR for c in ids]
    ax.barh(y, s, color=colors, alpha=0.55, label=r"$\widetilde S$")
    ax.barh(y, bonus, left=s, color=colors, label=r"$\beta\,\bar v$")
    for i, cid in enumerate(ids):
        ax.text(s[i] + bonus[i] + 0.01, i, f"{s[i]:.3f} + {bonus[i]:.3f} = {s[i] + bonus[i]:.3f}"
                f"   (fused #{scored.rank(cid, fused=True)})", va="center", fontsize=8)
    ax.set_yticks(y, [f"#{i + 1}" for i in range(len(ids))], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, max(s + bonus) * 1.6)
    ax.set_title(f"Eq. 3 with β = {scored.beta}: gold in blue", fontsize=9)
    for a in axes[:-1]:
        a.set_ylim(len(ids) - 0.5, -0.5)
    fig.suptitle(title)
    plt.show()


rsu = W.score_example(W.rsu_example())
draw_example(rsu, "Worked example 1: the RSU rollforward (* = dimension the hypothesis left UNRESOLVED)")

gold, rival = rsu.example.gold, rsu.example.rival
rsu_gap = rsu.beta * (rsu.vbar[gold] - rsu.vbar[rival])
rsu_lead = rsu.s_tilde(rival) - rsu.s_tilde(gold)
display(Markdown(
    f"Under h1 the gold gets $v_1 = {rsu.support[0][gold]:.3f}$ and the options concept "
    f"$v_1 = {rsu.support[0][rival]:.3f}$; under h2 both get {rsu.support[1][gold]:.3f}. So "
    f"$\\bar v = {rsu.vbar[gold]:.3f}$ against ${rsu.vbar[rival]:.3f}$ (paper: {PAPER_G['rsu']['vbar_gold']:.3f} "
    f"vs {PAPER_G['rsu']['vbar_rival']:.3f}), and $\\beta(\\bar v_{{gold}} - \\bar v_{{options}}) = "
    f"{rsu.beta} \\times {rsu.vbar[gold] - rsu.vbar[rival]:.3f} = {rsu_gap:.3f}$, more than the options "
    f"concept's fused lead of {rsu_lead:.3f} (paper: {PAPER_G['rsu']['gap']:.3f} > {PAPER_G['rsu']['lead']:.3f}). "
    f"The gold moves from fused rank {rsu.rank(gold, fused=True)} to rank {rsu.rank(gold)}."))

# %% [markdown]
# ## Worked example 2: the securitization facility (Tables 23-24)
#
# A sentence reports that an amended securitization facility's commitments rose to a new
# maximum. The first hypothesis follows the amendment framing (EVENT), and the verifier
# contradicts every candidate on it; the second resolves only FAMILY and ROLE, on which
# the borrowing-capacity concepts are supported and the facility-cost concepts are not.
# Excluding abstentions (the paper's scoring) the gold's $\bar v$ is the mean of 0 and 1;
# counting them as non-support (the authors' code, a denominator of six) it shrinks.

# %%
securitization = W.score_example(W.securitization_example())
strict = W.score_example(W.securitization_example(), "strict")
draw_example(securitization, "Worked example 2: the securitization facility (paper scoring)")
cap = securitization.example.gold
display(Markdown(
    f"With abstentions excluded: $v_1 = {securitization.support[0][cap]:.3f}$, $v_2 = {securitization.support[1][cap]:.3f}$, "
    f"$\\bar v = {securitization.vbar[cap]:.3f}$ (paper: {PAPER_G['securitization']['vbar_paper']}). "
    f"Abstain-as-non-support: $v_1 = {strict.support[0][cap]:.3f}$, $v_2 = {strict.support[1][cap]:.3f}$, "
    f"$\\bar v = {strict.vbar[cap]:.3f}$ (paper: {PAPER_G['securitization']['vbar_strict']}). Either way the three "
    f"borrowing-capacity concepts rise above the facility concepts ({', '.join(short(c, 40) for c in securitization.final.ids[:3])}); "
    f"the fused score, not the verifier, orders them within the family."))

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

# %%
study = Study.for_profile(profile, runs_dir, progress=False)
if llm_limit is not None:
    study.profile = study.profile.with_llm_facts(int(llm_limit))
if llm_fraction is not None:
    study.profile = replace(study.profile, llm_fraction=float(llm_fraction))
choice = ModelChoice.resolve(profile, backend=backend, model=model,
                             base_urls=base_url.split(",") if base_url else None,
                             seed=0, cache=Path(cache_dir) / "responses.sqlite",
                             max_in_flight=max_in_flight, thinking=thinking, replay=replay)
methods = list(METHODS)  # every method registered when the chapter runs
profile_note(profile, display_name(choice.model),
             facts={name: len(study.facts(name, llm=True)) for name in datasets}, seeds=(choice.seed,))
runs = {(name, method): study.run_llm(name, method, choice) for name in datasets for method in methods}
print("methods:", ", ".join(methods), "| facts per dataset:",
      {name: len(runs[(name, "fhs")].records) for name in datasets})

# %%
def at_one(record):
    return record.get("rank") == 1


def choose_case(fhs_records, base_records, modality):
    """The rule above: first rank-1 disagreement in sample order, else first rank difference."""
    base = {r["id"]: r for r in base_records}
    pairs = [(r, base[r["id"]]) for r in fhs_records if r["modality"] == modality and r["id"] in base]
    for f, b in pairs:
        if at_one(f) != at_one(b):
            return f["id"], "disagree at rank 1"
    for f, b in pairs:
        if f.get("rank") != b.get("rank"):
            return f["id"], "gold ranks differ"
    return None, "no difference"


cases = []
for name in datasets:
    order = [fact.id for fact in study.facts(name, llm=True)]
    fhs_records = sorted(runs[(name, "fhs")].records, key=lambda r: order.index(r["id"]))
    for modality in ("table", "text"):
        fact_id, why = choose_case(fhs_records, runs[(name, baseline)].records, modality)
        if fact_id is not None:
            cases.append({"dataset": name, "modality": modality, "fact": fact_id, "chosen because": why})
show(pd.DataFrame(cases) if cases else pd.DataFrame(columns=["dataset", "modality", "fact", "chosen because"]),
     caption="Cases chosen by the rule")

# %% [markdown]
# ### Gold rank per method (Table 25's layout)
#
# The rank of the gold concept in each method's final list before the selector ("—": not
# in the top 200); ✓ / ✗ is the shared selector's top-1 where it ran.

# %%
def cell(record):
    if record is None:
        return "not run"
    rank = record.get("rank")
    mark = "" if "correct" not in record else (" ✓" if record["correct"] else " ✗")
    return (str(rank) if rank is not None else "—") + mark


table25 = []
for case in cases:
    row = {"dataset": case["dataset"], "modality": case["modality"], "fact": case["fact"]}
    for method in methods:
        records = {r["id"]: r for r in runs[(case["dataset"], method)].records}
        row[method] = cell(records.get(case["fact"]))
    table25.append(row)
show(pd.DataFrame(table25) if table25 else pd.DataFrame(columns=["dataset", "modality", "fact", *methods]),
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
    out = static / f"{case['dataset']}-{case['modality']}.html"
    write_explorer(paths, [case["fact"]], out, data=study.data,
                   title=f"Case: {case['dataset']} {case['modality']} fact {case['fact']}")
    pages[(case["dataset"], case["modality"])] = out
    display(Markdown(f"**{case['dataset']}, {case['modality']}**: fact `{case['fact']}` ({case['chosen because']})"))
    display(HTML(f'<div><iframe srcdoc="{html.escape(out.read_text(encoding="utf-8"))}" '
                 'style="width:100%;height:720px;border:1px solid #ccc"></iframe></div>'))

# %% [markdown]
# ## Check against recorded values
#
# The worked examples are exact arithmetic and must match the paper to its printed
# precision; the case counts depend on the profile's model and sample.

# %%
checked = {
    "appendix-g/rsu/vbar_gold": rsu.vbar[gold],
    "appendix-g/rsu/vbar_rival": rsu.vbar[rival],
    "appendix-g/rsu/lead": rsu_lead,
    "appendix-g/rsu/gap": rsu_gap,
    "appendix-g/rsu/gold_rank": rsu.rank(gold),
    "appendix-g/securitization/vbar_paper": securitization.vbar[cap],
    "appendix-g/securitization/vbar_strict": strict.vbar[cap],
    "cases/count": len(cases),
    "cases/pages": len(pages),
    "cases/fhs_at_rank1": sum(row["fhs"].split(" ")[0] == "1" for row in table25),
    f"cases/{baseline}_at_rank1": sum(row[baseline].split(" ")[0] == "1" for row in table25),
}
used = {name: study.facts(name, llm=True) for name in datasets}
report = check(checked, chapter="07_case_studies", profile=profile,
               inputs=study.input_fingerprints(used, choice))
# The worked examples need no model: on every profile they must equal the paper's printed values.
for name, value in checked.items():
    if name.startswith("appendix-g/"):
        _, example, metric = name.split("/")
        assert round(value, 3) == PAPER_G[example][metric], f"{name}: {value:.3f} vs the paper's {PAPER_G[example][metric]}"
report.assert_ok()

# %% tags=["remove-input"]
print(f"page time: {time.perf_counter() - page_started:.0f} s (profile {profile}; "
      "the Provenance page lists every chapter's time)")
