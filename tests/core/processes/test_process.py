"""hive_bash.core.processes.process: what the daemon records about a task's process, checked against the kernel's
own view."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from hive_bash.core.processes import process, procfs, spawners
from hive_bash.core.processes.task_cgroup import CgroupEnd

pytestmark = pytest.mark.anyio

TICK = procfs.NS_PER_CLOCK_TICK


def test_a_fork_between_readings_in_one_tick_started_in_that_tick() -> None:
    assert process.start_ticks_between(7 * TICK + 1, 8 * TICK - 1) == 7


def test_readings_that_straddle_a_tick_tell_nothing() -> None:
    assert process.start_ticks_between(8 * TICK - 1, 8 * TICK) is None


@pytest.mark.parametrize("peak", [4096, 64 * 2**20, 2**40], ids=["one-page", "64MiB", "1TiB"])
def test_a_cgroups_memory_peak_is_kept_whatever_the_daemons_own_size(peak: int) -> None:
    """memory.peak counts only what the task's cgroup was charged, never the daemon's image (which
    ru_maxrss of a forked child does): a task smaller than the daemon still shows its figure."""
    reaped = process.ResourceUsage(cpu_secs=0.25, max_rss_bytes=None)
    end = CgroupEnd(cpu_secs=1.5, memory_peak_bytes=peak, limit_reason=None)
    assert process.ResourceUsage.counted_by(reaped, end) == process.ResourceUsage(1.5, peak)


def test_without_the_memory_controller_the_reapers_figure_stays() -> None:
    reaped = process.ResourceUsage(cpu_secs=0.25, max_rss_bytes=300 * 2**20)
    end = CgroupEnd(cpu_secs=None, memory_peak_bytes=None, limit_reason=None)
    assert process.ResourceUsage.counted_by(reaped, end) == reaped


@pytest.mark.parametrize("pty", [False, True], ids=["plain", "pty"])
async def test_recorded_start_time_is_the_kernels(tmp_path: Path, pty: bool) -> None:
    """The start time in the record identifies the process after a restart: it must be exactly
    /proc/<pid>/stat's, however the daemon came by it (taken from the clock or read)."""
    # The task's bash and sleep are found on the PATH the tests have: in a Nix build only
    # the derivation's inputs are there (no /usr/bin).
    env = {"PATH": os.environ["PATH"]}
    procs = []
    try:
        for index in range(60):
            request = process.SpawnRequest(
                cmd="sleep 30",
                cwd=str(tmp_path),
                env=env,
                pty=pty,
                stdout_path=tmp_path / f"{index}.out",
                stderr_path=tmp_path / f"{index}.err",
                script_path=tmp_path / f"{index}.cmd",
            )
            procs.append(process.spawn(request, spawners.PlainPopen()))
        kernels = [found.start_ticks if (found := procfs.stat(proc.pid)) else None for proc in procs]
        assert [proc.start_ticks for proc in procs] == kernels
    finally:
        for proc in procs:
            proc.signal(9)
        await asyncio.gather(*(proc.wait_status for proc in procs))
        for proc in procs:
            proc.release()
