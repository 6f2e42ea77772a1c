"""hive_bash.core.storage.saver on its own: a real store in a tmp dir; when a change reaches the disk."""

from __future__ import annotations

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
    monkeypatch.setattr("hive_bash.core.storage.saver.SETTLE_SAVE_SECS", 600.0)  # never passes in a test
    return TaskFiles(tmp_path)


async def test_a_change_is_saved_at_once_outside_a_reply(files: TaskFiles) -> None:
    saver = RecordSaver(RecordStore(files))
    saved = record("now")
    saver.save(saved)
    assert on_disk(files, "now")["status"] == "pending"


async def test_changes_a_reply_reports_settle_into_one_write_after_it(files: TaskFiles) -> None:
    saver = RecordSaver(RecordStore(files))
    settled = record("later")
    saver.write_now(settled)
    with saver.settling():
        settled.status = Status.RUNNING
        saver.save(settled)
        settled.status = Status.DONE
        saver.save(settled)
    assert on_disk(files, "later")["status"] == "pending"  # the reply goes out first
    saver.write_settled()
    assert on_disk(files, "later")["status"] == "done"


async def test_a_forgotten_record_is_never_written_later(files: TaskFiles) -> None:
    saver = RecordSaver(RecordStore(files))
    gone = record("gone")
    saver.settle(gone)
    saver.forget(gone)
    saver.write_settled()
    assert not files.record("gone").exists()
