"""Portable runs: `fhs archive` packs what runs asked and were answered; `--replay` rebuilds them with no server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from cli_in_process import fhs
from fhs.cli import main
from fhs.plan.sim_server import running, stats
from fhs.run.archive import archive_provenance, archived_runs
from llama_server import free_port
from run_copy import copy_folder
from server_runs import INVOCATION, TIMING, fhs_run, records_of, without, write_inputs

REPLAYED = TIMING | {"cached"}  # a replayed answer is a cached one
VARIANT = ("--beta", "0.3", "--selector", "off")


@pytest.fixture(scope="module")
def served_once(tmp_path_factory):
    """One fhs run against the simulator, made once a module: its inputs, run folder and cache folder."""
    base = tmp_path_factory.mktemp("served")
    facts, concepts = write_inputs(base)
    with running(free_port(), "--fixed-latency", "0.02") as url:
        done = fhs("run", "--facts", str(facts), "--taxonomy", str(concepts), "--domain", "us-gaap", "--method", "fhs",
                   "--out", str(base / "gpu-run"), "--quiet", "--backend", "openai", "--base-url", url,
                   "--cache", str(base / "gpu-cache" / "responses.sqlite"), cwd=base)
    assert done.returncode == 0, done.stderr
    return {"facts": facts, "concepts": concepts, "url": url, "metrics": json.loads(done.stdout), "base": base}


@pytest.fixture
def served(served_once, tmp_path):
    """The module's run, its run and cache folders copied into this test's folder (a test may change them);
    the inputs are shared and only read. The server is gone."""
    for name in ("gpu-run", "gpu-cache"):
        copy_folder(served_once["base"] / name, tmp_path / name)
    return {"facts": served_once["facts"], "concepts": served_once["concepts"], "url": served_once["url"],
            "metrics": served_once["metrics"], "cache": tmp_path / "gpu-cache" / "responses.sqlite",
            "run": tmp_path / "gpu-run"}


def archive(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["archive", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_an_archived_run_replays_with_no_server_and_the_same_records_and_metrics(served, tmp_path, capsys):
    code, out, err = archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out",
                             str(tmp_path / "run.fhsa"))
    assert code == 0, err
    assert "1 run(s), 6 records" in out
    # a laptop: another folder, no server at the URL the run used, a fresh cache of its own
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    shutil.copy(tmp_path / "run.fhsa", laptop / "run.fhsa")
    (laptop / "run.fhsa").chmod(0o444)  # a downloaded archive may be read-only
    code, metrics, err = fhs_run(capsys, served["facts"], served["concepts"], laptop / "replayed", "--backend",
                                 "openai", "--base-url", served["url"], "--replay", str(laptop / "run.fhsa"),
                                 "--cache", str(laptop / "cache" / "responses.sqlite"))
    assert code == 0, err
    assert metrics["llm_calls"] == 0 and metrics["cache_hits"] == served["metrics"]["llm_calls"]
    assert without(metrics, INVOCATION | {"recorded_seconds"}) == \
        without(served["metrics"], INVOCATION | {"recorded_seconds"})
    assert without(records_of(laptop / "replayed"), REPLAYED) == without(records_of(served["run"]), REPLAYED)


def test_a_replay_need_not_name_the_gpu_servers_url(served, tmp_path, capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    code, metrics, err = fhs_run(capsys, served["facts"], served["concepts"], tmp_path / "replayed", "--backend",
                                 "openai", "--replay", str(tmp_path / "run.fhsa"),
                                 "--cache", str(tmp_path / "laptop" / "responses.sqlite"))
    assert code == 0, err
    assert metrics["recall@1"] == served["metrics"]["recall@1"] and metrics["llm_calls"] == 0


def test_a_call_missing_from_the_archive_is_an_error_naming_stage_fact_and_run_and_never_a_request(
        served, tmp_path, capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    with running(free_port(), "--fixed-latency", "0") as url:
        code, _, err = fhs_run(capsys, served["facts"], served["concepts"], tmp_path / "more", "--backend", "openai",
                               "--base-url", url, "--j", "3", "--replay", str(tmp_path / "run.fhsa"),
                               "--cache", str(tmp_path / "laptop" / "responses.sqlite"))
        assert stats(url)["requests"] == 0  # the server was there, and never asked
    assert code == 2
    line = [line for line in err.splitlines() if line.startswith("fhs: error:")][0]
    assert "run.fhsa" in line and "hypothesis call (sample 2" in line and "fact f" in line and "more" in line


def test_verdicts_a_run_took_from_the_ledger_replay_from_the_archive(served, tmp_path, capsys):
    common = (served["facts"], served["concepts"])
    # a re-scoring variant: cached hypotheses, verdicts from the ledger, no selector, so no server needed
    code, variant, err = fhs_run(capsys, *common, tmp_path / "variant", "--backend", "openai", "--base-url",
                                 served["url"], *VARIANT, "--cache", str(served["cache"]))
    assert code == 0, err
    records = records_of(tmp_path / "variant")
    assert all(v["from_ledger"] for r in records.values() for v in r["verifier"]["verdicts"] if v["asked"])
    assert not any(c["purpose"] == "verifier" for r in records.values() for c in r["llm_calls"])
    code, _, err = archive(capsys, str(tmp_path / "variant"), "--cache", str(served["cache"]),
                           "--out", str(tmp_path / "variant.fhsa"))
    assert code == 0, err
    code, replayed, err = fhs_run(capsys, *common, tmp_path / "replayed", "--backend", "openai", "--base-url",
                                  served["url"], *VARIANT, "--replay", str(tmp_path / "variant.fhsa"),
                                  "--cache", str(tmp_path / "laptop" / "responses.sqlite"))
    assert code == 0, err
    assert without(records_of(tmp_path / "replayed"), REPLAYED) == without(records, REPLAYED)


def test_runs_replayed_in_their_order_share_the_replays_own_ledger(served, tmp_path, capsys):
    common = (served["facts"], served["concepts"])
    code, _, err = fhs_run(capsys, *common, tmp_path / "variant", "--backend", "openai", "--base-url",
                           served["url"], *VARIANT, "--cache", str(served["cache"]))
    assert code == 0, err
    code, out, err = archive(capsys, str(tmp_path), "--cache", str(served["cache"]),
                             "--out", str(tmp_path / "both.fhsa"))  # a folder of runs
    assert code == 0 and "2 run(s)" in out, err
    laptop = tmp_path / "laptop" / "responses.sqlite"
    for name, extra in (("gpu-run", ()), ("variant", VARIANT)):
        code, _, err = fhs_run(capsys, *common, tmp_path / "replay" / name, "--backend", "openai", "--base-url",
                               served["url"], *extra, "--replay", str(tmp_path / "both.fhsa"), "--cache", str(laptop))
        assert code == 0, err
        assert without(records_of(tmp_path / "replay" / name), REPLAYED) == \
            without(records_of(tmp_path / name), REPLAYED)


def test_the_archive_holds_the_runs_records_config_metrics_and_provenance(served, tmp_path, capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    (run,) = archived_runs(tmp_path / "run.fhsa")
    assert run.name == str(served["run"]) and len(run.records) == 6
    assert run.run_config["method"] == "fhs" and run.metrics["n_facts"] == 6
    provenance = archive_provenance(tmp_path / "run.fhsa")
    assert provenance["answers"] == served["metrics"]["llm_calls"] and provenance["fhs"] and provenance["id"]


def test_records_without_cache_keys_are_refused_with_the_way_to_record_them(served, tmp_path, capsys):
    lines = (served["run"] / "records.jsonl").read_text().splitlines()
    stripped = [json.loads(line) for line in lines]
    for record in stripped:
        for call in record["llm_calls"]:
            call.pop("key")
    (served["run"] / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stripped))
    code, _, err = archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "x"))
    assert code == 2 and "carry no cache key" in err and "--fresh" in err and str(served["run"]) in err
    assert not (tmp_path / "x").exists()


def test_answers_missing_from_the_cache_name_the_first_call(served, tmp_path, capsys):
    import sqlite3

    other = tmp_path / "other" / "responses.sqlite"
    other.parent.mkdir()
    with sqlite3.connect(served["cache"]) as source, sqlite3.connect(other) as db:
        source.backup(db)
        db.execute("DELETE FROM responses WHERE purpose = 'selector'")
    code, _, err = archive(capsys, str(served["run"]), "--cache", str(other), "--out", str(tmp_path / "x"))
    assert code == 2 and "not in this cache" in err and "selector call of fact f" in err


@pytest.mark.parametrize("content", [b"not sqlite at all" * 10, None])
def test_a_replay_file_that_is_not_an_archive_is_a_one_line_error(content, tmp_path, capsys):
    facts, concepts = write_inputs(tmp_path, 2)
    path = tmp_path / "x.fhsa"
    if content is not None:
        path.write_bytes(content)
    code, _, err = fhs_run(capsys, facts, concepts, tmp_path / "run", "--backend", "openai", "--replay", str(path),
                           "--cache", str(tmp_path / "c" / "responses.sqlite"))
    assert code == 2 and "x.fhsa" in err and ("not an fhs archive" in err or "no such archive" in err)


def test_a_replay_with_another_model_says_which_the_archive_holds(served, tmp_path, capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    code, _, err = fhs_run(capsys, served["facts"], served["concepts"], tmp_path / "r", "--backend", "openai",
                           "--model", "other-model", "--replay", str(tmp_path / "run.fhsa"),
                           "--cache", str(tmp_path / "c" / "responses.sqlite"))
    assert code == 2 and "openai:Qwen/Qwen3-32B" in err and "other-model" in err


@pytest.mark.model
@pytest.mark.data
def test_a_real_models_run_replays_from_its_archive(smollm2_fhs_run, tmp_path, capsys):
    """SmolLM2 in process on one FinCL fact (every FHS stage asks the model; the session's shared run, copied
    here): archived, then replayed with no model at all."""
    cache, first = smollm2_fhs_run["cache"], smollm2_fhs_run["metrics"]
    args = ["run", "--dataset", "fincl", "--method", "fhs", "--profile", "smoke", "--limit", "1", "--quiet"]
    assert first["llm_calls"] > 0
    assert main(["archive", str(smollm2_fhs_run["run"]), "--cache", str(cache), "--out", str(tmp_path / "a.fhsa")]) == 0
    capsys.readouterr()
    import fhs.llm.llama_cpp as llama_module

    def no_model(*_, **__):
        raise AssertionError("a replay loaded the model")

    original = llama_module.LlamaCppBackend
    llama_module.LlamaCppBackend = no_model
    try:
        code = main([*args, "--out", str(tmp_path / "b"), "--replay", str(tmp_path / "a.fhsa"),
                     "--cache", str(tmp_path / "laptop" / "responses.sqlite")])
    finally:
        llama_module.LlamaCppBackend = original
    replayed = json.loads(capsys.readouterr().out)
    assert code == 0
    assert without(replayed, INVOCATION | {"recorded_seconds"}) == without(first, INVOCATION | {"recorded_seconds"})
    assert without(records_of(tmp_path / "b"), REPLAYED) == without(records_of(smollm2_fhs_run["run"]), REPLAYED)
    assert Path(tmp_path / "a.fhsa").stat().st_size > 0


def test_a_chapter_replaying_an_archive_reruns_when_the_archives_content_changes(tmp_path):
    from fhs.book import toc as C
    from fhs.book import execute as B

    (tmp_path / "book").mkdir()
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "fhs").mkdir()
    (tmp_path / "fhs" / "mod.py").write_text("X = 1\n")
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: book/intro\nchapters:\n  - file: book/01_alpha\n")
    (tmp_path / "book" / "intro.md").write_text("# Intro\n")
    (tmp_path / "notebooks" / "profiles.yaml").write_text("profiles:\n  paper:\n    parameters: {replay: null}\n")
    (tmp_path / "notebooks" / "01_alpha.py").write_text('# %% tags=["parameters"]\nreplay = None\n\n# %%\nprint(replay)\n')
    archive_file = tmp_path / "paper.fhsa"
    archive_file.write_bytes(b"first")
    profiles = C.load_profiles(tmp_path / "notebooks" / "profiles.yaml")
    chapters = C.chapters_from_toc(tmp_path)
    log = B.RunLog(tmp_path / "_build" / "executions.json")

    def key() -> str:
        (plan,) = B.plan(chapters, profiles, "paper", log, root=tmp_path, kernel="python3",
                         overrides={"replay": str(archive_file)}, declared={"01_alpha": {"replay"}})
        assert plan.parameters == {"replay": str(archive_file)}
        return plan.key

    first = key()
    assert key() == first
    archive_file.write_bytes(b"second, another run")
    assert key() != first


@pytest.mark.data
def test_the_books_runs_replay_through_llm_study(tmp_path):
    """A chapter's runs (fhs.book.study) against the simulator, archived, rebuilt by a second study from the archive."""
    from fhs.book.study import llm_study

    with running(free_port(), "--fixed-latency", "0") as url:
        study, choice = llm_study("paper", tmp_path / "gpu-runs", llm_limit=2, base_url=url,
                                  cache_dir=tmp_path / "gpu-cache")
        original = study.run_llm("fincl", "fhs", choice)
    assert main(["archive", str(tmp_path / "gpu-runs"), "--cache", str(tmp_path / "gpu-cache" / "responses.sqlite"),
                 "--out", str(tmp_path / "paper.fhsa")]) == 0
    study, choice = llm_study("paper", tmp_path / "laptop-runs", llm_limit=2, base_url=url,
                              cache_dir=tmp_path / "laptop-cache", replay=tmp_path / "paper.fhsa")
    replayed = study.run_llm("fincl", "fhs", choice)
    assert replayed.path.relative_to(tmp_path / "laptop-runs") == original.path.relative_to(tmp_path / "gpu-runs")
    assert without(replayed.records, REPLAYED) == without(original.records, REPLAYED)
    study, choice = llm_study("paper", tmp_path / "more-runs", llm_limit=4, base_url=url,
                              cache_dir=tmp_path / "more-cache", replay=tmp_path / "paper.fhsa")
    with pytest.raises(Exception, match="need calls the archive does not hold"):
        study.run_llm("fincl", "fhs", choice)  # two more facts than the GPU run had


# ---- an archive is a file from a stranger --------------------------------------------------


def tampered(archive: Path, to: Path, change, *, digest: bool = True) -> Path:
    """A copy of ``archive`` changed by ``change(db)``; with ``digest``, its digest made to fit again
    (as an attacker would), so that the checks behind the digest are what answers."""
    import sqlite3

    from fhs.llm.replay import content_digest

    shutil.copy(archive, to)
    to.chmod(0o644)
    db = sqlite3.connect(to)
    with db:
        change(db)
    if digest:
        with db:
            db.execute("UPDATE meta SET value = ? WHERE name = 'digest'", (content_digest(db),))
    db.close()
    return to


def replace_answers(purpose: str, edit):
    """A change to every archived answer of one stage: its text through ``edit``."""

    def change(db):
        for key, text in db.execute("SELECT key, text FROM responses WHERE purpose = ?", (purpose,)).fetchall():
            db.execute("UPDATE responses SET text = ? WHERE key = ?", (edit(text), key))

    return change


def reversed_selection(text: str) -> str:
    """The selector's answer turned around: its last-ranked candidate first, and that one selected."""
    answer = json.loads(text)
    answer["ranked_indices"] = answer["ranked_indices"][::-1]
    answer["selected_index"] = answer["ranked_indices"][0]
    return json.dumps(answer)


def support_all(text: str) -> str:
    import re

    return re.sub(r'"[SCA]+"', lambda m: '"' + "S" * (len(m.group(0)) - 2) + '"', text)


def one_error(err: str) -> str:
    lines = [line for line in err.strip().splitlines() if line.startswith("fhs: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def replay(capsys, served, archive_file: Path, out: Path, cache: Path):
    return fhs_run(capsys, served["facts"], served["concepts"], out, "--backend", "openai", "--replay",
                   str(archive_file), "--cache", str(cache))


def test_an_archive_changed_after_it_was_written_is_refused_by_its_digest(served, tmp_path, capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    changed = tampered(tmp_path / "run.fhsa", tmp_path / "changed.fhsa", lambda db: db.execute(
        "UPDATE responses SET text = text || ' ' WHERE key = (SELECT MIN(key) FROM responses "
        "WHERE purpose = 'selector')"), digest=False)
    code, _, err = replay(capsys, served, changed, tmp_path / "replayed", tmp_path / "laptop" / "responses.sqlite")
    line = one_error(err)
    assert code == 2 and "changed.fhsa" in line and "does not match the digest it carries" in line
    assert not (tmp_path / "replayed" / "records.jsonl").exists()  # refused before any fact
    assert not (tmp_path / "laptop").exists()  # and nothing written for it


def test_a_tampered_answer_whose_digest_fits_is_caught_by_the_archives_own_records(served, tmp_path, capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    changed = tampered(tmp_path / "run.fhsa", tmp_path / "changed.fhsa",
                       replace_answers("selector", reversed_selection))
    code, _, err = replay(capsys, served, changed, tmp_path / "replayed", tmp_path / "laptop" / "responses.sqlite")
    line = one_error(err)
    assert code == 2 and "changed.fhsa" in line and f"the replay of run {served['run']} rebuilt" in line
    # a metric where the means moved, else the first fact whose outcome did
    assert "archive's metrics.json says" in line or ("fact f" in line and "archive's record says" in line), line


def test_archived_metrics_that_its_answers_do_not_give_are_an_error_naming_run_and_metric(served, tmp_path,
                                                                                           capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    claimed = {**served["metrics"], "accuracy": served["metrics"]["accuracy"] + 0.5}
    changed = tampered(tmp_path / "run.fhsa", tmp_path / "changed.fhsa", lambda db: db.execute(
        "UPDATE runs SET metrics = ?", (json.dumps(claimed),)))
    code, _, err = replay(capsys, served, changed, tmp_path / "replayed", tmp_path / "laptop" / "responses.sqlite")
    line = one_error(err)
    assert code == 2 and f"the replay of run {served['run']} rebuilt accuracy = " in line
    assert f"metrics.json says {claimed['accuracy']:.4g}" in line
    # a part of the run is checked against the archived records of that part, which agree
    code, metrics, err = fhs_run(capsys, served["facts"], served["concepts"], tmp_path / "part", "--backend",
                                 "openai", "--replay", str(changed), "--limit", "3",
                                 "--cache", str(tmp_path / "laptop" / "responses.sqlite"))
    assert code == 0 and metrics["n_facts"] == 3, err


def test_an_archive_id_that_names_a_path_reaches_no_ledger_and_a_later_real_run_asks_its_own_verifier(
        served, tmp_path, capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))

    def poison(db):
        db.execute("UPDATE meta SET value = '/../../../..' WHERE name = 'id'")
        replace_answers("verifier", support_all)(db)  # the verdicts a later run would take from a ledger

    poisoned = tampered(tmp_path / "run.fhsa", tmp_path / "poisoned.fhsa", poison)
    cache = tmp_path / "user" / "a" / "b" / "cache" / "responses.sqlite"
    code, _, err = replay(capsys, served, poisoned, tmp_path / "replayed", cache)
    line = one_error(err)  # the changed verdicts change what the selector is asked (calls the archive lacks),
    assert code == 2 and "poisoned.fhsa" in line  # or else the results: either way one line, exit 2
    ledgers = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("verdicts.sqlite"))
    replays = [p for p in ledgers if p.parts[:-2] == cache.parent.relative_to(tmp_path).parts]
    assert len(replays) == 1 and replays[0].parts[-2].startswith("replay-")  # only the replay's own folder
    assert [p for p in ledgers if p not in replays] == [Path("gpu-cache/verdicts.sqlite")]  # the GPU run's
    # the user's own run, with the same cache: every verifier call asked, the GPU run's metrics
    with running(free_port(), "--fixed-latency", "0") as url:
        code, metrics, err = fhs_run(capsys, served["facts"], served["concepts"], tmp_path / "mine", "--backend",
                                     "openai", "--base-url", url, "--cache", str(cache))
    assert code == 0, err
    asked = [c for r in records_of(tmp_path / "mine").values() for c in r["llm_calls"] if c["purpose"] == "verifier"]
    gpu = [c for r in records_of(served["run"]).values() for c in r["llm_calls"] if c["purpose"] == "verifier"]
    assert len(asked) == len(gpu) > 0
    assert without(metrics, INVOCATION | {"recorded_seconds", "config"}) == \
        without(served["metrics"], INVOCATION | {"recorded_seconds", "config"})


MALFORMED = [
    ("no responses table", lambda db: db.execute("DROP TABLE responses"), "no table 'responses'"),
    ("run_config not JSON", lambda db: db.execute("UPDATE runs SET run_config = '{not json'"),
     "run_config of run"),
    ("run_config a list", lambda db: db.execute("UPDATE runs SET run_config = '[1, 2]'"), "not a JSON object"),
    ("no identities table", lambda db: db.execute("DROP TABLE identities"), "no table 'identities'"),
    ("tokens_in not a number", lambda db: db.execute(
        "UPDATE responses SET tokens_in = 'many' WHERE key = (SELECT MIN(key) FROM responses)"),
     "tokens_in = 'many', not a whole number"),
    ("records not gzip", lambda db: db.execute("UPDATE runs SET records = X'00ff'"), "not gzip'd JSON lines"),
    ("an archive of format 1", lambda db: db.execute("UPDATE meta SET value = '1' WHERE name = 'version'"),
     "carries no digest"),
]


@pytest.mark.parametrize("name, change, named", MALFORMED, ids=[case[0] for case in MALFORMED])
def test_a_malformed_archive_is_one_line_naming_the_file_and_what_is_wrong(name, change, named, served, tmp_path,
                                                                            capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    bad = tampered(tmp_path / "run.fhsa", tmp_path / "bad.fhsa", change)
    code, _, err = replay(capsys, served, bad, tmp_path / "replayed", tmp_path / "laptop" / "responses.sqlite")
    line = one_error(err)
    assert code == 2 and "bad.fhsa" in line and named in line, line


def test_an_archive_without_an_id_still_replays(served, tmp_path, capsys):
    archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path / "run.fhsa"))
    bare = tampered(tmp_path / "run.fhsa", tmp_path / "bare.fhsa", lambda db: db.execute(
        "DELETE FROM meta WHERE name = 'id'"))
    code, metrics, err = replay(capsys, served, bare, tmp_path / "replayed", tmp_path / "laptop" / "responses.sqlite")
    assert code == 0, err
    assert metrics["recall@1"] == served["metrics"]["recall@1"]


# ---- fhs archive refuses to write over its inputs, and writes an ordinary file ------------------


def test_archive_refuses_an_out_that_is_one_of_its_inputs(served, tmp_path, capsys):
    import sqlite3

    def answers() -> int:
        with sqlite3.connect(served["cache"]) as db:
            return db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]

    before, mode = answers(), served["cache"].stat().st_mode
    inputs = [served["cache"], served["cache"].with_name("verdicts.sqlite"), served["run"] / "records.jsonl",
              served["run"] / "metrics.json", served["run"] / "run-config.json"]
    for target in inputs:
        contents = target.read_bytes()
        code, out, err = archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(target))
        line = one_error(err)
        assert code == 2 and str(target) in line and "which the archive is made from" in line, line
        assert target.read_bytes() == contents and not out
    assert answers() == before and served["cache"].stat().st_mode == mode
    code, _, err = archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out", str(tmp_path))
    line = one_error(err)
    assert code == 2 and f"{tmp_path}, field 'out': is a directory" in line and ".partial" not in line


def test_an_archive_is_written_with_the_permissions_of_an_ordinary_file(served, tmp_path, capsys):
    import os
    import stat

    for umask in (0o022, 0o077):
        previous = os.umask(umask)
        try:
            code, _, err = archive(capsys, str(served["run"]), "--cache", str(served["cache"]), "--out",
                                   str(tmp_path / f"run-{umask:o}.fhsa"))
        finally:
            os.umask(previous)
        assert code == 0, err
        assert stat.S_IMODE((tmp_path / f"run-{umask:o}.fhsa").stat().st_mode) == 0o666 & ~umask


@pytest.mark.parametrize("content, named", [(b"not sqlite at all " * 100, "not a response cache"),
                                            (None, "no table 'responses'")])
def test_archive_of_a_cache_that_is_not_one_is_a_one_line_error(content, named, served, tmp_path, capsys):
    import sqlite3

    cache = tmp_path / "other.sqlite"
    if content is None:
        with sqlite3.connect(cache) as db:
            db.execute("CREATE TABLE t (x)")
    else:
        cache.write_bytes(content)
    code, _, err = archive(capsys, str(served["run"]), "--cache", str(cache), "--out", str(tmp_path / "x.fhsa"))
    line = one_error(err)
    assert code == 2 and "other.sqlite" in line and named in line
    assert not (tmp_path / "x.fhsa").exists()
