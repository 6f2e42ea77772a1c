"""hive_bash.core.process: what the daemon records about a task's process, checked against the kernel's own view."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from hive_bash.core import process

pytestmark = pytest.mark.anyio

TICK = process.NS_PER_CLOCK_TICK


def test_a_fork_between_readings_in_one_tick_started_in_that_tick() -> None:
    assert process.start_ticks_between(7 * TICK + 1, 8 * TICK - 1) == 7


def test_readings_that_straddle_a_tick_tell_nothing() -> None:
    assert process.start_ticks_between(8 * TICK - 1, 8 * TICK) is None


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
            procs.append(process.spawn(request))
        assert [proc.start_ticks for proc in procs] == [process.read_start_ticks(proc.pid) for proc in procs]
    finally:
        for proc in procs:
            proc.signal(9)
        await asyncio.gather(*(proc.exited for proc in procs))
        for proc in procs:
            proc.release()
