"""`make test` lints fhs/ first: ruff, ruff's format check and mypy, configured in pyproject.toml and pinned in
the test extra (tests/make_stub.py runs the real recipe on stub programs)."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT = [["ruff", "check", "fhs"], ["ruff", "format", "--check", "fhs"], ["mypy"], ["lint-imports"]]


def test_make_test_lints_before_it_runs_the_tests(tmp_path):
    from make_stub import run_target

    done, calls = run_target(tmp_path, "test")
    assert done.returncode == 0, done.stderr
    assert calls[:4] == LINT
    assert calls[-1][:3] == ["python", "-m", "dev.test_phases"]  # which runs pytest (tests/test_test_phases.py)


def test_a_lint_finding_stops_make_test_before_pytest(tmp_path):
    from make_stub import run_target

    for program in ("ruff", "mypy"):
        marker = tmp_path / f"fail-{program}"
        marker.touch()
        done, calls = run_target(tmp_path, "test")
        marker.unlink()
        assert done.returncode != 0
        assert calls[-1][0] == program
        assert not any(call[:3] == ["python", "-m", "pytest"] for call in calls)


def test_make_lint_alone_runs_the_same_checks(tmp_path):
    from make_stub import run_target

    done, calls = run_target(tmp_path, "lint")
    assert done.returncode == 0, done.stderr
    assert calls == LINT


def test_the_linters_are_pinned_and_configured_for_fhs():
    tomllib = pytest.importorskip("tomllib")  # Python 3.11 on
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    test_extra = project["project"]["optional-dependencies"]["test"]
    for tool in ("ruff", "mypy"):
        assert any(line.startswith(f"{tool}==") for line in test_extra), tool
    ruff = project["tool"]["ruff"]
    assert ruff["line-length"] == 120 and ruff["target-version"] == "py310"
    assert {"E", "F", "W", "I", "B", "UP"} <= set(ruff["lint"]["select"])
    mypy = project["tool"]["mypy"]
    assert mypy["files"] == ["fhs"] and mypy["check_untyped_defs"] and mypy["warn_unused_ignores"]
    assert "ignore_missing_imports" not in mypy  # only per third-party module, in [[tool.mypy.overrides]]
