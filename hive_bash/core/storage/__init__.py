"""A task's files and its durable record: the names of every file in the tasks directory
(task_files), the record written atomically on every change (records), and when a change
reaches the disk (saver).

The other subpackages of hive_bash.core import these names from here, never one of the
modules (tests/core/test_layers.py).
"""

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
