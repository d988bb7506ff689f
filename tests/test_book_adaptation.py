"""Chapter 08's module on an adapter's own files: coverage, relocation rows, the command-line runs, the tables."""

import json
from dataclasses import replace

import pytest

from book_records import fact
from fhs.book.chapters import adaptation as A
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.run.evaluate import metrics
from fhs.run.profiles import get_profile

CODES = Taxonomy.from_concepts("codes", [Concept("0DT60ZZ", "Resection of Stomach", metadata={"section_name": "0 Med"}),
                                         Concept("0DT70ZZ", "Resection of Pylorus", metadata={"section_name": "0 Med"}),
                                         Concept("10D00Z0", "Extraction", metadata={"section_name": "1 Obs"})])
INTERVAL = {"resamples": 50, "seed": 1}


def test_coverage_counts_full_codes_exactly_and_prefixes_by_the_codes_under_them():
    rows = A.coverage_rows(["0DT60ZZ", "0DT6", "0DT9", "BW03ZZZ"], CODES, {"0": "0 Medical", "B": "B Imaging"})
    assert [r["gold codes (testP.tsv)"] for r in rows] == ["all sections", "0 Medical", "B Imaging"]
    assert (rows[0]["covered, exact"], rows[0]["covered, prefix rule"], rows[0]["prefix golds"]) == (1, 2, 2)
    frame = A.coverage_frame(rows)
    assert frame["share covered (prefix)"].tolist() == [0.5, round(2 / 3, 3), 0.0]
    inventory = A.inventory_frame(CODES).iloc[0]
    assert inventory["concepts"] == 3 and inventory["sections"] == "0 Med (2), 1 Obs (1)"


def test_relocation_rows_name_their_setting_and_the_check_keys_follow():
    stats = {"facts": 8, "exact": 6, "discontinuous": 3, "discontinuous_located": 1, "found_by_pieces": 1}
    rows = [A.relocation_row("procedure", True, "words.txt", stats), A.relocation_row("diagnosis", False, None, stats)]
    assert rows[0]["rate"] == 0.75 and rows[0]["discontinuous located"] == "1 / 3"
    assert A.relocation_rates(rows) == {"procedure/pieces+lexicon": 0.75, "diagnosis/whole": 0.75}


def test_model_arguments_carry_only_the_parameters_that_are_set():
    assert A.model_arguments("smoke", "c.sqlite") == ["--profile", "smoke", "--cache", "c.sqlite"]
    argv = A.model_arguments("paper", "c.sqlite", base_url="http://a,http://b", thinking=False, max_in_flight=8)
    assert argv[4:] == ["--base-url", "http://a", "--base-url", "http://b", "--max-in-flight", "8",
                        "--thinking", "off"]
    assert A.model_arguments("paper", "c.sqlite", request_timeout=30)[-2:] == ["--request-timeout", "30"]


def test_a_chapters_request_timeout_reaches_the_servers_client(tmp_path):
    from fhs.book.page import open_page

    chapter = open_page("02_main_results", "paper", tmp_path / "runs",
                        server={"base_url": "http://127.0.0.1:9", "request_timeout": 7,
                                "cache_dir": str(tmp_path / "cache")})
    backend = chapter.choice.llm().backend
    assert backend.timeout == 7.0 and chapter.choice.request_timeout == 7.0


def test_cli_runs_keep_the_wanted_records_and_fail_loudly(tmp_path):
    def main(argv):
        out = tmp_path / argv[argv.index("--out") + 1].split("/")[-1]
        out.mkdir(parents=True, exist_ok=True)
        records = [fact("a", 1), fact("b", 2), fact("old", 1)]
        (out / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
        (out / "metrics.json").write_text(json.dumps(metrics(records[:2])))
        print("noise the page must not show")
        return 0 if "--method" in argv else 2

    run = A.cli_run(main, ["--facts", "f.jsonl"], "direct", tmp_path / "direct", wanted=["a", "b"])
    assert [r["id"] for r in run["records"]] == ["a", "b"] and run["metrics"]["n_facts"] == 2
    with pytest.raises(RuntimeError, match="exited with 2"):
        A.cli_run(lambda argv: 2, [], "direct", tmp_path / "x", wanted=[])


def test_tables_from_the_four_runs_and_the_check_values():
    direct = [fact("a", 1), fact("b", None, context="c2")]
    llm = [fact("a", 1, correct=True)]
    runs = {"direct": {"records": direct, "metrics": metrics(direct)},
            "oracle": {"records": direct, "metrics": metrics(direct)},
            "structured": {"records": llm, "metrics": {**metrics(llm), "per_fact": {
                "llm_calls": 2, "tokens_in": 100.4, "tokens_out": 9.6, "model_seconds": 1.0}}},
            "fhs": {"records": llm, "metrics": {**metrics(llm), "per_fact": {
                "llm_calls": 4, "tokens_in": 300, "tokens_out": 20, "model_seconds": 2.0}}}}
    frame = A.results_frame(runs, {"a"}, INTERVAL)
    assert list(frame.method) == ["direct", "direct (LLM sample)", "oracle", "oracle (LLM sample)", "structured", "fhs"]
    assert frame.iloc[1]["recall@1"] == 1.0 and frame.iloc[0]["accuracy"] is None
    kinds = A.gold_kind_frame(runs, {"a": "prefix", "b": "exact"})
    assert sorted(kinds.gold) == ["full code", "full code", "prefix (4 characters)", "prefix (4 characters)"]
    cost = A.cost_rows(runs, "llama_cpp", "smollm2-135m", 2)
    scale = A.PARAMETERS["qwen2.5-0.5b"] / A.PARAMETERS["smollm2-135m"]
    assert cost[0]["tokens in / fact"] == 100 and cost[1]["cpu profile, est. s / fact"] == round(2.0 * scale, 1)
    assert "cpu profile, est. s / fact" not in A.cost_rows(runs, "openai", "smollm2-135m", 2)[0]
    coverage = [{"occurrences": 4, "covered, exact": 1, "covered, prefix rule": 3}]
    checked = A.adaptation_metrics(3, coverage, 2, {"procedure/whole": 0.5}, runs)
    assert checked["coverage/prefix"] == 0.75 and checked["relocation/procedure/whole"] == 0.5
    assert "direct/accuracy" not in checked and checked["fhs/accuracy"] == 1.0 and checked["oracle/facts"] == 2


def test_the_sample_in_words_and_the_llm_sample_the_command_line_draws(tmp_path):
    smoke = get_profile("smoke")
    assert A.planned_size(replace(smoke, llm_fraction=0.5)).endswith(", a 50% share of it")
    facts = [Fact(f"f{i}", f"doc{i // 2}", "text", "v", "procedure", "ctx", ("0DT6",),
                  metadata={"gold_match": "prefix" if i % 2 else "exact"}) for i in range(6)]
    sample, argv = A.llm_sample(smoke.with_llm_facts(2), "codiesp-P", facts)
    assert len(sample) == 2 and argv == ["--sample", "2"]
    assert A.facts_line(facts).startswith("6 located facts in 3 documents; gold: 3 prefixes, 3 full codes")
    tsv = tmp_path / "testP.tsv"
    tsv.write_text("d1\t0dt6\nd1\t0DT6\nd2\tBW03ZZZ\n\n")
    assert A.document_codes(tsv) == [("d1", "0DT6"), ("d2", "BW03ZZZ")]
