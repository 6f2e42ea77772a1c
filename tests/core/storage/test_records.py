"""Task records on disk: what the current code writes, and records written before `todo` existed."""

from __future__ import annotations

import json
import time
from pathlib import Path

from hive_bash.core.storage.records import RecordStore, TaskRecord, TodoProgress
from hive_bash.core.storage.task_files import TaskFiles
from hive_bash.model import Status


def test_a_record_from_before_the_todo_field_still_loads(tmp_path: Path) -> None:
    legacy = {
        "id": "build",
        "cmd": "make",
        "status": "done",
        "exit_code": 0,
        "signal": None,
        "end_reason": None,
        "created_at": 1.0,
        "started_at": 1.0,
        "ended_at": 2.0,
        "timeout_secs": None,
        "idle_timeout_secs": None,
        "cwd": "/",
        "pty": False,
        "stdin": "null",
        "pid": 42,
        "proc_start_ticks": 7,
        "todo_wanted": "final",
        "todo_delivered": False,
        "todo_ever_sent": True,
    }
    (tmp_path / "build.json").write_text(json.dumps(legacy))
    [record] = RecordStore(TaskFiles(tmp_path)).load_all()
    assert record.status is Status.DONE and record.pid == 42
    assert record.todo == TodoProgress(wanted="final", wanted_delivered=False, harness_holds=True)


def test_records_are_written_with_the_todo_object_only(tmp_path: Path) -> None:
    store = RecordStore(TaskFiles(tmp_path))
    record = TaskRecord(id="t1", cmd="true", created_at=time.time(), cwd="/")
    record.todo.wanted = "running"
    store.save(record)
    written = json.loads((tmp_path / "t1.json").read_text())
    assert written["todo"] == {"wanted": "running", "wanted_delivered": True, "harness_holds": False}
    assert not {"todo_wanted", "todo_delivered", "todo_ever_sent"} & written.keys()
    assert store.load_all() == [record]


def test_a_record_under_another_file_name_is_skipped(tmp_path: Path) -> None:
    record = TaskRecord(id="t1", cmd="true", created_at=time.time(), cwd="/")
    (tmp_path / "t2.json").write_text(record.model_dump_json())
    (tmp_path / "broken.json").write_text("{")
    assert RecordStore(TaskFiles(tmp_path)).load_all() == []
