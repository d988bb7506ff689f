"""The installed package stands alone: built as a wheel and installed into a fresh virtual environment, ``fhs plan``
and ``fhs run`` work from a folder outside the checkout, with no path into it (no PYTHONPATH, no notebooks/,
scripts/ or examples/ to read).

The new environment has no pip and no site packages of the system's; the dependencies come from the environment
running the tests, through a ``.pth`` line, and only the wheel's own files are unpacked into it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from fhs.core.files import cache_dir

pytestmark = [pytest.mark.data, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def build_wheel(tmp: Path) -> Path:
    """The package's wheel, built offline from a copy of its sources (the build writes beside them)."""
    src = tmp / "src"
    shutil.copytree(ROOT / "fhs", src / "fhs", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(tmp / "dist"), str(src)], check=True, capture_output=True, timeout=300)
    return next((tmp / "dist").glob("fhs-*.whl"))


def fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A venv holding the wheel's files, its dependencies read from this interpreter's site packages; its python."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "dependencies.pth").write_text("".join(f"{path}\n" for path in sorted(deps)))
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(site)
    return python


def borrowed_cache(tmp: Path) -> Path:
    """A cache folder of the test's own that reads the user's built indexes, kernels and chapter 8's converted files,
    so the plan takes seconds, and writes its spec where the user's cache is left alone."""
    own, user = tmp / "cache", cache_dir()
    (own / "pcs").mkdir(parents=True)
    for entry in (user.iterdir() if user.is_dir() else ()):
        if entry.is_dir() and entry.name not in ("pcs", "llm"):
            (own / entry.name).symlink_to(entry)
    for built in (user / "pcs").glob("*.jsonl"):
        (own / "pcs" / built.name).symlink_to(built)
    return own


def test_a_wheel_installed_outside_the_checkout_plans_and_runs(tmp_path):
    python = fresh_venv(tmp_path, build_wheel(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    env["FHS_CACHE"] = str(borrowed_cache(tmp_path))

    def fhs(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(python), "-m", "fhs.cli", *argv], cwd=elsewhere, env=env, capture_output=True,
                              text=True, timeout=600)

    where = subprocess.run([str(python), "-c", "import fhs; print(fhs.__file__)"], cwd=elsewhere, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where).is_relative_to(tmp_path / "venv") and not Path(where).is_relative_to(ROOT)

    plan = fhs("plan", "--profile", "smoke", "--json", "--quiet")
    assert plan.returncode == 0, plan.stderr[-2000:]
    planned = json.loads(plan.stdout)
    assert planned["profile"] == "smoke" and planned["total"]["requests"] > 0
    assert {row["chapter"] for row in planned["rows"]} >= {"01_readiness_gap", "02_main_results"}

    run = fhs("run", "--dataset", "fincl", "--method", "direct", "--limit", "20", "--out", "runs/direct", "--quiet")
    assert run.returncode == 0, run.stderr[-2000:]
    metrics = json.loads((elsewhere / "runs" / "direct" / "metrics.json").read_text())
    assert metrics["method"] == "direct" and metrics["n_facts"] == 20
