"""Files from elsewhere: shared caches run no code, hostile filings parse or fail in one line, edge cases score honestly."""

from __future__ import annotations

import io
import json
import pickle

import numpy as np
import pytest

from fake_openai import serve
from fhs.cli import main
from fhs.data.datasets import ixbrl
from fhs.data.facts import matches_gold, read_facts
from fhs.data.taxonomies import load_taxonomy_file
from fhs.retrieval.bm25 import RetrievalConfig, Retriever
from fhs.run.digests import file_digest

CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n")


def one_line(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if not line.startswith("fhs: warning:") and not _facts_note(line)]
    assert len(lines) == 1 and lines[0].startswith("fhs: error: ") and "Traceback" not in err, err
    return lines[0]


# ---- the index cache is data, never code ---------------------------------------------------------

class Payload:
    """A pickle that, once loaded, creates a file: what an attacker would put in a shared cache."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_an_overwritten_index_file_runs_no_code_and_is_rebuilt(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "concepts.csv").write_text(CONCEPTS)
    (tmp_path / "facts.jsonl").write_text(json.dumps({
        "id": "f1", "context_id": "c1", "modality": "table", "value": "10", "datatype": "monetaryItemType",
        "context": "Total revenues 10", "gold": ["Revenues"], "row_header": "Total revenues"}) + "\n")
    argv = ["run", "--facts", str(tmp_path / "facts.jsonl"), "--taxonomy", str(tmp_path / "concepts.csv"),
            "--method", "direct", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    indexes = [p for p in (tmp_path / "cache" / "indexes").iterdir()]
    assert indexes
    marker = tmp_path / "ran-attacker-code"
    for path in indexes:  # whatever the cache's file names, each becomes the attacker's pickle
        path.write_bytes(pickle.dumps(Payload(marker)))
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert not marker.exists()
    first, second = (json.loads((tmp_path / d / "metrics.json").read_text()) for d in "ab")
    assert first["recall@1"] == second["recall@1"] == 1.0  # the index was rebuilt, not read


def test_an_index_with_an_object_array_is_refused_and_rebuilt(tmp_path, monkeypatch):
    from fhs.retrieval.index_cache import read_arrays

    monkeypatch.setenv("FHS_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "concepts.csv"
    path.write_text(CONCEPTS)
    taxonomy = load_taxonomy_file(path)
    expected = Retriever(taxonomy, RetrievalConfig(), cache_key=file_digest(path)).search("revenue", None)
    (index,) = list((tmp_path / "cache" / "indexes").glob("*.npz"))
    assert read_arrays(index) is not None
    buffer = io.BytesIO()
    np.savez(buffer, meta_json=np.array([Payload(tmp_path / "marker")], dtype=object))
    index.write_bytes(buffer.getvalue())
    assert read_arrays(index) is None and not (tmp_path / "marker").exists()
    again = Retriever(taxonomy, RetrievalConfig(), cache_key=file_digest(path)).search("revenue", None)
    assert again == expected


# ---- from-ixbrl: hostile markup ----------------------------------------------------------------

HEAD = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" '
        'xmlns:ix="http://www.xbrl.org/2013/inlineXBRL" xmlns:gaap="http://fasb.org/us-gaap/2024">\n<body>\n')


def fact(element_id: str, value: str = "5") -> str:
    return f'<ix:nonFraction name="gaap:Revenues" contextRef="c" unitRef="usd" id="{element_id}">{value}</ix:nonFraction>'


def filing(tmp_path, body: str, name: str = "x.htm"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEAD + body + "\n</body></html>\n")
    return path


@pytest.mark.parametrize("where", ["text", "table"])
def test_deeply_nested_markup_is_read_without_recursion(tmp_path, where):
    nested = "<span>" * 1500 + fact("f1") + "</span>" * 1500
    body = f"<p>Revenue was {nested} dollars.</p>" if where == "text" else \
        f"<table><tr><td>Revenue</td><td>{nested}</td></tr></table>"
    facts, _ = ixbrl.extract_filing(filing(tmp_path, body), cache_dir=tmp_path / "cache")
    assert [(f.value, f.modality) for f in facts] == [("5", where)]


def test_repeated_element_ids_give_distinct_fact_ids_that_fhs_run_accepts(tmp_path, capsys):
    path = filing(tmp_path, f"<p>Revenue {fact('f1', '5')} and {fact('f1', '6')} and {fact('n3', '7')}"
                            f" and <ix:nonFraction name=\"gaap:Revenues\" contextRef=\"c\" unitRef=\"usd\">8"
                            f"</ix:nonFraction>.</p>")
    out = tmp_path / "facts.jsonl"
    assert main(["facts", "from-ixbrl", str(path), "--out", str(out), "--taxonomy", "none"]) == 0
    ids = [f.id for f in read_facts(out)]  # read_facts refuses a repeated id
    assert ids == ["x:f1", "x:f1~2", "x:n3", "x:n3~2"]  # n3: the id made for the fourth, unnamed element


def test_two_filings_with_one_file_name_get_their_own_ids_and_contexts(tmp_path, capsys):
    first = filing(tmp_path / "a", f"<p>Revenue was {fact('f1')}.</p>")
    second = filing(tmp_path / "b", f"<p>Revenue was {fact('f1', '9')}.</p>")
    out = tmp_path / "facts.jsonl"
    assert main(["facts", "from-ixbrl", str(first), str(second), "--out", str(out), "--taxonomy", "none"]) == 0
    assert "same name as an earlier filing" in capsys.readouterr().err
    facts = read_facts(out)
    assert [(f.id, f.context_id, f.value) for f in facts] == [("x:f1", "x#p0", "5"), ("x-2:f1", "x-2#p0", "9")]


# ---- honest scores -----------------------------------------------------------------------------

def test_a_bare_prefix_gold_id_matches_nothing(tmp_path):
    from fhs.data.facts import Fact
    from fhs.data.taxonomies.ids import align_gold

    (tmp_path / "concepts.csv").write_text(CONCEPTS)
    taxonomy = load_taxonomy_file(tmp_path / "concepts.csv")
    bare = Fact("f", "c", "table", "1", "", "x", ("us-gaap:",), metadata={"gold_match": "prefix"})
    (aligned,) = align_gold([bare], taxonomy)
    assert aligned.gold == ("us-gaap:",)  # the namespace alone is not normalised to an empty id
    assert not any(matches_gold(cid, gold, "prefix") for cid in ("Revenues", "CostOfRevenue")
                   for gold in (aligned.gold, ("",)))


def test_a_run_whose_every_fact_failed_is_an_error_not_a_recall_of_zero(tmp_path, capsys):
    (tmp_path / "concepts.csv").write_text(CONCEPTS)
    (tmp_path / "facts.jsonl").write_text(json.dumps({
        "id": "f1", "context_id": "c1", "modality": "table", "value": "10", "datatype": "monetaryItemType",
        "context": "Total revenues 10", "gold": ["Revenues"], "row_header": "Total revenues"}) + "\n")
    with serve(lambda body: (400, {"error": "context length exceeded"}, {})) as (url, _):
        code = main(["run", "--facts", str(tmp_path / "facts.jsonl"), "--taxonomy", str(tmp_path / "concepts.csv"),
                     "--domain", "us-gaap", "--method", "structured", "--backend", "openai", "--model", "fake",
                     "--base-url", url, "--schema-transport", "none", "--cache", str(tmp_path / "c.sqlite"),
                     "--out", str(tmp_path / "run"), "--quiet"])
    captured = capsys.readouterr()
    assert code == 3 and not captured.out
    line = one_line(captured.err)
    assert "all 1 facts failed" in line and "no metric" in line and "HTTP 400" in line
    assert not (tmp_path / "run" / "metrics.json").exists()
    records = [json.loads(l) for l in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert [r["id"] for r in records] == ["f1"] and records[0]["failed"]  # kept: a rerun retries it


def test_a_one_dimension_domain_that_fhs_run_accepts_passes_the_check_with_a_warning(tmp_path, capsys):
    import yaml

    from fhs.data.domain import DOMAINS_DIR, load_domain

    data = yaml.safe_load((DOMAINS_DIR / "us-gaap.yaml").read_text(encoding="utf-8"))
    data["dimensions"] = data["dimensions"][:1]
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(data))
    assert len(load_domain(path).dimensions) == 1  # what fhs run loads
    assert main(["domain", "check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "1 dimensions, not the paper's 6" in out and "OK" in out


def _facts_note(line: str) -> bool:
    """fhs run's first line (how many facts it takes), which precedes any error."""
    return line.startswith("fhs: ") and (" facts, no sample taken (" in line or ": a context-level sample of " in line
                                         or ": the first " in line)


# ---- YAML: bounded in size and in what its aliases may expand to ---------------------------------

BOMB = "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" if i else "a0: &a0 [x]\n"
               for i in range(10))


@pytest.mark.parametrize("reader", ["domain", "profiles", "toc", "regression", "spec"])
def test_every_yaml_the_project_reads_refuses_an_alias_bomb_at_once(reader, tmp_path):
    import time

    from fhs.core.errors import InputError

    path = tmp_path / "x.yaml"
    path.write_text(BOMB)
    started = time.perf_counter()
    with pytest.raises(InputError, match=r"x.yaml.*aliases \(\*name\) would repeat more than 10,000 values"):
        if reader == "domain":
            from fhs.data.domain import load_domain
            load_domain(path)
        elif reader == "profiles":
            from fhs.book.toc import load_profiles
            load_profiles(path)
        elif reader == "toc":
            from fhs.book.toc import toc_files
            toc_files(path)
        elif reader == "regression":
            from fhs.book.check import load_regression
            load_regression("x", tmp_path)
        else:
            from fhs.data.datasets.spec_file import read_spec_file
            read_spec_file(path)
    assert time.perf_counter() - started < 2  # refused before anything expands


def test_a_command_line_yaml_value_is_bounded_too():
    from fhs.book.toc import parse_assignment
    from fhs.core.errors import InputError

    with pytest.raises(InputError, match="field '-p x'.*aliases"):
        parse_assignment("x=" + "{" + BOMB.strip().replace("\n", ", ") + "}")
    assert parse_assignment("x=[1, 2]") == ("x", [1, 2])


def test_a_yaml_file_over_the_size_limit_or_recursive_or_too_deep_is_one_line(tmp_path):
    from fhs.core.errors import InputError
    from fhs.core.yamlfile import MAX_YAML_BYTES, read_yaml_file

    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * MAX_YAML_BYTES)
    with pytest.raises(InputError, match="big.yaml: larger than 1 MiB"):
        read_yaml_file(big)
    loop = tmp_path / "loop.yaml"
    loop.write_text("a: &a [1, *a]\n")
    with pytest.raises(InputError, match="loop.yaml:1: .*alias refers to a value that contains it"):
        read_yaml_file(loop)
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 50_000)
    with pytest.raises(InputError, match="deep.yaml.*nested too deeply"):
        read_yaml_file(deep)
    fine = tmp_path / "fine.yaml"
    fine.write_text("base: &b {k: 1}\nuse: *b\nmore: {<<: *b, j: 2}\n")
    assert read_yaml_file(fine) == {"base": {"k": 1}, "use": {"k": 1}, "more": {"k": 1, "j": 2}}
