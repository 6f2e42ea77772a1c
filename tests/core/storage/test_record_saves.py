"""When a task's record reaches the disk: the task manager with a real bash and a real tasks dir, no HTTP.

A reply that reports a task's end does not wait for the record's write: the end (and
the todo the reply settles) is written once, when the app has sent the response
(`reply_sent`), within AFTER_REPLY_SAVE_SECS in any case, and at the latest when the
daemon stops. That bound is stretched here so that it cannot pass before the test has
looked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hive_bash.core.storage.task_files import prepare_tasks_dir
from hive_bash.core.tasks.manager import TaskManager
from hive_bash.errors import QueueFull
from hive_bash.model import TaskOptions
from hive_bash.settings import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.setattr("hive_bash.core.storage.saver.AFTER_REPLY_SAVE_SECS", 600.0)
    return Settings(tasks_dir=prepare_tasks_dir(tmp_path / "tasks"), agent_socket=None)


def on_disk(settings: Settings, task_id: str) -> dict[str, Any]:
    return json.loads((settings.tasks_dir / f"{task_id}.json").read_text())


async def test_the_end_reported_inline_is_written_after_the_reply(settings: Settings) -> None:
    manager = TaskManager(settings)
    await manager.start()
    try:
        task = manager.submit(TaskOptions(cmd="exit 3"))
        assert on_disk(settings, task.id)["pid"] == task.record.pid  # the pid is on disk before anything else
        assert (await manager.wait(task, 10)).why == "ended"
        # What the tool now builds its reply from; the disk still has the start.
        assert task.record.status.value == "done" and task.record.exit_code == 3
        assert on_disk(settings, task.id)["status"] == "running"
        manager.reply_sent()  # what the app does once the response has gone out
        record = on_disk(settings, task.id)
        assert (record["status"], record["exit_code"]) == ("done", 3)
        assert record["todo"]["wanted"] is None  # settled by the reply: no completion todo owed
    finally:
        await manager.shutdown()


async def test_a_stopping_daemon_writes_what_still_waits_for_a_reply(settings: Settings) -> None:
    manager = TaskManager(settings)
    await manager.start()
    try:
        task = manager.submit(TaskOptions(cmd="exit 5"))
        assert (await manager.wait(task, 10)).why == "ended"
        assert on_disk(settings, task.id)["status"] == "running"
    finally:
        await manager.shutdown()
    assert (on_disk(settings, task.id)["status"], on_disk(settings, task.id)["exit_code"]) == ("done", 5)


async def test_an_end_nobody_waits_for_is_written_at_once(settings: Settings) -> None:
    manager = TaskManager(settings)
    await manager.start()
    try:
        task = manager.submit(TaskOptions(cmd="exit 4"))
        await task.ended.wait()
        record = on_disk(settings, task.id)
        assert (record["status"], record["exit_code"]) == ("done", 4)
        assert record["todo"]["wanted"] == "final"  # owed to the harness, and on disk for a restart
    finally:
        await manager.shutdown()


async def test_a_run_refused_for_want_of_room_keeps_the_old_task_of_its_name(tmp_path: Path) -> None:
    settings = Settings(
        tasks_dir=prepare_tasks_dir(tmp_path / "tasks"), agent_socket=None, max_running=1, max_pending=0
    )
    manager = TaskManager(settings)
    await manager.start()
    try:
        old = manager.submit(TaskOptions(cmd="echo old", name="x"))
        assert (await manager.wait(old, 10)).why == "ended"
        manager.submit(TaskOptions(cmd="sleep 300"))  # the one slot taken, no pending room
        with pytest.raises(QueueFull):
            manager.submit(TaskOptions(cmd="echo new", name="x"))
        assert manager.get("x") is old
        assert settings.tasks_dir.joinpath("x.out").read_text() == "old\n"
    finally:
        await manager.shutdown()
