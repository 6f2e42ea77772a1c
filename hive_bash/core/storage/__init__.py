"""A task's files and its durable record: every file's name (task_files), the record (records),
when it is written (saver). Other subpackages import these names from here (tests/core/test_layers.py)."""

from __future__ import annotations

from hive_bash.core.storage.records import RecordStore, TaskRecord, TodoProgress, TodoState, max_record_bytes
from hive_bash.core.storage.saver import RecordSaver
from hive_bash.core.storage.task_files import TaskFiles, prepare_tasks_dir

__all__ = [
    "RecordSaver",
    "RecordStore",
    "TaskFiles",
    "TaskRecord",
    "TodoProgress",
    "TodoState",
    "max_record_bytes",
    "prepare_tasks_dir",
]
