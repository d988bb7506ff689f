"""Trustworthy runs: no silent wrong metrics, one-line errors, one bad fact never blocks a run."""

from __future__ import annotations

import errno
import gzip
import json
import os
import socket

import pytest

from fake_openai import completion, serve
from fhs.cli import main
from fhs.core.errors import InputError
from fhs.data.domain import load_domain
from fhs.data.facts import Fact
from fhs.data.taxonomy import Concept, Taxonomy
from fhs.llm.cache import CachedLLM, ResponseCache
from fhs.llm.contract import Message, Request
from fhs.llm.openai import OpenAIBackend
from fhs.llm.tokens import count_messages, default_counter
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.method.hypotheses import generator_prompt, hypothesis_requests
from fhs.retrieval.bm25 import RetrievalConfig, Retriever
from fhs.run.lock import RunLock
from fhs.run.records import RecordWriter, read_records
from fhs.run.runner import run_method
from scripted_llm import ScriptedLLM

TAXONOMY = Taxonomy.from_concepts("tiny", [
    Concept("Revenues", "Revenues", "Amount of revenue recognized.", "monetaryItemType"),
    Concept("CostOfRevenue", "Cost Of Revenue", "Cost of goods and services sold.", "monetaryItemType"),
])
FACTS = [Fact(id=f"f{i}", context_id=f"c{i}", modality="table", value=str(10 + i), datatype="monetaryItemType",
              context="Total revenues 10 11 12; cost of revenue 5 6 7", gold=("Revenues",),
              row_header="Total revenues") for i in range(3)]
CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n")


def fact_line(i: int, gold: str = "Revenues", **extra) -> str:
    record = {"id": f"f{i}", "context_id": f"c{i}", "modality": "table", "value": str(i),
              "datatype": "monetaryItemType", "context": "Total revenues 10 9; cost of revenue 4 3",
              "gold": [gold], "row_header": "Total revenues" if gold == "Revenues" else "Cost of revenue", **extra}
    return json.dumps(record) + "\n"


@pytest.fixture
def files(tmp_path):
    taxonomy = tmp_path / "concepts.csv"
    taxonomy.write_text(CONCEPTS)
    facts = tmp_path / "facts.jsonl"
    facts.write_text(fact_line(1) + fact_line(2, "CostOfRevenue") + fact_line(3))
    return facts, taxonomy


def cli(capsys, *argv: str) -> tuple[int, dict | None, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, (json.loads(out) if code == 0 else None), err


def direct(facts, taxonomy, out, *extra: str) -> list[str]:
    return ["run", "--facts", str(facts), "--taxonomy", str(taxonomy), "--method", "direct", "--out", str(out),
            "--quiet", *extra]


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("fhs: warning:")]
    assert len(lines) == 1 and lines[0].startswith("fhs: error: "), err
    assert "Traceback" not in err
    return lines[0]


# ---- 1. stale records ---------------------------------------------------------------------

def test_an_edited_facts_file_under_the_same_name_is_refused_then_fresh_recomputes(capsys, tmp_path, files):
    facts, taxonomy = files
    code, first, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    assert code == 0, err
    facts.write_text(fact_line(1, "CostOfRevenue") + fact_line(2, "CostOfRevenue") + fact_line(3, "CostOfRevenue"))
    code, _, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    line = one_line(err)
    assert code == 2 and "inputs.facts" in line and "--fresh" in line
    code, fresh, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o", "--fresh"))
    assert code == 0 and fresh["n_new"] == 3
    assert [r["gold"] for r in read_records(tmp_path / "o" / "records.jsonl")] == [["CostOfRevenue"]] * 3


def test_an_edited_taxonomy_is_refused(capsys, tmp_path, files):
    facts, taxonomy = files
    assert cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))[0] == 0
    taxonomy.write_text(CONCEPTS.replace("Amount of revenue recognized.", "Sales."))
    code, _, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    assert code == 2 and "inputs.taxonomy" in one_line(err)


def test_records_without_a_stamp_are_refused(capsys, tmp_path, files):
    facts, taxonomy = files
    assert cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))[0] == 0
    (tmp_path / "o" / "run-config.json").unlink()
    code, _, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    assert code == 2 and "no run-config.json" in one_line(err)


# ---- 2. unusable model output ---------------------------------------------------------------

def llm_context(llm) -> MethodContext:
    return MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()), llm=llm,
                         domain=load_domain("us-gaap"), config=FHSConfig.fhs(context_chars=400))


def test_parse_failures_and_fallbacks_are_counted_per_stage_and_warned_about(tmp_path, capsys):
    garbage = ["not json", '{"dimensions": ', None, "<think>still thinking"]
    llm = ScriptedLLM({"hypothesis": [g or "" for g in garbage * 20], "selector": ["nonsense"] * 3})
    result = run_method(FACTS, "fhs", llm_context(llm), tmp_path / "run", progress=False)
    hypothesis_calls = len(llm.calls("hypothesis"))
    assert result["parse_failures"]["hypothesis"] == hypothesis_calls
    assert result["fallbacks"]["hypothesis"] == 3  # every fact searched with the direct query
    assert result["parse_failures"]["selector"] == 3 and result["fallbacks"]["selector"] == 3
    assert result["stages"]["selector"]["calls"] == 3
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert saved["parse_failures"] == result["parse_failures"]
    err = capsys.readouterr().err
    assert "fhs: warning: hypothesis:" in err and "could not be parsed" in err


def test_an_unparseable_answer_is_asked_again_next_run_unless_replay_is_asked_for(tmp_path):
    replies = iter(["garbage", '{"selected_index": 1, "ranked_indices": [1]}', "unused"])
    backend = ScriptedLLM({"selector": [lambda r: next(replies)] * 3})
    cache = ResponseCache(tmp_path / "c.sqlite")
    llm = CachedLLM(backend, cache)
    request = Request(messages=(Message("user", "pick"),), purpose="selector")
    assert llm.complete([request])[0].text == "garbage"
    llm.mark_unparsed(request)
    assert cache.unparsed_count() == 1
    assert CachedLLM(backend, cache, replay_unparsed=True).complete([request])[0].text == "garbage"
    fixed = llm.complete([request])[0]
    assert fixed.text.startswith('{"selected_index"') and not fixed.cached  # asked again
    assert cache.unparsed_count() == 0
    assert llm.complete([request])[0].cached  # a good answer is served from the cache


def test_stages_mark_their_unparseable_answers_in_the_cache(tmp_path):
    backend = ScriptedLLM({"hypothesis": ["garbage"] * 40, "selector": ["nonsense"] * 2})
    cache = ResponseCache(tmp_path / "c.sqlite")
    run_method(FACTS[:1], "fhs", llm_context(CachedLLM(backend, cache)), tmp_path / "run", progress=False)
    assert cache.unparsed_count() == len(backend.requests)


# ---- 3. gold ids --------------------------------------------------------------------------

def test_prefixed_and_padded_gold_ids_are_normalised(capsys, tmp_path, files):
    facts, taxonomy = files
    facts.write_text(fact_line(1, "us-gaap:Revenues") + fact_line(2, " us-gaap_CostOfRevenue ") + fact_line(3))
    code, result, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    assert code == 0, err
    assert result["unknown_gold"]["count"] == 0 and result["recall@200"] == 1.0


def test_unknown_gold_ids_are_counted_and_none_known_fails(capsys, tmp_path, files):
    facts, taxonomy = files
    facts.write_text(fact_line(1, "Sales") + fact_line(2))
    code, result, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    assert code == 0 and result["unknown_gold"] == {"count": 1, "ids": ["Sales"]}
    assert "1 gold id(s) are not in taxonomy" in err
    facts.write_text(fact_line(1, "Sales") + fact_line(2, "Costs"))
    code, _, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "p"))
    assert code == 2 and "none of the gold ids" in one_line(err) and "field 'gold'" in err


def test_icd_taxonomy_and_gold_share_one_spelling(capsys, tmp_path):
    taxonomy = tmp_path / "codes.csv"
    taxonomy.write_text("id,label\nS2249XA,Multiple fractures of ribs\nR69,Illness unspecified\n")
    facts = tmp_path / "facts.jsonl"
    facts.write_text(json.dumps({"id": "m1", "context_id": "d1", "modality": "text", "value": "rib fractures",
                                 "datatype": "diagnosis", "context": "multiple rib fractures", "gold": ["s22.49xa"],
                                 "sentence": "multiple rib fractures"}) + "\n")
    code, result, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    assert code == 0, err
    assert result["unknown_gold"]["count"] == 0 and result["recall@200"] == 1.0


# ---- 5. one run per directory -------------------------------------------------------------

def test_a_second_writer_is_told_who_holds_the_run_directory(tmp_path):
    with RecordWriter(tmp_path / "records.jsonl"):
        with pytest.raises(InputError, match=rf"pid {os.getpid()} on {socket.gethostname()}"):
            RecordWriter(tmp_path / "records.jsonl")
    RecordWriter(tmp_path / "records.jsonl").close()  # released


def test_a_stale_lock_of_a_dead_process_is_taken_over(tmp_path, capsys):
    (tmp_path / "run.lock").write_text(json.dumps({"pid": 2**22 + 12345, "host": socket.gethostname(),
                                                   "started": "yesterday"}))
    with RunLock(tmp_path):
        pass
    assert "stale lock" in capsys.readouterr().err
    assert not (tmp_path / "run.lock").exists()


# ---- crashes that become one-line errors ----------------------------------------------------

def test_a_records_file_cut_mid_character_keeps_everything_before_it(tmp_path, capsys):
    path = tmp_path / "records.jsonl"
    with RecordWriter(path) as writer:
        writer.write({"id": "a", "note": "é"})
        writer.write({"id": "b", "note": "ü"})
    data = path.read_bytes()
    path.write_bytes(data + '{"id": "c", "note": "€'.encode()[:-1])  # cut inside the euro sign
    with RecordWriter(path) as writer:
        assert "a" in writer and "b" in writer and "c" not in writer
    assert "dropped a torn last line" in capsys.readouterr().err
    assert path.read_bytes() == data


def test_a_non_record_line_in_the_middle_names_the_line_and_advises_no_deletion(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text('{"id": "a"}\n[1, 2]\n{"id": "b"}\n')
    with pytest.raises(InputError) as caught:
        read_records(path)
    assert "records.jsonl:2" in str(caught.value) and "delete" not in str(caught.value)


def test_a_full_disk_is_a_one_line_error_and_keeps_the_finished_records(capsys, tmp_path, files, monkeypatch):
    facts, taxonomy = files
    original = RecordWriter.append  # every record reaches the disk here (write encodes, then appends)
    written = []

    def append(self, fact_id, line, summary):
        if written:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.path))
        written.append(fact_id)
        return original(self, fact_id, line, summary)

    monkeypatch.setattr(RecordWriter, "append", append)
    code, _, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    line = one_line(err)
    assert code == 2 and "No space left on device" in line and "run the same command again" in line
    assert [r["id"] for r in read_records(tmp_path / "o" / "records.jsonl")] == written
    monkeypatch.setattr(RecordWriter, "append", original)
    code, result, _ = cli(capsys, *direct(facts, taxonomy, tmp_path / "o"))
    assert code == 0 and result["n_new"] == 2 and not (tmp_path / "o" / "run.lock").exists()


def test_a_read_only_out_is_a_one_line_error(capsys, tmp_path, files, monkeypatch):
    facts, taxonomy = files

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "ro" / "run.lock"))

    monkeypatch.setattr(RunLock, "acquire", refuse)
    code, _, err = cli(capsys, *direct(facts, taxonomy, tmp_path / "ro"))
    assert code == 2 and "Permission denied" in one_line(err) and "run.lock" in err


def test_ctrl_c_stops_cleanly_keeps_records_and_says_how_to_resume(capsys, tmp_path, files, monkeypatch):
    facts, taxonomy = files
    import fhs.method.direct as direct_module
    from fhs.method import registry

    calls = []
    real = registry.METHODS["direct"]

    def interrupted(fact, ctx):
        calls.append(fact.id)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(fact, ctx)

    monkeypatch.setitem(registry.METHODS, "direct", interrupted)
    code = main(direct(facts, taxonomy, tmp_path / "o"))
    err = capsys.readouterr().err
    assert code == 130 and "run the same command again to continue" in err and "Traceback" not in err
    assert [r["id"] for r in read_records(tmp_path / "o" / "records.jsonl")] == ["f1"]
    assert not (tmp_path / "o" / "run.lock").exists()
    assert direct_module  # the real method is untouched


def test_bench_with_zero_queries_is_an_input_error():
    from fhs.bench.retrieval import bench_retrieval

    with pytest.raises(InputError, match="field 'queries'"):
        bench_retrieval("fincl", n_queries=0)


def test_a_truncated_filing_is_an_input_error(tmp_path):
    from fhs.data.datasets.ixbrl import extract_filing

    path = tmp_path / "filing.htm.gz"
    path.write_bytes(gzip.compress(b"<html>" + b"x" * 5000 + b"</html>")[:40])
    with pytest.raises(InputError, match="truncated or damaged gzip"):
        extract_filing(path, cache_dir=tmp_path / "cache")


def test_a_manifest_name_outside_the_data_folder_is_refused(tmp_path):
    from fhs.data.datasets.ixbrl import read_manifest

    folder = tmp_path / "ixbrl"
    folder.mkdir()
    (tmp_path / "secret.htm").write_text("x")
    (folder / "MANIFEST.tsv").write_text("file\tus_gaap_version\n../secret.htm\t2024\n")
    with pytest.raises(InputError, match="outside the data folder"):
        read_manifest(folder)


def test_non_utf8_domain_names_the_byte(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_bytes(b"name: x\nbad: \xff\n")
    with pytest.raises(InputError, match=r"d.yaml:2: not UTF-8 text \(byte offset 13"):
        load_domain(path)


# ---- the OpenAI-compatible server -------------------------------------------------------------

def ask(url: str, **kw) -> list:
    backend = OpenAIBackend([url], "fake", structured="none", backoff_s=0.01, **kw)
    return backend.complete([Request(messages=(Message("user", "hi"),))])


def test_content_as_a_list_of_parts_is_joined():
    parts = [{"type": "text", "text": '{"a": '}, {"type": "image_url", "image_url": {}}, {"type": "text", "text": "1}"}]
    with serve(lambda body: (200, completion(parts), {})) as (url, _):
        assert ask(url)[0].text == '{"a": 1}'


@pytest.mark.parametrize("usage", [{"prompt_tokens": -3, "completion_tokens": "7"},
                                   {"prompt_tokens": 1.5, "completion_tokens": None}, "lots"])
def test_odd_usage_counts_are_unknown_with_a_warning(usage, capsys):
    with serve(lambda body: (200, completion("ok", usage), {})) as (url, _):
        response = ask(url)[0]
    assert response.text == "ok" and response.tokens_in == 0 and response.tokens_out == 0


def test_retry_after_is_honoured_on_429(monkeypatch):
    import fhs.llm.openai as openai_module

    waits = []
    real_sleep = openai_module.asyncio.sleep

    async def sleep(seconds):
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(openai_module.asyncio, "sleep", sleep)
    answers = iter([(429, {"error": "slow down"}, {"Retry-After": "3"}), (200, completion("ok"), {})])
    with serve(lambda body: next(answers)) as (url, _):
        assert ask(url)[0].text == "ok"
    assert waits == [3.0]
    assert openai_module._retry_after("99999") == openai_module.MAX_RETRY_AFTER_S


def test_loopback_requests_bypass_a_proxy(monkeypatch):
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    with serve(lambda body: (200, completion("ok"), {})) as (url, _):
        assert ask(url, max_retries=0)[0].text == "ok"


def test_another_server_does_not_replay_this_ones_answers(tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")
    request = Request(messages=(Message("user", "hi"),))
    with serve(lambda body: (200, completion("from A"), {})) as (a, _), \
            serve(lambda body: (200, completion("from B"), {})) as (b, _):
        first = CachedLLM(OpenAIBackend([a], "fake", structured="none"), cache).complete([request])[0]
        second = CachedLLM(OpenAIBackend([b], "fake", structured="none"), cache).complete([request])[0]
        shared = CachedLLM(OpenAIBackend([b], "fake", structured="none", any_server=True), cache)
        shared.complete([request])
        replayed = CachedLLM(OpenAIBackend([a], "fake", structured="none", any_server=True), cache)
        assert replayed.complete([request])[0].cached
    assert (first.text, second.text) == ("from A", "from B") and not second.cached


# ---- one bad fact never blocks a run --------------------------------------------------------

def test_a_refused_fact_is_recorded_as_failed_and_the_run_goes_on(tmp_path, capsys):
    def reply(body):
        prompt = body["messages"][-1]["content"]
        if "Value: 11" in prompt:
            return 400, {"error": "context length exceeded"}, {}
        purpose = "selector" if "selected_index" in prompt else "hypothesis"
        return 200, completion("garbage" if purpose == "hypothesis" else '{"selected_index": 1, "ranked_indices": [1]}'), {}

    with serve(reply) as (url, _):
        llm = CachedLLM(OpenAIBackend([url], "fake", structured="none", backoff_s=0.01),
                        ResponseCache(tmp_path / "c.sqlite"))
        result = run_method(FACTS, "fhs", llm_context(llm), tmp_path / "run", progress=False)
    assert result["failed_facts"]["count"] == 1 and result["failed_facts"]["ids"] == ["f1"]
    assert "HTTP 400" in result["failed_facts"]["reasons"]["f1"]
    assert (result["n_facts"], result["n_refused"]) == (3, 1)  # counted as a miss by default
    assert "1 of 3 facts failed and count as misses" in capsys.readouterr().err
    with serve(lambda body: (200, completion('{"selected_index": 1, "ranked_indices": [1]}'
                                             if "selected_index" in body["messages"][-1]["content"]
                                             else "garbage"), {})) as (url, _):
        llm = CachedLLM(OpenAIBackend([url], "fake", structured="none"), ResponseCache(tmp_path / "c2.sqlite"))
        again = run_method(FACTS, "fhs", llm_context(llm), tmp_path / "run", progress=False)
    assert again["n_new"] == 1 and again["failed_facts"]["count"] == 0 and again["n_facts"] == 3


def test_a_huge_header_is_cut_to_the_budget_and_a_fitting_prompt_is_unchanged():
    domain = load_domain("us-gaap")
    config = FHSConfig.fhs()
    normal = FACTS[0]
    (request,) = hypothesis_requests(normal, config.replace(num_hypotheses=1), domain)
    assert request.messages[-1].content == generator_prompt(normal, domain, 12_000) and request.shortened is None
    huge = Fact(id="h", context_id="c", modality="table", value="1" * 200_000, datatype="monetaryItemType",
                context="x", gold=("Revenues",), row_header="Total " * 50_000)
    (request,) = hypothesis_requests(huge, config.replace(num_hypotheses=1), domain)
    assert count_messages(default_counter(), request.messages) <= config.generator_prompt_tokens
    assert request.shortened["field_chars"] is not None  # a last-resort rung cut the fields


# ---- a real model: parse failures counted, and asked again on the next run ------------------

@pytest.mark.model
def test_smollm2_cut_short_is_counted_as_parse_failures_and_asked_again(tmp_path):
    from fhs.llm.llama_cpp import LlamaCppBackend
    from fhs.llm.models import smollm2_path

    backend = LlamaCppBackend(smollm2_path(), n_ctx=4096, model_name="smollm2-135m")
    cache = tmp_path / "responses.sqlite"
    # Four tokens cannot hold the hypothesis JSON: every answer is cut short and unparseable.
    config = FHSConfig.fhs(num_hypotheses=2, max_tokens_hypothesis=4, selector=False, context_chars=400)

    def run(out: str, **kw) -> dict:
        llm = CachedLLM(backend, ResponseCache(cache), **kw)
        ctx = MethodContext(taxonomy=TAXONOMY, retriever=Retriever(TAXONOMY, RetrievalConfig()), llm=llm,
                            domain=load_domain("us-gaap"), config=config)
        return run_method(FACTS[:2], "fhs", ctx, tmp_path / out, progress=False)

    first = run("a")
    calls = first["stages"]["hypothesis"]["calls"]
    assert calls > 0 and first["parse_failures"]["hypothesis"] == calls
    assert first["fallbacks"]["hypothesis"] == 2
    assert ResponseCache(cache).unparsed_count() == calls
    second = run("b")  # the unparseable answers are not replayed: the model is asked again
    assert second["llm_calls"] == calls and second["cache_hits"] == 0
    replayed = run("c", replay_unparsed=True)
    assert replayed["llm_calls"] == 0 and replayed["cache_hits"] == calls
    assert replayed["parse_failures"] == first["parse_failures"]
