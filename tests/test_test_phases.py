"""`make test`'s two pytest runs (dev/test_phases.py): the model-free tests, then the model tests, each spread."""

from __future__ import annotations

import os
import sys

import pytest

from dev import test_phases


def test_both_phases_spread_over_the_cores_and_the_model_workers_compute_with_one_thread():
    free, model = test_phases.commands(["-q", "-x"], cores=2, python="py")
    assert free.argv == ["py", "-m", "pytest", "-m", "not model and not vllm", "-n", "4", "-q", "-x"]  # two a core
    assert model.argv == ["py", "-m", "pytest", "-m", "model and not vllm", "-n", "2", "--dist", "loadscope", "-q", "-x"]
    assert free.env == {} and model.env == {"FHS_LLAMA_THREADS": "1", "FHS_DENSE_THREADS": "1"}
    # together: every test the plain run selects (pyproject's addopts leave out vllm), each once
    assert {free.argv[4], model.argv[4]} == {"not model and not vllm", "model and not vllm"}


def test_one_core_runs_without_xdist_at_the_default_threads_and_a_users_markers_or_workers_are_one_plain_run():
    for command in test_phases.commands([], cores=1, python="py"):
        assert "-n" not in command.argv and command.env == {}
    for args in (["-m", "data"], ["-mdata"], ["-n", "4"], ["--numprocesses=3"]):
        assert test_phases.commands(args, cores=2, python="py") == [test_phases.Command(["py", "-m", "pytest", *args])]


def test_the_one_thread_setting_reaches_the_pytest_process(tmp_path):
    shown = tmp_path / "env.txt"
    command = test_phases.Command([sys.executable, "-c", f"import os; open({str(shown)!r}, 'w').write("
                                   "os.environ['FHS_LLAMA_THREADS'] + os.environ['PATH'][:1])"], {"FHS_LLAMA_THREADS": "1"})
    assert test_phases.call(command) == 0
    assert shown.read_text() == "1" + os.environ["PATH"][:1]  # on top of this process's environment


@pytest.mark.parametrize("codes, expected", [((0, 0), 0), ((5, 0), 0), ((0, 5), 0), ((5, 5), 5), ((1, 0), 1),
                                             ((0, 2), 2), ((5, 1), 1)])
def test_the_exit_status_fails_when_a_phase_fails_and_an_empty_phase_is_no_failure(codes, expected):
    assert test_phases.combined(codes) == expected


def test_main_runs_each_phase_and_reads_the_cores_from_make(capsys):
    ran = []
    assert test_phases.main(["--cores=3", "-k", "a or b"], run=lambda command: ran.append(command) or 0) == 0
    assert [c.argv[c.argv.index("-m", 2) + 1] for c in ran] == [p.markers for p in test_phases.PHASES]
    assert ran[0].argv[-4:] == ["-n", "6", "-k", "a or b"] and ran[1].argv[-6:-2] == ["-n", "3", "--dist", "loadscope"]
    ran.clear()
    test_phases.main(["--cores=", "-q"], run=lambda command: ran.append(command) or 0)  # make's default: the cores
    assert ("-n" in ran[0].argv) == ("-n" in ran[1].argv) == (test_phases.usable_cores() > 1)
    with pytest.raises(SystemExit, match="TEST_CORES: expected a whole number"):
        test_phases.main(["--cores=two"], run=lambda command: 0)
