"""hive_bash.core.storage.saver on its own: a real store in a tmp dir; when a change reaches the disk."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from hive_bash.core.storage.records import RecordStore, TaskRecord
from hive_bash.core.storage.saver import RecordSaver
from hive_bash.core.storage.task_files import TaskFiles
from hive_bash.model import Status

pytestmark = pytest.mark.anyio


def on_disk(files: TaskFiles, task_id: str) -> dict[str, Any]:
    return json.loads(files.record(task_id).read_text())


def record(task_id: str) -> TaskRecord:
    return TaskRecord(id=task_id, cmd="true", created_at=time.time(), cwd="/")


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> TaskFiles:
    monkeypatch.setattr("hive_bash.core.storage.saver.AFTER_REPLY_SAVE_SECS", 600.0)  # never passes in a test
    return TaskFiles(tmp_path)


async def test_a_change_saved_now_is_on_disk_at_once(files: TaskFiles) -> None:
    saver = RecordSaver(RecordStore(files))
    saved = record("now")
    saver.save_now(saved)
    assert on_disk(files, "now")["status"] == "pending"


async def test_changes_a_reply_reports_go_into_one_write_after_it(files: TaskFiles) -> None:
    saver = RecordSaver(RecordStore(files))
    later = record("later")
    saver.save_now(later)
    later.status = Status.RUNNING
    saver.save_after_reply(later)
    later.status = Status.DONE
    saver.save_after_reply(later)
    assert on_disk(files, "later")["status"] == "pending"  # the reply goes out first
    saver.reply_sent()
    assert on_disk(files, "later")["status"] == "done"


async def test_a_save_now_takes_a_change_waiting_for_the_reply_with_it(files: TaskFiles) -> None:
    saver = RecordSaver(RecordStore(files))
    both = record("both")
    saver.save_after_reply(both)
    both.status = Status.DONE
    saver.save_now(both)
    assert on_disk(files, "both")["status"] == "done"
    files.record("both").unlink()
    saver.reply_sent()  # nothing waits any more: not written twice
    assert not files.record("both").exists()


async def test_what_waits_for_a_reply_is_written_within_the_bound(
    files: TaskFiles, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hive_bash.core.storage.saver.AFTER_REPLY_SAVE_SECS", 0.01)
    saver = RecordSaver(RecordStore(files))
    unsent = record("unsent")
    saver.save_after_reply(unsent)  # no reply goes out
    async with asyncio.timeout(10):
        while not files.record("unsent").exists():
            await asyncio.sleep(0.01)
    assert on_disk(files, "unsent")["status"] == "pending"


async def test_a_forgotten_record_is_never_written_later(files: TaskFiles) -> None:
    saver = RecordSaver(RecordStore(files))
    gone = record("gone")
    saver.save_after_reply(gone)
    saver.forget(gone)
    saver.reply_sent()
    assert not files.record("gone").exists()
