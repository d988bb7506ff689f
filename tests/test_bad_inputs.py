"""A table of bad inputs fed to ``fhs run`` as a user would: exit 2, one line naming where, no traceback, nothing lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_in_process import fhs

ROOT = Path(__file__).resolve().parents[1]
CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n")
GOOD = {"id": "f1", "context_id": "c1", "modality": "table", "value": "10", "datatype": "monetaryItemType",
        "context": "Total revenues 10 9", "gold": ["Revenues"], "row_header": "Total revenues"}


def line(**changes) -> str:
    record = {**GOOD, **changes}
    return json.dumps({k: v for k, v in record.items() if v is not None}) + "\n"


def fhs_process(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The ``fhs`` command as its own process: what a user's shell sees, exit status and all."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "fhs.cli", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=120)


# Each case: (name, how it damages the inputs, extra arguments, what the one line must name)
def _facts(text):
    return lambda d: (d / "facts.jsonl").write_text(GOOD_FACTS + text)


def _file(name: str, data: bytes):
    def write(d: Path) -> None:
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_bytes(data)
    return write


def _old_cache(d: Path) -> None:
    import sqlite3

    (d / "c").mkdir()
    db = sqlite3.connect(d / "c" / "responses.sqlite")
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT NOT NULL)")
    db.commit()
    db.close()


def _dangling(d: Path) -> None:
    (d / "link").symlink_to(d / "nowhere")


def _damaged_cache(d: Path) -> None:
    """A response cache with one page overwritten: the root of its key index, which every lookup reads."""
    import sqlite3

    from fhs.llm.cache import ResponseCache
    from fhs.llm.contract import Response

    cache = ResponseCache(d / "c" / "responses.sqlite")
    cache.put_many([(f"k{i:05d}", "openai", "fake", "p", Response(text="x" * 200, tokens_in=1, tokens_out=1,
                                                                  seconds=0.1)) for i in range(3000)])
    cache.close()
    with sqlite3.connect(d / "c" / "responses.sqlite") as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = db.execute("PRAGMA page_size").fetchone()[0]
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'sqlite_autoindex_responses_1'"
                             ).fetchone()
    with open(d / "c" / "responses.sqlite", "r+b") as handle:
        handle.seek((root - 1) * size)
        handle.write(b"\xff" * size)


def _archive(change: str | None = None, *, digest: bool = True):
    """An `fhs archive` of the finished run as bad.fhsa, then changed by the SQL ``change`` (its digest made
    to fit again, as a careful attacker would, unless ``digest`` is False)."""

    def make(d: Path) -> None:
        import sqlite3

        from fhs.llm.cache import ResponseCache
        from fhs.llm.replay import content_digest
        from fhs.run.archive import pack

        ResponseCache(d / "empty" / "responses.sqlite").close()
        pack([d / "out"], d / "bad.fhsa", cache=d / "empty" / "responses.sqlite")
        with sqlite3.connect(d / "bad.fhsa") as db:
            if change:
                db.executescript(change)
            if digest:
                db.execute("UPDATE meta SET value = ? WHERE name = 'digest'", (content_digest(db),))

    return make


def _spec(text: str):
    return lambda d: (d / "s.yaml").write_text("facts: facts.jsonl\ntaxonomy: concepts.csv\n" + text)


# nine levels of anchors, each referring ten times to the one before: 10^9 values from 600 bytes
BOMB = "".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" if i else "a0: &a0 [x]\n"
               for i in range(10))


# An OpenAI-compatible server that is never reached: each case fails before the first request.
SERVED = ["--method", "structured", "--domain", "us-gaap", "--backend", "openai", "--model", "fake",
          "--base-url", "http://127.0.0.1:9", "--cache", "c/responses.sqlite"]
# The finished run again with the selector, answered from bad.fhsa (into a new folder)
REPLAYED = ["--selector", "on", "--domain", "us-gaap", "--backend", "openai", "--replay", "bad.fhsa",
            "--cache", "c/responses.sqlite", "--out", "out2"]


GOOD_FACTS = line() + line(id="f2", value="9")
CASES = [
    ("facts not UTF-8", lambda d: (d / "facts.jsonl").write_bytes(GOOD_FACTS.encode() + b'{"id": "\xff"}\n'),
     [], ["facts.jsonl:3", "not UTF-8"]),
    ("taxonomy not UTF-8", lambda d: (d / "concepts.csv").write_bytes(CONCEPTS.encode() + b"X,\xe9t\xe9\n"),
     [], ["concepts.csv:4", "not UTF-8"]),
    ("CSV unclosed quote", lambda d: (d / "concepts.csv").write_text(
        CONCEPTS.replace("Cost of goods sold.", '"Cost of goods sold.') + "Assets,Assets,Things owned.,x\n"),
     [], ["concepts.csv:3", "never closed"]),
    ("CSV field over the limit", lambda d: (d / "concepts.csv").write_text(
        CONCEPTS + 'Big,Big,"' + "x" * (17 * 1024 * 1024) + '",x\n'),
     [], ["concepts.csv:4", "MiB"]),
    ("unknown fact field", _facts(line(id="f3", row_header=None, row="Total revenues")),
     [], ["facts.jsonl:3", "field 'row'", "row_header"]),
    ("empty facts file", lambda d: (d / "facts.jsonl").write_text("\n"), [], ["facts.jsonl", "no facts"]),
    ("empty value and context", _facts(line(id="f3", value="", context=" ")),
     [], ["facts.jsonl:3", "field 'value'"]),
    ("gold never known", lambda d: (d / "facts.jsonl").write_text(line(gold=["Sales"]) + line(id="f2", gold=["X"])),
     ["--fresh"], ["field 'gold'", "Sales"]),
    ("limit -1", None, ["--limit", "-1"], ["--limit", "at least 1"]),
    ("sample 0", None, ["--sample", "0"], ["--sample", "at least 1"]),
    ("wcov nan", None, ["--wcov", "nan"], ["--wcov", "finite"]),
    ("out is a file", lambda d: (d / "plain").write_text("x"), ["--out", "plain"], ["plain", "not a run directory"]),
    ("out under a file", lambda d: (d / "plain").write_text("x"), ["--out", "plain/run"], ["plain"]),
    ("records with a non-record line", lambda d: (d / "out" / "records.jsonl").write_text(
        (d / "out" / "records.jsonl").read_text().replace("\n", "\nnot a record\n", 1)),
     [], ["records.jsonl:2", "not a record"]),
    ("run held by another process", lambda d: (d / "out" / "run.lock").write_text(
        json.dumps({"pid": os.getpid(), "host": os.uname().nodename, "started": "now"})),
     [], ["pid", "holds this run directory"]),
    ("blank gold id under prefix match", _facts(line(id="f3", gold=[" "], metadata={"gold_match": "prefix"})),
     [], ["facts.jsonl:3", "field 'gold'", "blank"]),
    ("out inside the data directory", None, ["--data", ".", "--out", "runs/x"],
     ["runs/x", "field 'out'", "inside the data directory"]),
    ("out is a dangling symbolic link", _dangling, ["--out", "link"], ["link", "symbolic link", "does not exist"]),
    ("verdict ledger not a database", _file("c/verdicts.sqlite", b"not a database " * 100), SERVED,
     ["verdicts.sqlite", "not a usable verdict ledger"]),
    ("response cache of an older layout", _old_cache, SERVED,
     ["responses.sqlite", "another layout", "tokens_in"]),
    ("response cache with a damaged page", _damaged_cache, [*SERVED, "--out", "out2"],
     ["responses.sqlite", "the response cache is damaged", "malformed", ".recover"]),
    ("request timeout 0", None, ["--request-timeout", "0"], ["--request-timeout", "above 0"]),
    ("give-up time nan", None, ["--give-up-after", "nan"], ["--give-up-after", "finite"]),
    ("retry backoff 0", None, ["--retry-backoff", "0"], ["--retry-backoff", "above 0"]),
    ("archive changed after it was written", _archive("UPDATE meta SET value = 'x' WHERE name = 'provenance'",
                                                      digest=False), REPLAYED,
     ["bad.fhsa", "does not match the digest it carries"]),
    ("archive with no responses table", _archive("DROP TABLE responses"), REPLAYED,
     ["bad.fhsa", "no table 'responses'"]),
    ("archive run_config not JSON", _archive("UPDATE runs SET run_config = '{not json'"), REPLAYED,
     ["bad.fhsa", "the run_config of run ", "/out is not a JSON object"]),
    ("archive run_config a list", _archive("UPDATE runs SET run_config = '[1]'"), REPLAYED,
     ["bad.fhsa", "/out is not a JSON object"]),
    ("archive with no identities table", _archive("DROP TABLE identities"), REPLAYED,
     ["bad.fhsa", "no table 'identities'"]),
    ("archive tokens_in not a number", _archive(
        "INSERT INTO responses VALUES ('k', 'openai', 'm', 'p', 't', 'many', 1, 0.5, 0)"), REPLAYED,
     ["bad.fhsa", "tokens_in = 'many', not a whole number"]),
    ("archive with no digest", _archive("DELETE FROM meta WHERE name = 'digest'", digest=False), REPLAYED,
     ["bad.fhsa", "carries no digest"]),
]


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A run directory with two finished records, made once."""
    base = tmp_path_factory.mktemp("finished")
    (base / "concepts.csv").write_text(CONCEPTS)
    (base / "facts.jsonl").write_text(GOOD_FACTS)
    done = fhs_process("run", "--facts", "facts.jsonl", "--taxonomy", "concepts.csv", "--method", "direct",
                       "--out", "out", "--quiet", cwd=base)
    assert done.returncode == 0, done.stderr
    return base


@pytest.mark.parametrize("name, damage, extra, named", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_one_line_exit_2_and_loses_nothing(name, damage, extra, named, finished, tmp_path):
    work = tmp_path / "w"
    subprocess.run(["cp", "-r", str(finished), str(work)], check=True)
    if damage is not None:
        damage(work)
    before = (work / "out" / "records.jsonl").read_bytes()
    args = ["run", "--facts", "facts.jsonl", "--taxonomy", "concepts.csv", "--method", "direct", "--out", "out",
            "--quiet", *extra]
    done = fhs(*args, cwd=work)
    errors = [l for l in done.stderr.strip().splitlines() if not l.startswith("fhs: warning:") and not _facts_note(l)]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(errors) == 1 and errors[0].startswith("fhs: error: "), done.stderr
    for part in named:
        assert part in errors[0], errors[0]
    assert (work / "out" / "records.jsonl").read_bytes() == before  # no finished record lost


def test_a_torn_records_tail_is_dropped_with_a_warning_and_the_run_finishes(finished, tmp_path):
    work = tmp_path / "w"
    subprocess.run(["cp", "-r", str(finished), str(work)], check=True)
    records = work / "out" / "records.jsonl"
    kept = records.read_text().splitlines()[0] + "\n"
    records.write_text(kept + '{"id": "f2", "ra')
    done = fhs_process("run", "--facts", "facts.jsonl", "--taxonomy", "concepts.csv", "--method", "direct",
                       "--out", "out", "--quiet", cwd=work)
    assert done.returncode == 0 and "dropped a torn last line" in done.stderr
    assert json.loads(done.stdout)["n_new"] == 1 and records.read_text().startswith(kept)


# ---- the other commands: fhs facts from-ixbrl, fhs bench, fhs show ---------------------------

FILING = ('<?xml version="1.0" encoding="utf-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml" '
          'xmlns:ix="http://www.xbrl.org/2013/inlineXBRL" xmlns:gaap="http://fasb.org/us-gaap/2024">\n'
          '<body>\n<p>Revenue was <ix:nonFraction name="gaap:Revenues" contextRef="c" unitRef="usd" '
          'scale="{scale}" id="f1">5</ix:nonFraction> dollars.</p>\n</body></html>\n')
OTHERS = [
    ("from-ixbrl scale out of range", _file("x.htm", FILING.format(scale="99999999").encode()),
     ["facts", "from-ixbrl", "x.htm", "--out", "f.jsonl", "--taxonomy", "none"],
     ["x.htm:4", "field 'scale of ix:nonFraction f1'", "-30 to 30"]),
    ("from-ixbrl scale of 900000", _file("x.htm", FILING.format(scale="900000").encode()),
     ["facts", "from-ixbrl", "x.htm", "--out", "f.jsonl", "--taxonomy", "none"], ["x.htm:4", "scale"]),
    ("from-ixbrl one filing twice", _file("x.htm", FILING.format(scale="6").encode()),
     ["facts", "from-ixbrl", "x.htm", "./x.htm", "--out", "f.jsonl", "--taxonomy", "none"],
     ["x.htm", "given twice"]),
    ("bench retrieval limit 0", None, ["bench", "retrieval", "--dataset", "fincl", "--limit", "0"],
     ["--limit", "at least 1"]),
    ("bench retrieval limit -5", None, ["bench", "retrieval", "--dataset", "fincl", "--limit", "-5"],
     ["--limit", "at least 1"]),
    ("bench llm facts 0", None, ["bench", "llm", "--facts", "0"], ["--facts", "at least 1"]),
    ("show a run-config that is not JSON", _file("out/run-config.json", b"{not json"),
     ["show", "out", "--fact", "f1"], ["run-config.json", "not valid JSON"]),
    ("archive a cache that is not SQLite", _file("c.sqlite", b"not sqlite " * 100),
     ["archive", "out", "--cache", "c.sqlite", "--out", "f.jsonl"], ["c.sqlite", "not a response cache"]),
    ("archive a cache with no responses table", _archive("DROP TABLE responses"),  # an archive is SQLite
     ["archive", "out", "--cache", "bad.fhsa", "--out", "f.jsonl"], ["bad.fhsa", "no table 'responses'"]),
    ("archive onto its cache", _archive(), ["archive", "out", "--cache", "empty/responses.sqlite", "--out",
                                            "empty/responses.sqlite"],
     ["empty/responses.sqlite", "field 'out'", "is the response cache", "destroy"]),
    ("archive onto a run's records", _archive(), ["archive", "out", "--cache", "empty/responses.sqlite", "--out",
                                                  "out/records.jsonl"],
     ["out/records.jsonl", "records.jsonl, which the archive is made from"]),
    ("archive onto a directory", _archive(), ["archive", "out", "--cache", "empty/responses.sqlite", "--out",
                                              "empty"],
     ["empty, field 'out': is a directory"]),
    ("spec file with an alias bomb", _spec(BOMB + "retrieval:\n  pool_multiplier: *a9\n"),
     ["run", "--dataset", "s.yaml", "--method", "direct", "--out", "o2"], ["s.yaml", "aliases", "10,000"]),
    ("spec value quoted by its field, not expanded", _spec("retrieval:\n  pool_multiplier: &b [[x, x], [x, x]]\n"
                                                           "  w_cov: [*b, *b]\n"),
     ["run", "--dataset", "s.yaml", "--method", "direct", "--out", "o2"],
     ["s.yaml", "field 'retrieval.pool_multiplier'", "got a list of 2 value(s)"]),
    ("plan --set selector_candidates=-1", None, ["plan", "--profile", "smoke", "--set", "selector_candidates=-1"],
     ["field 'set selector_candidates'", "at least 1, got -1"]),
    ("plan --set selector_candidates=nan", None, ["plan", "--profile", "smoke", "--set", "selector_candidates=nan"],
     ["field 'set selector_candidates'", "whole number, got 'nan'"]),
    ("plan --throughput 1e-300", None, ["plan", "--profile", "smoke", "--throughput", "1e-300"],
     ["--throughput", "at least 0.01 tokens/s"]),
]


@pytest.mark.parametrize("name, damage, args, named", OTHERS, ids=[c[0] for c in OTHERS])
def test_other_commands_answer_bad_input_in_one_line_exit_2(name, damage, args, named, finished, tmp_path):
    work = tmp_path / "w"
    subprocess.run(["cp", "-r", str(finished), str(work)], check=True)
    if damage is not None:
        damage(work)
    before = (work / "out" / "records.jsonl").read_bytes()
    done = fhs(*args, cwd=work)
    errors = [l for l in done.stderr.strip().splitlines() if not l.startswith("fhs: warning:") and not _facts_note(l)]
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert len(errors) == 1 and errors[0].startswith("fhs: error: "), done.stderr
    for part in named:
        assert part in errors[0], errors[0]
    assert not (work / "f.jsonl").exists()  # nothing half written
    assert (work / "out" / "records.jsonl").read_bytes() == before


def _facts_note(line: str) -> bool:
    """fhs run's first line (how many facts it takes), which precedes any error; or a line llama.cpp's C code
    prints while it reads the token vocabulary (verbose=False does not silence it), which is not fhs's."""
    if line.startswith("llama_context: "):
        return True
    return line.startswith("fhs: ") and (" facts, no sample taken (" in line or ": a context-level sample of " in line
                                         or ": the first " in line)


def test_a_read_only_cache_folder_is_named_and_not_to_be_deleted(finished, tmp_path, capsys, monkeypatch):
    """The cache's folder is read-only. Root may write anywhere, so under root SQLite's refusal and the
    folder's permission are what a user would meet, stood in for at the two calls that see them."""
    import sqlite3

    from fhs.cli import main

    work = tmp_path / "w"
    subprocess.run(["cp", "-r", str(finished), str(work)], check=True)
    folder = work / "c"
    folder.mkdir()
    folder.chmod(0o555)
    if os.geteuid() == 0:
        import fhs.llm.cache as cache_module

        real_connect, real_access = sqlite3.connect, os.access

        def connect(path, *args, **kwargs):
            if Path(path).resolve().parent == folder:
                raise sqlite3.OperationalError("unable to open database file")
            return real_connect(path, *args, **kwargs)

        monkeypatch.setattr(cache_module.sqlite3, "connect", connect)
        monkeypatch.setattr(os, "access", lambda path, mode, **kw: False if Path(path).resolve() == folder
                            else real_access(path, mode, **kw))
    monkeypatch.chdir(work)
    try:
        code = main(["run", "--facts", "facts.jsonl", "--taxonomy", "concepts.csv", "--out", "out2", "--quiet",
                     *SERVED])
    finally:
        folder.chmod(0o755)
    errors = [l for l in capsys.readouterr().err.strip().splitlines() if not _facts_note(l)]
    assert code == 2 and len(errors) == 1, errors
    assert "c/responses.sqlite" in errors[0] and f"its folder {folder.resolve()} is read-only" in errors[0]
    assert "make it writable" in errors[0] and "delete" not in errors[0]
