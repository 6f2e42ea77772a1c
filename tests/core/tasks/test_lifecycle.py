"""hive_bash.core.tasks.lifecycle on its own: real bash, a real tasks dir, no daemon, no MCP.

A start saves the record with its pid before anything else; an exit, a kill and a
cancelled pending task each end in a record written once, on disk. (The same life
through the real MCP client and daemon: tests/core/tasks/test_manager.py.)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hive_bash.core.storage.task_files import TaskFiles, prepare_tasks_dir
from hive_bash.core.tasks.lifecycle import Lifecycle
from hive_bash.core.tasks.task import Task
from hive_bash.model import Status, TaskOptions
from hive_bash.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
async def life(tmp_path: Path) -> AsyncIterator[Lifecycle]:
    files = TaskFiles(prepare_tasks_dir(tmp_path / "tasks"))
    settings = Settings(tasks_dir=files.dir, agent_socket=None, max_running=1, kill_grace_secs=2)
    lifecycle = Lifecycle(settings, files)
    lifecycle.launcher.start()
    await lifecycle.recover()
    yield lifecycle
    await lifecycle.shutdown()
    lifecycle.readers.close()


def on_disk(life: Lifecycle, task: Task) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(life.files.record(task.id).read_text())
    return data


async def ended_on_disk(life: Lifecycle, task: Task) -> dict[str, Any]:
    """The record once its end has reached the disk (a change may settle for a moment first)."""
    async with asyncio.timeout(20):
        await task.ended.wait()
        while not Status(on_disk(life, task)["status"]).is_terminal:
            await asyncio.sleep(0.01)
    return on_disk(life, task)


async def test_a_start_saves_its_record_with_its_pid_and_an_exit_ends_it_once(life: Lifecycle) -> None:
    task = life.submit(TaskOptions(cmd="echo hi; exit 3"))
    assert task.process is not None
    record = on_disk(life, task)  # before the loop ran anything: saved within submit
    assert (record["status"], record["pid"]) == ("running", task.process.pid)
    record = await ended_on_disk(life, task)
    assert (record["status"], record["exit_code"], record["signal"], record["end_reason"]) == ("done", 3, None, None)
    assert life.files.out(task.id).read_text() == "hi\n" and record["ended_at"] >= record["started_at"]
    assert task.id not in {running.id for running in life.slots.running}


async def test_a_kill_is_the_ending_and_a_cancelled_pending_task_never_runs(life: Lifecycle) -> None:
    running = life.submit(TaskOptions(cmd="sleep 30"))
    pending = life.submit(TaskOptions(cmd="echo never"))  # max_running=1: it waits for a slot
    assert on_disk(life, pending)["status"] == "pending"  # a restart would find it
    assert life.kill(pending, force=False) == "cancelled"
    cancelled = await ended_on_disk(life, pending)
    assert (cancelled["status"], cancelled["end_reason"], cancelled["pid"]) == (
        "killed",
        "killed before it started",
        None,
    )
    assert not life.files.out(pending.id).exists()
    started = time.monotonic()
    assert life.kill(running, force=False) == "SIGINT"
    killed = await ended_on_disk(life, running)
    assert (killed["status"], killed["end_reason"]) == ("killed", "killed with SIGINT")
    assert killed["signal"] == "SIGINT" and time.monotonic() - started < 10


async def test_the_next_pending_task_starts_when_a_slot_frees(life: Lifecycle) -> None:
    first = life.submit(TaskOptions(cmd="exit 0"))
    second = life.submit(TaskOptions(cmd="echo second"))
    assert second.status is Status.PENDING
    assert (await ended_on_disk(life, first))["status"] == "done"
    record = await ended_on_disk(life, second)
    assert (record["status"], record["exit_code"]) == ("done", 0)
    assert life.files.out(second.id).read_text() == "second\n"


async def test_an_end_that_cannot_be_read_still_ends_the_task_failed_and_frees_its_slot(
    life: Lifecycle, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = life.submit(TaskOptions(cmd="sleep 0.2"))
    release = task.release

    def fails() -> None:  # stands in for a failure no test can cause on demand (MemoryError mid-way)
        release()
        raise MemoryError

    monkeypatch.setattr(task, "release", fails)
    record = await ended_on_disk(life, task)
    assert (record["status"], record["end_reason"], record["exit_code"]) == (
        "failed",
        "the daemon could not read how it ended",
        None,
    )
    assert (
        not life.slots.running and (await ended_on_disk(life, life.submit(TaskOptions(cmd="true"))))["status"] == "done"
    )
