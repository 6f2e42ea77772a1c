"""A task's files and its durable record: every file's name (task_files), the record (records),
when it is written (saver). Other subpackages import these names from here (tests/core/test_layers.py)."""

from __future__ import annotations

from hive_bash.core.storage.records import (
    RecordStore as RecordStore,
    TaskRecord as TaskRecord,
    TodoProgress as TodoProgress,
    TodoState as TodoState,
    max_record_bytes as max_record_bytes,
)
from hive_bash.core.storage.saver import RecordSaver as RecordSaver
from hive_bash.core.storage.task_files import TaskFiles as TaskFiles, prepare_tasks_dir as prepare_tasks_dir
