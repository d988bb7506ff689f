"""``fhs show``: the per-fact explorer page, opened with an HTML parser.

A scripted FHS run (the RSU fact of test_pipeline.py, plus a text fact) and a
direct run write their records through the real runner; the page must show
the fact marked in its context, every hypothesis, the verdict grid per
hypothesis, the Eq. 3 decomposition matching the recorded scores, and the
selector's choice. One test does the same on a real SmolLM2 run.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from bs4 import BeautifulSoup

from fhs.cli import main
from fhs.data.facts import Fact, read_facts, write_facts
from fhs.data.taxonomies import load_taxonomy_file
from fhs.data.taxonomies.generic import write_generic
from fhs.method.config import FHSConfig
from fhs.method.context import MethodContext
from fhs.run.digests import facts_digest, taxonomy_digest
from fhs.run.records import read_records
from fhs.run.runner import run_method
from scripted_llm import OverlapRetriever, ScriptedLLM
from test_pipeline import DOMAIN, FACT, GOLD, TAXONOMY, hypothesis_reply, H1, H2, verifier_reply

TABLE = replace(FACT, context="Restricted stock units | Number of RSUs\n"
                              "Nonvested at January 1, 2023 | 1,100,000\n"
                              "Granted | 229,202\n"
                              "Nonvested at December 31, 2023 | 1,229,202")
TEXT = Fact(id="txt", context_id="c2", modality="text", value="1,229,202", datatype="sharesItemType",
            context="Awards vest over four years. We had 1,229,202 nonvested restricted stock units at year end.",
            sentence="We had 1,229,202 nonvested restricted stock units at year end.", gold=(GOLD,))


def llm():
    hypotheses = [hypothesis_reply(H1, "Number of nonvested share awards at period end."),
                  hypothesis_reply(H2, "Number of equity instruments other than options outstanding.")]
    return ScriptedLLM({"hypothesis": hypotheses * 2, "verifier": [verifier_reply] * 4,
                        "selector": ['{"selected_index": 1, "ranked_indices": [1]}'] * 2})


@pytest.fixture
def runs(tmp_path):
    facts, taxonomy = tmp_path / "facts.jsonl", tmp_path / "concepts.jsonl"
    write_facts([TABLE, TEXT], facts)
    write_generic(TAXONOMY, taxonomy)
    retriever = OverlapRetriever(TAXONOMY)
    config = FHSConfig()
    # what `fhs run --facts --taxonomy` stamps: where the files were, and the digests of what it read
    stamp = {"facts": facts_digest(read_facts(facts)), "taxonomy": taxonomy_digest(load_taxonomy_file(taxonomy))}
    inputs = {"dataset": "toy", "sources": {"facts": str(facts), "taxonomy": str(taxonomy)}, "inputs": stamp}
    ctx = MethodContext(taxonomy=TAXONOMY, retriever=retriever, llm=llm(), domain=DOMAIN, config=config)
    run_method([TABLE, TEXT], "fhs", ctx, tmp_path / "fhs", progress=False,
               run_config={**inputs, "method": "fhs", "fhs": config.to_dict()})
    plain = MethodContext(taxonomy=TAXONOMY, retriever=retriever)
    run_method([TABLE, TEXT], "direct", plain, tmp_path / "direct", progress=False,
               run_config={**inputs, "method": "direct"})
    return tmp_path


def page(path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def test_the_page_shows_every_stage_of_a_table_and_a_text_fact(runs, capsys):
    out = runs / "page.html"
    assert main(["show", str(runs / "fhs"), "--fact", "rsu", "--fact", "txt", "--out", str(out)]) == 0
    soup = page(out)
    sections = {s["data-fact-id"]: s for s in soup.select("section.fact")}
    assert list(sections) == ["rsu", "txt"]

    table = sections["rsu"]
    marked = table.select("table.context td.fact")
    assert [td.get_text() for td in marked] == ["1,229,202"]
    assert marked[0].find_previous_sibling("td").get_text() == "Nonvested at December 31, 2023"
    text_mark = sections["txt"].select_one("div.passage mark.fact")
    assert text_mark.get_text() == "1,229,202"
    assert "We had" in text_mark.previous_sibling

    record = {r["id"]: r for r in read_records(runs / "fhs" / "records.jsonl")}["rsu"]
    heads = [th.get_text() for th in table.select("table.hypotheses tr")[0].find_all("th")[1:]]
    assert heads == [f"h{j}" for j in range(1, len(record["hypotheses"]) + 1)]
    unresolved = [td.get_text() for td in table.select("table.hypotheses td.unresolved")]
    assert unresolved and set(unresolved) == {"UNRESOLVED"}
    assert len(table.select("table.queries tr")) - 1 == len(record["queries"])

    grids = table.select("div.heatmap table.verdicts")
    assert len(grids) == len(record["verifier"]["verdicts"])
    window = record["verifier"]["window"]["ids"]
    for j, grid in enumerate(grids):
        rows = grid.find_all("tr")[1:]
        assert [r.find("code").get_text() for r in rows] == window
        for row, cid in zip(rows, window):
            entry = record["verifier"]["verdicts"][j]["entries"][cid]
            assert [td["class"][0] for td in row.find_all("td")[1:-1]] == list(entry.values())
    gold_rows = table.select("div.heatmap tr.gold")
    assert gold_rows and all(r.find("code").get_text() == GOLD for r in gold_rows)

    decomposition = table.select("table.decomposition tr")[1:]
    assert len(decomposition) == min(10, len(record["ranking"]))
    for row in decomposition:
        cells = [td.get_text() for td in row.find_all("td")]
        assert cells[-1] == cells[-2]  # S~ + beta * v̄ recomputed = the score the run recorded
    assert table.select_one("p.selection code").get_text() == record["selected"]


def test_two_runs_side_by_side(runs):
    out = runs / "compare.html"
    assert main(["show", str(runs / "fhs"), "--compare", str(runs / "direct"), "--fact", "rsu",
                 "--out", str(out)]) == 0
    columns = page(out).select("section.fact div.run")
    assert [c["data-run"] for c in columns] == [str(runs / "fhs"), str(runs / "direct")]
    assert columns[0].select("div.heatmap") and not columns[1].select("div.heatmap")
    assert columns[1].select("ol.head li")  # direct: its final list's head


def test_an_unknown_fact_id_is_one_line_saying_how_to_list_them(runs, capsys):
    assert main(["show", str(runs / "fhs"), "--fact", "nope"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "'nope'" in err and "--list" in err
    assert main(["show", str(runs / "fhs"), "--list"]) == 0
    assert capsys.readouterr().out.split("\n")[0].startswith("rsu\ttable\trank=")


def test_a_folder_without_records_is_named(tmp_path, capsys):
    assert main(["show", str(tmp_path), "--fact", "x"]) == 2
    assert "no records.jsonl" in capsys.readouterr().err


@pytest.mark.model
@pytest.mark.data
def test_show_a_real_smollm2_run(smollm2_fhs_run, tmp_path, capsys):
    run = smollm2_fhs_run["run"]  # one FinCL fact through FHS on SmolLM2, the session's shared run
    (record,) = read_records(run / "records.jsonl")
    out = tmp_path / "page.html"
    assert main(["show", str(run), "--fact", record["id"], "--out", str(out)]) == 0
    soup = page(out)
    assert soup.select("table.context td.fact, div.passage mark.fact")
    assert len(soup.select("table.hypotheses tr")[0].find_all("th")) - 1 == len(record["hypotheses"])
    if record["verifier"]:
        assert len(soup.select("div.heatmap table.verdicts")) == len(record["verifier"]["verdicts"])
    assert not soup.find_all(["script", "link"])  # nothing loaded from the network


@pytest.mark.data
def test_show_finds_the_facts_of_a_bundled_dataset_from_the_run_config(tmp_path, capsys):
    run = tmp_path / "direct"
    assert main(["run", "--dataset", "fincl", "--method", "direct", "--limit", "3", "--quiet", "--out", str(run)]) == 0
    ids = [r["id"] for r in read_records(run / "records.jsonl")]
    out = tmp_path / "page.html"
    assert main(["show", str(run), *[a for i in ids for a in ("--fact", i)], "--out", str(out)]) == 0
    soup = page(out)
    assert [s["data-fact-id"] for s in soup.select("section.fact")] == ids
    for section in soup.select("section.fact"):
        marked = section.select("table.context td.fact, div.passage mark.fact")
        assert len(marked) == 1 and section.select_one("p mark.fact").get_text().strip() in marked[0].get_text()
