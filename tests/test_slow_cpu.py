"""scripts/slow_cpu.py throttles a command with a cgroup CPU quota, and the provenance record reads it back."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fhs.run.machine import cpu_limit, cpu_record

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "slow_cpu.py"
spec = importlib.util.spec_from_file_location("slow_cpu", SCRIPT)
slow_cpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(slow_cpu)


def test_quota_makes_the_cores_that_many_times_slower():
    assert slow_cpu.quota_us(1.6, 2, 10_000) == 12_500
    assert slow_cpu.quota_us(1.0, 2, 10_000) == 20_000
    assert slow_cpu.quota_us(50.0, 1, 10_000) == 1000  # the kernel's floor
    with pytest.raises(ValueError, match="at least 1"):
        slow_cpu.quota_us(0.5, 2)


def test_own_cgroups_reads_both_versions():
    v1 = "4:memory:/a\n2:cpu,cpuacct:/box/x\n0::/\n"
    assert slow_cpu.own_cgroups(v1)["cpu"] == "/box/x"
    assert slow_cpu.own_cgroups(v1)["cpuacct"] == "/box/x"
    assert slow_cpu.own_cgroups("0::/user.slice/me\n")[""] == "/user.slice/me"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cpu_limit_takes_the_tightest_quota_up_the_v1_tree(tmp_path):
    _write(tmp_path / "cpu" / "cpu.cfs_quota_us", "-1\n")
    _write(tmp_path / "cpu" / "cpu.cfs_period_us", "100000\n")
    _write(tmp_path / "cpu" / "box" / "cpu.cfs_quota_us", "150000\n")
    _write(tmp_path / "cpu" / "box" / "cpu.cfs_period_us", "100000\n")
    _write(tmp_path / "cpu" / "box" / "slow" / "cpu.cfs_quota_us", "12500\n")
    _write(tmp_path / "cpu" / "box" / "slow" / "cpu.cfs_period_us", "10000\n")
    assert cpu_limit("3:cpu:/box/slow\n1:memory:/x\n", tmp_path) == "1.25 cores (cgroup CPU quota)"
    assert cpu_limit("3:cpu:/box\n", tmp_path) == "1.50 cores (cgroup CPU quota)"
    assert cpu_limit("3:cpu:/\n", tmp_path) == "none"
    assert slow_cpu.cpu_hierarchy(tmp_path) == ("v1", tmp_path / "cpu")


def test_cpu_limit_reads_v2_cpu_max(tmp_path):
    _write(tmp_path / "cgroup.controllers", "cpuset cpu io memory pids\n")
    _write(tmp_path / "cpu.max", "max 100000\n")
    _write(tmp_path / "me" / "cpu.max", "50000 100000\n")
    assert cpu_limit("0::/me\n", tmp_path) == "0.50 cores (cgroup CPU quota)"
    assert cpu_limit("0::/\n", tmp_path) == "none"
    assert slow_cpu.cpu_hierarchy(tmp_path) == ("v2", tmp_path)


def test_no_cpu_controller_is_a_clear_error(tmp_path):
    with pytest.raises(slow_cpu.CannotSlow, match="no cgroup cpu controller"):
        slow_cpu.SlowGroup(2.0, root=tmp_path)


def _can_make_groups() -> bool:
    try:
        group = slow_cpu.SlowGroup(1.0)
    except slow_cpu.CannotSlow:
        return False
    group.remove()
    return True


@pytest.mark.skipif(not _can_make_groups(), reason="needs write access to a cgroup cpu controller (root)")
def test_a_throttled_command_sees_its_quota_and_the_group_is_removed():
    """The real path: the child runs in the new group, cpu_record() reports its quota, and nothing is left."""
    cores = slow_cpu.usable_cores()
    code = "from fhs.run.machine import cpu_record; print(cpu_record()['CPU time limit'])"
    out = subprocess.run([sys.executable, str(SCRIPT), "2", "--", sys.executable, "-c", code],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == f"{cores / 2:.2f} cores (cgroup CPU quota)"
    assert "2 times slower" in out.stderr
    group = out.stderr.split("(cgroup ")[1].split()[1]
    assert not Path(group).exists()
    assert cpu_record()["CPU time limit"] == cpu_limit()  # this process: whatever it runs under


def test_the_script_refuses_a_speedup_and_a_missing_command():
    bad = subprocess.run([sys.executable, str(SCRIPT), "0.5", "--", "true"], capture_output=True, text=True)
    assert bad.returncode == 2 and "at least 1" in bad.stderr
    empty = subprocess.run([sys.executable, str(SCRIPT), "2"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert empty.returncode == 2 and "give the command" in empty.stderr
