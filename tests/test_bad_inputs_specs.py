"""A dataset spec, the adapter's book, the Makefile and ``--out`` given hostile values (issue 53): one line
naming the file and field, nothing obeyed as markup or shell, no input overwritten."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_in_process import fhs

from fhs.book.adapter_book import book_dataset, index_page, plan_book
from fhs.core.errors import InputError
from fhs.data.datasets.spec_file import read_spec_file
from fhs.run.inputs import load_experiment

ROOT = Path(__file__).resolve().parents[1]
CONCEPTS = ("id,label,definition,datatype\n"
            "Revenues,Revenues,Amount of revenue recognized.,monetaryItemType\n"
            "CostOfRevenue,Cost Of Revenue,Cost of goods sold.,monetaryItemType\n")
FACTS = [{"id": "a1", "context_id": "t1", "modality": "table", "value": "10", "datatype": "monetaryItemType",
          "context": "Total revenues 10 9", "gold": ["Revenues"], "row_header": "Total revenues"},
         {"id": "a2", "context_id": "t1", "modality": "table", "value": "4", "datatype": "monetaryItemType",
          "context": "Cost of revenue 4 3", "gold": ["CostOfRevenue"], "row_header": "Cost of revenue"}]


def write_spec(folder: Path, stem: str = "mine", **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "facts.jsonl").write_text("".join(json.dumps(f) + "\n" for f in FACTS))
    (folder / "concepts.csv").write_text(CONCEPTS)
    spec = {"name": "mine", "facts": "facts.jsonl", "taxonomy": "concepts.csv", **fields}
    path = folder / f"{stem}.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in spec.items() if v is not None}))
    return path


def refused(path: Path, field: str, words: str) -> str:
    """The one line reading the spec at ``path`` ends in, checked to name the file and field."""
    with pytest.raises(InputError) as error:
        load_experiment(str(path))
    line = str(error.value)
    assert str(path.resolve()) in line and f"field '{field}'" in line and words in line, line
    assert "\n" not in line
    return line


# case 15: `^...$` lets a final newline by; the built-in-name guard and the folder name then take it in
@pytest.mark.parametrize("name", ["fincl\n", "mine\n", "a" * 300])
def test_a_name_with_a_final_newline_or_too_long_is_refused(tmp_path, name):
    refused(write_spec(tmp_path, name=name), "name", "not a usable name")


def test_every_pattern_check_takes_the_whole_value(tmp_path):
    """The same `$` slip in a build record's date (dev/measurements.py)."""
    from dev import measurements
    from test_measurements import record

    (tmp_path / "bad.json").write_text(json.dumps(record(date="2026-01-01\n")))
    with pytest.raises(measurements.RecordError, match="field 'date': expected YYYY-MM-DD"):
        measurements.load_records(tmp_path)


def test_a_300_character_file_stem_is_no_name_either(tmp_path):
    path = write_spec(tmp_path, stem="b" * 250, name=None)
    refused(path, "name", "not a usable name")


# case 4: free text is one short line, checked where the spec is read
@pytest.mark.parametrize("description, words", [
    ("first line\n```{literalinclude} ../../../../etc/hostname\n```", "control character"),
    ("tab\there", "control character"),
    ("x" * 1001, "more than 1000"),
])
def test_a_description_is_one_short_line(tmp_path, description, words):
    refused(write_spec(tmp_path, description=description), "description", words)


def test_a_folded_description_is_one_line(tmp_path):
    path = write_spec(tmp_path)
    path.write_text(path.read_text() + "description: >\n  ten facts\n  of one report\n")
    assert read_spec_file(path).description == "ten facts of one report"


HOSTILE = "{literalinclude}`../../../../etc/hostname` <script>alert(1)</script> | $x$ [a](javascript:1) *b*"


def test_a_description_enters_the_book_as_words_not_markup(tmp_path):
    from markdown_it import MarkdownIt

    spec = write_spec(tmp_path / "specs", description=HOSTILE)
    page = index_page(plan_book([book_dataset(spec, tmp_path / "book")]), "smoke")
    html = MarkdownIt("commonmark").enable("table").render(page)
    cell = html.split("<td><code>mine</code></td>", 1)[1].split("</td>", 1)[0]
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in cell
    assert "href" not in cell and "<em>" not in cell and "*b*" in cell
    row = next(line for line in page.splitlines() if line.startswith("| `mine`"))
    assert row.count(" | ") == 2  # the description's `|` stays inside its cell
    assert "{literalinclude}`" not in page and r"\{literalinclude\}\`" in page  # a role MyST would obey


def test_chapter_one_notes_escape_a_description(tmp_path):
    from fhs.book.chapters.readiness import own_dataset_lines
    from fhs.book.study import Study

    spec = write_spec(tmp_path / "specs", description=HOSTILE)
    study = Study.for_profile("smoke", tmp_path / "runs", progress=False)
    [line] = own_dataset_lines(study, [str(spec)])
    assert "<script>" not in line and r"\<script\>" in line and r"\{literalinclude\}" in line


# case 9: a spec's retrieval numbers are held to the rules of their flags
@pytest.mark.parametrize("setting, value, words", [
    ("top_k", -1, "at least 1"), ("top_k", 0, "at least 1"), ("top_k", 2.5, "whole number"),
    ("w_cov", float("nan"), "finite number >= 0"), ("w_cov", -5, "finite number >= 0"),
    ("k1", float("inf"), "finite number >= 0"), ("b", 1.5, "from 0 to 1"),
    ("pool_multiplier", -1, "at least 0"), ("type_filter", 1, "true or false"),
])
def test_a_spec_retrieval_setting_is_checked_like_its_flag(tmp_path, setting, value, words):
    spec = write_spec(tmp_path, retrieval={setting: value})
    refused(spec, f"retrieval.{setting}", words)
    with pytest.raises(InputError, match=f"field 'retrieval.{setting}'"):  # the book stops before any chapter
        book_dataset(spec, tmp_path / "book")


def test_the_flag_and_the_spec_say_the_same_about_nan(tmp_path):
    done = fhs("run", "--dataset", str(write_spec(tmp_path)), "--method", "direct", "--wcov", "nan",
               "--out", "out", cwd=tmp_path)
    spec = refused(write_spec(tmp_path / "b", retrieval={"w_cov": float("nan")}), "retrieval.w_cov", "")
    assert done.returncode == 2 and "must be a finite number >= 0" in done.stderr
    assert "must be a finite number >= 0" in spec


def test_good_retrieval_settings_still_load(tmp_path):
    spec = write_spec(tmp_path, retrieval={"top_k": 5, "w_cov": 0, "k1": 1.2, "b": 1, "pool_multiplier": 0,
                                           "type_filter": False})
    assert load_experiment(str(spec)).retriever is not None


# also seen: a development split that reads the spec's own facts tunes on the test facts
def test_a_dev_split_on_its_own_facts_is_refused(tmp_path):
    itself = write_spec(tmp_path / "a", dev="mine.yaml")
    refused(itself, "dev", "own facts")
    twin = write_spec(tmp_path / "b")
    (tmp_path / "b" / "dev.yaml").write_text(yaml.safe_dump({"name": "d", "facts": "./facts.jsonl",
                                                             "taxonomy": "concepts.csv", "dev": "mine.yaml"}))
    twin.write_text(twin.read_text() + "dev: dev.yaml\n")
    refused(twin, "dev", "own facts")
    other = write_spec(tmp_path / "c")
    (tmp_path / "c" / "dev.jsonl").write_text(json.dumps(FACTS[0]) + "\n")
    (tmp_path / "c" / "dev.yaml").write_text(yaml.safe_dump({"name": "d", "facts": "dev.jsonl",
                                                             "taxonomy": "concepts.csv"}))
    other.write_text(other.read_text() + "dev: dev.yaml\n")
    assert read_spec_file(other).dev == str((tmp_path / "c" / "dev.yaml").resolve())


# case 6: no command writes over what it reads (one guard, fhs.core.outputs.check_out)
TABLE = "Metric,2024,2023,gold\nScope 1,\"1,250\",\"1,100\",ghg:Scope1\nScope 2,830,,ghg:Scope2\n"
CONCEPT_FILE = "id,label,definition,datatype\nghg:Scope1,Scope 1,Direct.,\nghg:Scope2,Scope 2,Bought.,\n"


def out_cases(tmp: Path) -> dict[str, tuple[list[str], Path]]:
    """Each command given an --out that is one of its own inputs: (arguments, the input that must survive)."""
    (tmp / "t.csv").write_text(TABLE)
    (tmp / "c.csv").write_text(CONCEPT_FILE)
    (tmp / "f.htm").write_text("<html><body><p>no facts</p></body></html>")
    (tmp / "data").mkdir()
    (tmp / "data" / "concepts.jsonl").write_text('{"id": "x"}\n')
    (tmp / "link.csv").symlink_to(tmp / "t.csv")
    spec = write_spec(tmp / "specs")
    run = tmp / "run"
    return {
        "from-table onto its table": (["facts", "from-table", "t.csv", "--out", "t.csv"], tmp / "t.csv"),
        "from-table onto a link to its table": (["facts", "from-table", "t.csv", "--out", "link.csv"], tmp / "t.csv"),
        "from-table onto its taxonomy": (["facts", "from-table", "t.csv", "--taxonomy", "c.csv", "--out", "c.csv"],
                                         tmp / "c.csv"),
        "from-ixbrl onto its filing": (["facts", "from-ixbrl", "f.htm", "--taxonomy", "none", "--out", "./f.htm"],
                                       tmp / "f.htm"),
        "show onto the run's records": (["show", "run", "--fact", "a1", "--out", "run/records.jsonl"],
                                        run / "records.jsonl"),
        "taxonomy export into the data": (["taxonomy", "export", "us-gaap-2024", "--data", "data", "--out",
                                           "data/concepts.jsonl"], tmp / "data" / "concepts.jsonl"),
        "plan onto its dataset spec": (["plan", "--profile", "smoke", "--dataset", str(spec), "--out", str(spec)],
                                       spec),
        "bench llm onto its dataset spec": (["bench", "llm", "--dataset", str(spec), "--out", str(spec)], spec),
        "run onto its facts": (["run", "--dataset", str(spec), "--method", "direct", "--out",
                                str(tmp / "specs" / "facts.jsonl")], tmp / "specs" / "facts.jsonl"),
        "data lock into its data folder": (["data", "lock", "--from", "data", "--out", "data/concepts.jsonl"],
                                           tmp / "data" / "concepts.jsonl"),
    }


OUT_CASES = [
    "from-table onto its table", "from-table onto a link to its table", "from-table onto its taxonomy",
    "from-ixbrl onto its filing", "show onto the run's records", "taxonomy export into the data",
    "plan onto its dataset spec", "bench llm onto its dataset spec", "run onto its facts",
    "data lock into its data folder"]


@pytest.fixture(scope="module")
def a_run(tmp_path_factory) -> Path:
    """One finished run (no model), whose folder `fhs show` reads."""
    tmp = tmp_path_factory.mktemp("run")
    done = fhs("run", "--dataset", str(write_spec(tmp / "specs")), "--method", "direct", "--quiet", "--out", "run",
               cwd=tmp)
    assert done.returncode == 0, done.stderr
    return tmp / "run"


@pytest.mark.parametrize("case", OUT_CASES)
def test_no_command_writes_over_its_own_input(tmp_path, a_run, case):
    import shutil

    args, kept = out_cases(tmp_path)[case]
    shutil.copytree(a_run, tmp_path / "run")
    before = kept.read_bytes()
    done = fhs(*args, cwd=tmp_path, env={"FHS_DATA": str(tmp_path / "data")})
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.strip().count("\n") == 0 and "field 'out'" in done.stderr, done.stderr
    assert "which this command reads" in done.stderr or "which the lock is built from" in done.stderr
    assert kept.read_bytes() == before


def test_the_book_script_refuses_the_companions_own_folder_and_its_specs(tmp_path):
    """Run from a copy of the checkout's top (the script writes beside itself), so a failure harms nothing."""
    import shutil

    checkout = tmp_path / "checkout"
    (checkout / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "build_adapter_book.py", checkout / "scripts")
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy(ROOT / name, checkout / name)
    spec = write_spec(tmp_path / "specs")
    before = {path: path.read_bytes() for path in (spec, checkout / "_config.yml", checkout / "_toc.yml")}
    for out in (str(checkout), str(spec)):
        done = subprocess.run([sys.executable, str(checkout / "scripts" / "build_adapter_book.py"), str(spec), "--out", out,
                               "--dry-run"], capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 2 and "field 'out'" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert {path: path.read_bytes() for path in before} == before and not (checkout / "book").exists()


# case 3: the Makefile passes a user's values as data (tests/make_stub.py runs the real recipes on stubs)
SHELL_BAITS = ("X", "Y", "Z", "W", "V", "U", "M")


def no_bait_ran(top: Path) -> None:
    assert not [name for name in SHELL_BAITS if (top / name).exists()]


def test_adapter_book_values_are_words_never_shell(tmp_path):
    from make_stub import run_target

    done, calls = run_target(tmp_path, "adapter-book",
                             DATASETS='`touch X`x.yaml $(touch Y) "my specs/b c.yaml" $(shell touch M)',
                             PROFILE="$(touch Z)", CHAPTERS="01_readiness_gap `touch W`",
                             ADAPTER_BOOK="a b; touch V", ARGS="-p 'x=a b' ;touch U")
    assert done.returncode == 0, done.stderr
    assert calls == [["python", "scripts/build_adapter_book.py", "`touch", "X`x.yaml", "$(touch", "Y)", "my specs/b c.yaml",
                      "$(shell", "touch", "M)", "--profile", "$(touch Z)", "--chapters", "01_readiness_gap",
                      "`touch", "W`", "--out", "a b; touch V", "-p", "x=a b", ";touch", "U"]]
    no_bait_ran(tmp_path / "checkout")


def test_a_spec_path_with_a_space_is_one_argument_through_make_book(tmp_path):
    from make_stub import checkout, run_target

    top = checkout(tmp_path)
    (top / "my specs").mkdir()
    (top / "my specs" / "a.yaml").write_text("facts: f.jsonl\n")
    done, calls = run_target(tmp_path, "book", DATASETS="my specs/a.yaml", PROFILE="smoke")
    assert done.returncode == 0, done.stderr
    assert calls[0][:5] == ["python", "scripts/build_adapter_book.py", "my specs/a.yaml", "--profile", "smoke"]
    done, calls = run_target(tmp_path, "book", DATASETS="'my specs/a.yaml' `touch X`.yaml")
    assert calls[0][2:5] == ["my specs/a.yaml", "`touch", "X`.yaml"]
    unclosed, calls = run_target(tmp_path, "adapter-book", DATASETS="'my specs/a.yaml")
    assert unclosed.returncode != 0 and "DATASETS: No closing quotation" in unclosed.stderr and not calls
    no_bait_ran(top)


def test_the_other_recipes_take_their_values_as_data(tmp_path):
    from make_stub import run_target

    done, calls = run_target(tmp_path, "notebooks", REPLAY="my run $(touch X).fhsa", ARGS="--only `touch Y`")
    assert done.returncode == 0, done.stderr
    assert calls == [["fhs", "data", "fetch"], ["python", "scripts/run_notebooks.py", "--profile", "cpu", "--replay",
                                                "my run $(touch X).fhsa", "--only", "`touch", "Y`"]]
    done, calls = run_target(tmp_path, "notebooks")
    assert calls[1] == ["python", "scripts/run_notebooks.py", "--profile", "cpu"]  # no REPLAY, no --replay
    done, calls = run_target(tmp_path, "test", PYTEST_ARGS='-k "a or b" `touch Z`')
    assert calls == [["ruff", "check", "fhs"], ["ruff", "format", "--check", "fhs"], ["mypy"], ["lint-imports"],
                     ["fhs", "data", "fetch"], ["python", "-m", "dev.test_phases", "--cores=", "-k", "a or b", "`touch",
                                                "Z`"]]
    done, calls = run_target(tmp_path, "rehearsal", REHEARSAL_FRACTION="$(touch W)",
                             REHEARSAL_ARGS="--server-args '--time-scale 10' ;touch V")
    assert calls == [["python", "scripts/rehearsal.py", "--fraction", "$(touch W)", "--port", "8017",
                      "--server-args", "--time-scale 10", ";touch", "V"]]
    done, calls = run_target(tmp_path, "book", DATASETS="  ")  # no specs: the companion's own book
    assert [call[:2] for call in calls] == [["fhs", "data"], ["python", "scripts/run_notebooks.py"],
                                            ["python", "-m"], ["python", "-m"], ["python", "-m"],
                                            ["jupyter-book", "build"], ["python", "-m"]], done.stderr
    done, calls = run_target(tmp_path, "check-browser", CHROMIUM="`touch U`")
    assert done.returncode == 2 and "no '`touch U`' on PATH" in done.stderr
    no_bait_ran(tmp_path / "checkout")


def test_a_retrieval_setting_given_in_code_obeys_the_same_rules(tmp_path):
    from fhs.run.inputs import retrieval_config

    with pytest.raises(InputError, match="field 'top_k': must be at least 1, got 0"):
        retrieval_config(read_spec_file(write_spec(tmp_path)), top_k=0)
    with pytest.raises(InputError, match="field 'w_cov': must be a finite number >= 0, got nan"):
        load_experiment(str(write_spec(tmp_path)), w_cov=float("nan"))


def test_the_install_variables_keep_their_defaults_and_take_a_path_as_data(tmp_path):
    from make_stub import checkout, run_target

    top = checkout(tmp_path)
    shown = subprocess.run(["make", "--no-print-directory", "--eval",
                            'shown: ; @echo "$$FHS_MK_LLAMA_WHEELS|$$FHS_MK_LLAMA_CMAKE_ARGS|$$FHS_MK_PROFILE"', "shown"],
                           cwd=top, capture_output=True, text=True, timeout=60,
                           env={**os.environ, "HOME": str(tmp_path)})
    wheels, cmake, profile = shown.stdout.strip().split("|")
    assert wheels == f"{tmp_path}/.cache/fhs/wheels/llama-cpp-python-0.3.36-portable", shown.stderr
    assert cmake.startswith("-DGGML_NATIVE=OFF ") and profile == "cpu"
    odd = tmp_path / "my wheels $(shell touch M) `touch X`"
    odd.mkdir()
    (odd / "llama_cpp_python-0.3.36-py3-none-any.whl").touch()
    done, _ = run_target(tmp_path, "llama-wheel", LLAMA_WHEELS=str(odd))
    assert done.returncode == 0 and f"using the portable wheel in {odd}" in done.stdout, done.stderr
    assert (odd / ".built").exists()
    no_bait_ran(top)


def test_a_run_never_writes_its_records_over_its_facts(tmp_path):
    (tmp_path / "run").mkdir()
    facts = tmp_path / "run" / "records.jsonl"
    facts.write_text("".join(json.dumps(f) + "\n" for f in FACTS))
    (tmp_path / "c.csv").write_text(CONCEPTS)
    before = facts.read_bytes()
    done = fhs("run", "--facts", "run/records.jsonl", "--taxonomy", "c.csv", "--method", "direct", "--quiet",
               "--fresh", "--out", "run", cwd=tmp_path)
    assert done.returncode == 2 and "field 'out'" in done.stderr and "facts file" in done.stderr, done.stderr
    assert facts.read_bytes() == before
