"""dev/slow_cpu.py throttles a command with a cgroup CPU quota, and the provenance record reads it back."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from dev import slow_cpu
from fhs.run.cpu_info import cpu_limit, cpu_record

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "dev" / "slow_cpu.py"


def test_duty_cycle_runs_one_slowdownth_of_each_period():
    assert slow_cpu.duty(1.6, 0.1) == pytest.approx((0.0625, 0.0375))
    assert slow_cpu.duty(1.0, 0.1) == (0.1, 0.0)
    with pytest.raises(ValueError, match="at least 1"):
        slow_cpu.duty(0.5)


def test_own_cgroups_reads_both_versions():
    v1 = "6:freezer:/box\n2:cpu,cpuacct:/box/x\n0::/\n"
    assert slow_cpu.own_cgroups(v1)["freezer"] == "/box"
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


def test_cpu_limit_reads_v2_cpu_max(tmp_path):
    _write(tmp_path / "cgroup.controllers", "cpuset cpu io memory pids\n")
    _write(tmp_path / "cpu.max", "max 100000\n")
    _write(tmp_path / "me" / "cpu.max", "50000 100000\n")
    assert cpu_limit("0::/me\n", tmp_path) == "0.50 cores (cgroup CPU quota)"
    assert cpu_limit("0::/\n", tmp_path) == "none"


def test_groups_go_under_the_process_own_cgroup_in_either_version(tmp_path):
    v1 = tmp_path / "v1"
    (v1 / "freezer" / "box").mkdir(parents=True)
    (v1 / "freezer" / "cgroup.procs").write_text("")
    group = slow_cpu.SlowGroup(2.0, root=v1, own="7:freezer:/box\n")
    assert (group.version, group.path.parent, group.switch.read_text()) == ("v1", v1 / "freezer" / "box", "THAWED")
    v2 = tmp_path / "v2"
    _write(v2 / "cgroup.controllers", "cpu memory\n")
    group = slow_cpu.SlowGroup(2.0, root=v2, own="0::/\n")
    assert (group.version, group.path.parent, group.switch.name, group.switch.read_text()) == (
        "v2", v2, "cgroup.freeze", "0")
    assert "2 times slower: frozen 50.0 ms of every 100 ms" in group.describe()


def test_no_freezer_is_a_clear_error(tmp_path):
    with pytest.raises(slow_cpu.CannotSlow, match="no cgroup freezer"):
        slow_cpu.SlowGroup(2.0, root=tmp_path)


def _can_make_groups() -> bool:
    try:
        group = slow_cpu.SlowGroup(1.0)
    except slow_cpu.CannotSlow:
        return False
    group.remove()
    return True


needs_cgroups = pytest.mark.skipif(not _can_make_groups(), reason="needs write access to the cgroup freezer (root)")


@needs_cgroups
def test_a_slowed_command_runs_in_its_frozen_group_and_the_group_is_removed():
    """The real path: the child sits in the new group, which the cycle froze; cpu_record() names it; nothing is left."""
    code = ("import time; from fhs.run.cpu_info import cpu_record\n"
            "lines = open('/proc/self/cgroup').read().splitlines()\n"
            "group = [l for l in lines if ':freezer:' in l] or [l for l in lines if l.startswith('0::')]\n"
            "time.sleep(0.5); print(group[0].split(':')[2]); print(cpu_record()['slowed down (dev/slow_cpu.py)'])")
    out = subprocess.run([sys.executable, str(SCRIPT), "2", "--", sys.executable, "-c", code],
                         capture_output=True, text=True, check=True)
    where, slowed = out.stdout.strip().splitlines()
    assert where.rsplit("/", 1)[-1].startswith("fhs-slow-")
    assert slowed == out.stderr.strip() and slowed.startswith("2 times slower: frozen 50.0 ms of every 100 ms")
    made = Path(out.stderr.split("(cgroup ")[1].split()[1].rstrip(")"))
    assert not made.exists()
    assert cpu_record()["slowed down (dev/slow_cpu.py)"] == "no"


@needs_cgroups
def test_the_cycle_freezes_the_group_while_the_block_runs():
    group = slow_cpu.SlowGroup(2.0)
    seen = set()
    try:
        with group.throttling():
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                seen.add(group.switch.read_text().strip())
        assert group.switch.read_text().strip() in ("THAWED", "0")
    finally:
        group.remove()
    assert {"FROZEN", "THAWED"} & seen == {"FROZEN", "THAWED"} or {"1", "0"} <= seen


def test_the_script_refuses_a_speedup_and_a_missing_command():
    bad = subprocess.run([sys.executable, str(SCRIPT), "0.5", "--", "true"], capture_output=True, text=True)
    assert bad.returncode == 2 and "at least 1" in bad.stderr
    empty = subprocess.run([sys.executable, str(SCRIPT), "2"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert empty.returncode == 2 and "give the command" in empty.stderr
