"""A task's durable record, ``<id>.json`` beside its output, written atomically on every change.

The record is what survives a daemon restart: status, exit, times, the process
identity (pid + kernel start time, so a recycled pid is never mistaken for the
task) and whether the agent has been told how the task ended.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from .private_files import create_private, read_own_file
from .sessions import SESSION_TASK_SUFFIXES

logger = logging.getLogger(__name__)

RECORD_SUFFIX = ".json"


class Status(str, enum.Enum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    TIMED_OUT = "timed_out"
    INTERRUPTED = "interrupted"
    KILLED = "killed"
    FAILED = "failed"  # ended by the daemon for a resource limit (output cap, disk full)

    @property
    def is_terminal(self) -> bool:
        return self not in (Status.PENDING, Status.RUNNING)


Stream = Literal["stdout", "stderr"]

# The todo state the daemon wants the harness to show for a task.
TodoState = Literal["running", "final", "clear"]

# Record fields written before the todo fields moved into `TodoProgress`: read, never written.
LEGACY_TODO_FIELDS = {"todo_wanted": "wanted", "todo_delivered": "wanted_delivered", "todo_ever_sent": "harness_holds"}


class TodoProgress(BaseModel):
    """What must survive a restart of a task's completion todo (hive_bash.todo_state owns it)."""

    wanted: TodoState | None = None  # the latest state wanted for the harness; None: nothing ever wanted
    wanted_delivered: bool = True  # the harness confirmed `wanted`
    harness_holds: bool = False  # the harness holds a todo for this task: the last confirmed message was an upsert


class TaskRecord(BaseModel):
    id: str
    cmd: str
    status: Status = Status.PENDING
    exit_code: int | None = None
    signal: str | None = None
    end_reason: str | None = None
    created_at: float
    started_at: float | None = None
    ended_at: float | None = None
    timeout_secs: float | None = None
    idle_timeout_secs: float | None = None
    cwd: str
    session: str | None = None  # the shell session it started in and left its state to
    session_note: str | None = None  # one line when the session's directory or state could not be used
    pty: bool = False
    stdin: Literal["null", "pipe"] = "null"
    pid: int | None = None
    # The kernel's start time of `pid` (clock ticks since boot, /proc/<pid>/stat
    # field 22): with the pid it identifies the process across a restart.
    proc_start_ticks: int | None = None
    # What the kernel reported when the leader was reaped (hive_bash.process.ResourceUsage).
    cpu_secs: float | None = None
    max_rss_bytes: int | None = None
    # Why it most likely ended, where the daemon can tell (the OOM killer: hive_bash.oom).
    diagnosis: str | None = None
    # So a restart neither loses nor repeats a completion todo.
    todo: TodoProgress = Field(default_factory=TodoProgress)

    @model_validator(mode="before")
    @classmethod
    def _read_legacy_todo_fields(cls, data: object) -> object:
        """Records written before `todo` existed kept its fields flat, under older names."""
        if isinstance(data, dict) and "todo" not in data and LEGACY_TODO_FIELDS.keys() & data.keys():
            data = dict(data)
            data["todo"] = {new: data.pop(old) for old, new in LEGACY_TODO_FIELDS.items() if old in data}
        return data

    @property
    def duration_secs(self) -> float | None:
        if self.started_at is None:
            return None
        end = self.ended_at if self.ended_at is not None else time.time()
        return max(0.0, end - self.started_at)


class RecordStore:
    """Reads and writes records in the tasks directory; owns the naming of every task file."""

    def __init__(self, tasks_dir: Path) -> None:
        self.tasks_dir = tasks_dir

    def out_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.out"

    def err_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.err"

    def output_path(self, task_id: str, stream: Stream) -> Path:
        return self.out_path(task_id) if stream == "stdout" else self.err_path(task_id)

    def script_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}.cmd"

    def record_path(self, task_id: str) -> Path:
        return self.tasks_dir / f"{task_id}{RECORD_SUFFIX}"

    def save(self, record: TaskRecord) -> None:
        """Write-then-rename, so a reader (or a restart after SIGKILL) sees the old or the new record, never half."""
        final = self.record_path(record.id)
        temp = final.with_name(f".{final.name}.tmp")
        data = record.model_dump_json().encode()
        fd = create_private(temp)  # never through a planted .<id>.json.tmp symlink
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        os.replace(temp, final)

    def load_all(self) -> list[TaskRecord]:
        records = []
        for path in sorted(self.tasks_dir.glob(f"*{RECORD_SUFFIX}")):
            record = self._load(path)
            if record is not None:
                records.append(record)
        return records

    def _load(self, path: Path) -> TaskRecord | None:
        try:
            # A record makes the daemon signal its pid at start: only one we wrote counts.
            record = TaskRecord.model_validate_json(read_own_file(path))
        except (OSError, ValidationError, ValueError) as exc:
            logger.warning("skipping unreadable task record %s: %s", path, exc)
            return None
        if record.id != path.name[: -len(RECORD_SUFFIX)]:
            logger.warning("skipping task record %s: its id %r does not match the file name", path, record.id)
            return None
        return record

    def delete(self, task_id: str) -> None:
        paths = [self.record_path(task_id), self.out_path(task_id), self.err_path(task_id), self.script_path(task_id)]
        paths += [self.tasks_dir / f"{task_id}{suffix}" for suffix in SESSION_TASK_SUFFIXES]
        for path in paths:
            try:
                path.unlink()
            except FileNotFoundError:
                pass
