"""``fhs show`` on a run folder that changed or came from someone else: only what the run stamped is shown.

Runs are made by ``fhs run --facts ... --taxonomy ...``, which stamps the
SHA-256 of what it read; the page must show today's files only when they
still have those digests, say which input changed otherwise, never read a
path the stamp does not vouch for, and survive records edited by hand.
"""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup

from fhs.cli import main
from fhs.run.records import read_records
from test_explorer import runs  # noqa: F401 (the scripted FHS run, a fixture)

CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n")
FACT = {"id": "f1", "context_id": "c1", "modality": "text", "value": "10", "datatype": "monetaryItemType",
        "context": "Total revenues were 10 million this year.", "gold": ["Revenues"],
        "sentence": "Total revenues were 10 million this year."}


@pytest.fixture
def direct_run(tmp_path, capsys):
    (tmp_path / "concepts.csv").write_text(CONCEPTS)
    (tmp_path / "facts.jsonl").write_text(json.dumps(FACT) + "\n")
    assert main(["run", "--facts", str(tmp_path / "facts.jsonl"), "--taxonomy", str(tmp_path / "concepts.csv"),
                 "--method", "direct", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    capsys.readouterr()
    return tmp_path


def show(capsys, run, *extra) -> tuple[str, str]:
    out = run.parent / "page.html"
    code = main(["show", str(run), "--fact", "f1", "--out", str(out), *extra])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    return out.read_text(encoding="utf-8"), err


def notes(html: str) -> str:
    return " ".join(p.get_text() for p in BeautifulSoup(html, "html.parser").select("p.note"))


def test_unchanged_inputs_are_shown(capsys, direct_run):
    html, _ = show(capsys, direct_run / "run")
    passage = BeautifulSoup(html, "html.parser").select_one("div.passage")
    assert "Total revenues were" in passage.get_text() and "changed since the run" not in html
    assert "Amount of revenue recognized." not in html and "Revenues" in html


def test_an_edited_facts_file_is_not_shown_and_the_page_says_it_changed(capsys, direct_run):
    (direct_run / "facts.jsonl").write_text(json.dumps({**FACT, "context": "EDITED passage, 10 apples."}) + "\n")
    html, _ = show(capsys, direct_run / "run")
    assert "EDITED passage" not in html  # today's text is not shown under the run's records
    assert not BeautifulSoup(html, "html.parser").select("div.passage")  # nor any context at all
    assert "facts.jsonl changed since the run" in notes(html) and "inputs.facts" in notes(html)


def test_an_edited_taxonomy_loses_its_labels_and_the_page_says_so(capsys, direct_run):
    (direct_run / "concepts.csv").write_text(CONCEPTS.replace("Cost Of Revenue", "Edited Label Here"))
    html, _ = show(capsys, direct_run / "run")
    assert "Edited Label Here" not in html
    assert "concepts.csv changed since the run" in notes(html) and "inputs.taxonomy" in notes(html)
    assert BeautifulSoup(html, "html.parser").select_one("div.passage")  # the facts still match their digest


@pytest.mark.parametrize("stamp", ["none", "another digest"])
def test_a_path_the_stamp_does_not_vouch_for_is_never_shown(capsys, direct_run, stamp):
    secret = direct_run / "elsewhere.jsonl"  # a readable file of the reader's, named by a shared run folder
    secret.write_text(json.dumps({**FACT, "context": "SECRET of the reader, 10 keys."}) + "\n")
    config_path = direct_run / "run" / "run-config.json"
    config = json.loads(config_path.read_text())
    config["sources"]["facts"] = str(secret)
    if stamp == "none":
        del config["inputs"]["facts"]
    config_path.write_text(json.dumps(config))
    html, _ = show(capsys, direct_run / "run")
    assert "SECRET" not in html and not BeautifulSoup(html, "html.parser").select("div.passage")
    assert "context not shown" in notes(html)


def test_a_file_that_is_not_facts_is_never_quoted(capsys, direct_run):
    config_path = direct_run / "run" / "run-config.json"
    config = json.loads(config_path.read_text())
    other = direct_run / "notes.txt"
    other.write_text('{"password": "hunter2"}\n')
    config["sources"]["facts"] = str(other)
    config_path.write_text(json.dumps(config))
    html, err = show(capsys, direct_run / "run")
    assert "hunter2" not in html and "password" not in html and "password" not in err


def edit_record(path, change):
    records = read_records(path)
    for record in records:
        change(record)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def uneven_dimensions(record):
    record["hypotheses"][1]["dimensions"] = {"FAMILY": "Equity", "EXTRA": "hand-written"}
    record["verifier"]["verdicts"][0]["entries"] = {cid: {"FAMILY": "support"}
                                                    for cid in record["verifier"]["window"]["ids"]}


def none_pool_score(record):
    record["pool"]["scores"][0] = None
    record["pool"]["normalized"][1] = "high"
    record["verifier"]["vbar"][record["ranking"][0]] = None


def verdict_without_asked(record):
    for verdicts in record["verifier"]["verdicts"]:
        del verdicts["asked"]
        del verdicts["parsed"]


def out_of_shape(record):
    record.update(verifier="oops", pool=5, hypotheses={"a": 1}, rankings=[3], queries=None)


@pytest.mark.parametrize("change", [uneven_dimensions, none_pool_score, verdict_without_asked, out_of_shape],
                         ids=lambda f: f.__name__)
def test_hand_edited_records_still_make_a_page(runs, capsys, change):  # noqa: F811 (the fixture)
    edit_record(runs / "fhs" / "records.jsonl", change)
    out = runs / "page.html"
    code = main(["show", str(runs / "fhs"), "--fact", "rsu", "--fact", "txt", "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 0 and "Traceback" not in err, err
    soup = BeautifulSoup(out.read_text(encoding="utf-8"), "html.parser")
    assert [s["data-fact-id"] for s in soup.select("section.fact")] == ["rsu", "txt"]
    if change is uneven_dimensions:  # every hypothesis shows every dimension any of them has
        rows = soup.select("section.fact")[0].select("table.hypotheses tr")
        assert "EXTRA" in [r.find("th").get_text() for r in rows]


def test_show_list_escapes_terminal_control_characters(capsys, direct_run):
    path = direct_run / "run" / "records.jsonl"
    edit_record(path, lambda r: r.update(id="f1\x1b[2J\x1b]0;owned\x07", modality="text\x1b[31m"))
    assert main(["show", str(direct_run / "run"), "--list"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out
    assert out.startswith("f1\\x1b[2J\\x1b]0;owned\\x07\ttext\\x1b[31m\trank=")
