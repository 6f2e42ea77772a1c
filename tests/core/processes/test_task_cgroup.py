"""hive_bash.core.processes.task_cgroup: a limit a task changed is read back, restored, and the task
ended with the reason."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from hive_bash.core.processes.task_cgroup import Limits, TaskCgroup, Tree

# The limit files exist only with the memory and pids controllers, which this machine's cgroup2
# hierarchy lacks: a plain directory with files of those names stands in for the task's cgroup
# here (the real kernel's files: tests/vm/test_qemu_limits.py::test_what_a_task_can_do_to_limits).


def limited_cgroup(path: Path, limits: Limits) -> TaskCgroup:
    for name in ("memory.max", "memory.swap.max", "memory.oom.group", "pids.max"):
        (path / name).write_text("")
    cgroup = TaskCgroup(cast(Tree, None), path, limits, "limited")
    cgroup.apply_limits()
    return cgroup


@pytest.mark.parametrize(
    ("name", "value", "reason"),
    [
        ("memory.max", "max", "it raised its own memory limit (memory.max 64 MiB -> max)"),
        ("memory.swap.max", "max", "it raised its own swap limit (memory.swap.max 0 B -> max)"),
        ("pids.max", "100000", "it raised its own process limit (pids.max 20 -> 100000)"),
        ("pids.max", "5", "it changed its own process limit (pids.max 20 -> 5)"),
    ],
)
def test_a_limit_a_task_changed_is_restored_and_ends_it(tmp_path: Path, name: str, value: str, reason: str) -> None:
    cgroup = limited_cgroup(tmp_path, Limits(memory_max=64 << 20, pids_max=20))
    assert cgroup.check_limits() is None  # the daemon's own values read back
    (tmp_path / name).write_text(value)
    said = f"{reason}; the daemon restored it and ended the task"
    assert cgroup.check_limits() == said
    assert (tmp_path / "memory.max").read_text() == str(64 << 20) and (tmp_path / "pids.max").read_text() == "20"
    assert (tmp_path / "memory.swap.max").read_text() == "0"
    assert cgroup.tampered == said  # what its end reads as its limit reason (CgroupEnd.limit_reason)
    assert cgroup.check_limits() is None  # said once


def test_a_cgroup_without_limits_has_nothing_to_read_back(tmp_path: Path) -> None:
    cgroup = limited_cgroup(tmp_path, Limits())
    (tmp_path / "memory.max").write_text("max")
    assert cgroup.limit_files == {} and cgroup.check_limits() is None
