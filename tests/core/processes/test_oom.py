"""hive_bash.core.processes.oom against cgroup directories laid out as the kernel lays them out.

The suite may not create or change real cgroups (and this machine's kernel
gives an unprivileged test none of its own), so these are copies of the files
the kernel writes: memory.events / memory.max (v2), memory.oom_control /
memory.limit_in_bytes (v1). The real thing runs in vm-tests/oom-killed.nix.
"""

from __future__ import annotations

from pathlib import Path

from hive_bash.core.processes import oom

V2_EVENTS = "low 0\nhigh 0\nmax 12\noom {n}\noom_kill {n}\noom_group_kill 0\n"
V1_OOM_CONTROL = "oom_kill_disable 0\nunder_oom 0\noom_kill {n}\n"


def v2_tree(root: Path, leaf_max: str = "max", parent_max: str = "268435456") -> Path:
    """/sys/fs/cgroup/system.slice/hive-bash-daemon.service, the limit on the slice."""
    parent = root / "system.slice"
    leaf = parent / "hive-bash-daemon.service"
    leaf.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")  # the root has no memory.max
    for directory, limit in ((parent, parent_max), (leaf, leaf_max)):
        (directory / "memory.max").write_text(limit + "\n")
        (directory / "memory.events").write_text(V2_EVENTS.format(n=0))
    return leaf


def test_v2_counter_and_the_smallest_limit_up_the_tree(tmp_path: Path) -> None:
    leaf = v2_tree(tmp_path)
    memory = oom.oom_counter_at(leaf)
    assert memory == oom.CgroupMemory(leaf, 2)
    assert memory.oom_kills() == 0
    assert memory.limit() == (256 * 1024 * 1024, leaf.parent / "memory.max")
    (leaf / "memory.max").write_text("104857600\n")
    assert memory.limit() == (100 * 1024 * 1024, leaf / "memory.max")


def test_v1_counter_and_unlimited(tmp_path: Path) -> None:
    (tmp_path / "memory.oom_control").write_text(V1_OOM_CONTROL.format(n=3))
    (tmp_path / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    memory = oom.oom_counter_at(tmp_path)
    assert memory is not None and memory.version == 1
    assert memory.oom_kills() == 3
    assert memory.limit() is None


def test_own_cgroup_from_proc_self_cgroup(tmp_path: Path) -> None:
    mount = tmp_path / "sys-fs-cgroup"
    leaf = v2_tree(mount)
    proc = tmp_path / "cgroup"
    proc.write_text("0::/system.slice/hive-bash-daemon.service\n")
    assert oom.own_cgroup(proc, mount) == oom.CgroupMemory(leaf, 2)
    v1 = mount / "memory" / "agents" / "a1"
    v1.mkdir(parents=True)
    (v1 / "memory.oom_control").write_text(V1_OOM_CONTROL.format(n=0))
    proc.write_text("9:name=systemd:/\n4:memory:/agents/a1\n0::/\n")
    assert oom.own_cgroup(proc, mount) == oom.CgroupMemory(v1, 1)
    proc.write_text("0::/nowhere\n")
    assert oom.own_cgroup(proc, mount) is None


def test_diagnosis_only_when_the_count_rose(tmp_path: Path) -> None:
    leaf = v2_tree(tmp_path)
    memory = oom.oom_counter_at(leaf)
    assert oom.diagnose_oom(memory, memory.oom_kills()) is None
    (leaf / "memory.events").write_text(V2_EVENTS.format(n=1))
    reading = oom.diagnose_oom(memory, 0)
    assert reading is not None and "OOM killer" in reading
    assert "256 MiB" in reading and str(leaf.parent / "memory.max") in reading
    # no counter before the task started, or none now: say nothing
    assert oom.diagnose_oom(memory, None) is None
    assert oom.diagnose_oom(None, 0) is None
    (leaf / "memory.events").write_text("low 0\n")
    assert oom.diagnose_oom(memory, 0) is None


def test_sigkilled_reads_the_signal_or_bash_exit_137() -> None:
    assert oom.killed_by_sigkill("SIGKILL", None)
    assert oom.killed_by_sigkill(None, 137)
    assert not oom.killed_by_sigkill("SIGTERM", None)
    assert not oom.killed_by_sigkill(None, 1)
