"""`make test`'s two pytest runs (dev/test_phases.py): the model-free tests spread, the model tests in one process."""

from __future__ import annotations

import pytest

from dev import test_phases


def test_the_model_free_tests_spread_over_the_workers_and_the_model_tests_run_in_one_process():
    spread, model = test_phases.commands(["-q", "-x"], workers=2, python="py")
    assert spread == ["py", "-m", "pytest", "-m", "not model and not vllm", "-n", "2", "-q", "-x"]
    assert model == ["py", "-m", "pytest", "-m", "model and not vllm", "-q", "-x"]
    # together: every test the plain run selects (pyproject's addopts leave out vllm), each once
    assert {spread[4], model[4]} == {"not model and not vllm", "model and not vllm"}


def test_one_worker_runs_without_xdist_and_a_users_markers_or_workers_are_one_plain_run():
    assert all("-n" not in command for command in test_phases.commands([], workers=1, python="py"))
    for args in (["-m", "data"], ["-mdata"], ["-n", "4"], ["--numprocesses=3"]):
        assert test_phases.commands(args, workers=2, python="py") == [["py", "-m", "pytest", *args]]


@pytest.mark.parametrize("codes, expected", [((0, 0), 0), ((5, 0), 0), ((0, 5), 0), ((5, 5), 5), ((1, 0), 1),
                                             ((0, 2), 2), ((5, 1), 1)])
def test_the_exit_status_fails_when_a_phase_fails_and_an_empty_phase_is_no_failure(codes, expected):
    assert test_phases.combined(codes) == expected


def test_main_runs_each_phase_and_reads_the_workers_from_make(capsys):
    ran = []
    assert test_phases.main(["--workers=3", "-k", "a or b"], run=lambda command: ran.append(command) or 0) == 0
    assert [command[command.index("-m", 2) + 1] for command in ran] == [p.markers for p in test_phases.PHASES]
    assert ran[0][-4:] == ["-n", "3", "-k", "a or b"]
    ran.clear()
    test_phases.main(["--workers=", "-q"], run=lambda command: ran.append(command) or 0)  # make's default: the cores
    assert ("-n" in ran[0]) == (test_phases.usable_cores() > 1)
    with pytest.raises(SystemExit, match="TEST_WORKERS: expected a whole number"):
        test_phases.main(["--workers=two"], run=lambda command: 0)
