"""A task's durable record, ``<id>.json`` beside its output, written atomically: what survives a
restart (status, exit, times, the process's identity so a recycled pid is never taken for the
task, the todo owed), and the disk space kept so that its end can always be written."""

from __future__ import annotations

import errno
import itertools
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from hive_bash.core.storage.task_files import TaskFiles
from hive_bash.errors import RecordNotSaved
from hive_bash.model import Status
from hive_bash.private_files import create_private, open_own, read_own_file, set_aside, write_all, write_atomically

logger = logging.getLogger(__name__)

# A record holds its cmd (each byte at most 6 JSON characters, \u001b) and a few short
# fields; a larger file is no record of ours and is never read.
RECORD_OVERHEAD_BYTES = 256 * 1024
END_ROOM_BYTES = 16 * 1024  # room kept for a running task's end: what the end adds is far less
NO_ROOM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# A reserve whose end is on disk becomes a spare for the next start: a rename instead of
# allocating and freeing blocks per run (about 0.2 ms on ext4). At least this large, to fit most records.
MIN_RESERVE_BYTES = 32 * 1024
SPARE_LIMIT = 64


def max_record_bytes(max_cmd_bytes: int) -> int:
    return 6 * max_cmd_bytes + RECORD_OVERHEAD_BYTES


# The todo state the daemon wants the harness to show for a task.
TodoState = Literal["running", "final", "clear"]

# Record fields written before the todo fields moved into `TodoProgress`: read, never written.
LEGACY_TODO_FIELDS = {"todo_wanted": "wanted", "todo_delivered": "wanted_delivered", "todo_ever_sent": "harness_holds"}


class TodoProgress(BaseModel):
    """What must survive a restart of a task's completion todo (hive_bash.core.todos.state owns it)."""

    wanted: TodoState | None = None  # the latest state wanted for the harness; None: nothing ever wanted
    wanted_delivered: bool = True  # the harness confirmed `wanted`
    harness_holds: bool = False  # the harness holds a todo for this task: the last confirmed message was an upsert

    @property
    def owed(self) -> bool:
        """A state is wanted that the harness has not confirmed: a record owing it must not be dropped."""
        return self.wanted is not None and not self.wanted_delivered


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
    # The kernel's boot id when it started: pid and start time name a process only within one boot.
    boot_id: str | None = None
    # What the kernel reported when the leader was reaped (hive_bash.core.processes.process.ResourceUsage).
    cpu_secs: float | None = None
    max_rss_bytes: int | None = None
    # Why it most likely ended, where the daemon can tell (the OOM killer: hive_bash.core.processes.oom).
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
    """Reads and writes records in the tasks directory (`files` names them)."""

    def __init__(self, files: TaskFiles, max_bytes: int = max_record_bytes(256 * 1024)) -> None:
        self.files = files
        self.max_bytes = max_bytes  # a record file larger than this is set aside unread
        self._reserved: dict[str, int] = {}  # tasks whose reserve file may exist -> its size (0: unknown)
        self._spares: list[tuple[Path, int]] = []  # reserves to reuse, with their sizes
        self._spare_labels = (f"{secrets.token_hex(4)}-{number}" for number in itertools.count())

    def save(self, record: TaskRecord) -> None:
        """Write-then-rename: a reader (or a restart after SIGKILL) sees the old or the new record, never
        half. On a full disk the task's reserve takes the write; RecordNotSaved if nothing could."""
        data = record.model_dump_json().encode()
        try:
            write_atomically(self.files.record(record.id), data)  # never through a planted .<id>.json.tmp
        except OSError as exc:
            if self._save_into_reserve(record.id, data):
                self._reserved.pop(record.id, None)
                return
            raise RecordNotSaved(
                exc.errno, f"could not save the record of task {record.id}: {exc.strerror or exc}"
            ) from exc
        if record.status.is_terminal and record.id in self._reserved:
            self._release_reserve(record.id)  # its end is on disk: the room kept for it is free again

    def has_reserve(self, task_id: str) -> bool:
        return task_id in self._reserved

    def _release_reserve(self, task_id: str) -> None:
        size, path = self._reserved.pop(task_id), self.files.reserve(task_id)
        if size and len(self._spares) < SPARE_LIMIT:
            spare = self.files.spare(next(self._spare_labels))
            try:
                os.replace(path, spare)
            except OSError:
                return  # gone (a task removed it): nothing to keep
            self._spares.append((spare, size))
        else:
            _unlink_or_warn(path)

    def _reuse_spare(self, task_id: str, size: int) -> bool:
        """Make a spare that fits the task's reserve (a rename); False if there is none."""
        while self._spares:
            spare, spare_size = self._spares.pop()
            if spare_size < size:
                _unlink_or_warn(spare)
                continue
            try:
                os.replace(spare, self.files.reserve(task_id))
            except OSError:
                continue
            self._reserved[task_id] = spare_size
            return True
        return False

    def reserve(self, record: TaskRecord) -> None:
        """Set disk space aside for the task's end: a preallocated file the end's record is
        written into when nothing else can be (a nearly full disk). Raises RecordNotSaved."""
        path = self.files.reserve(record.id)
        size = max(MIN_RESERVE_BYTES, len(record.model_dump_json()) + END_ROOM_BYTES)
        if self._reuse_spare(record.id, size):
            return
        self._reserved[record.id] = size
        try:
            fd = create_private(path)
            try:
                os.posix_fallocate(fd, 0, size)
            finally:
                os.close(fd)
        except OSError as exc:
            _unlink_or_warn(path)
            self._reserved.pop(record.id, None)
            if exc.errno not in NO_ROOM_ERRNOS:
                # A filesystem that cannot preallocate: the end is saved like any change, best effort.
                logger.warning("no room kept for the end of task %s: %s", record.id, exc.strerror or exc)
                return
            raise RecordNotSaved(
                exc.errno, f"no room for the record of task {record.id}: {exc.strerror or exc}"
            ) from exc

    def _save_into_reserve(self, task_id: str, data: bytes) -> bool:
        """Write `data` into the task's reserve and rename it over the record; False if there is none that fits."""
        path = self.files.reserve(task_id)
        try:
            fd = open_own(path, os.O_WRONLY)
        except OSError:
            return False
        try:
            size = os.fstat(fd).st_size
            if size < len(data):
                return False
            # Into blocks allocated already: needs no free space. Padded with spaces (JSON allows them)
            # rather than cut short: freed space would go to what filled the disk, hiding it from the end.
            write_all(fd, data + b" " * (size - len(data)))
        except OSError as exc:
            logger.error("could not write the record of task %s into its reserve: %s", task_id, exc)
            return False
        finally:
            os.close(fd)
        try:
            os.replace(path, self.files.record(task_id))
        except OSError:
            return False
        logger.warning("disk full: the record of task %s was written into the space kept for it", task_id)
        return True

    def load_all(self) -> list[TaskRecord]:
        """Every record in the tasks dir; one that fails a check is set aside, never fatal."""
        for spare in self.files.spares():
            _unlink_or_warn(spare)  # a previous daemon's: only this one's are reused
        records = []
        for task_id, path in self.files.records():
            record = self._load(task_id, path)
            if record is not None:
                records.append(record)
                self._reserved[record.id] = 0  # a previous daemon may have left its reserve
        return records

    def _load(self, task_id: str, path: Path) -> TaskRecord | None:
        try:
            # A record makes the daemon signal its pid at start: only one we wrote counts.
            record = TaskRecord.model_validate_json(read_own_file(path, self.max_bytes))
        except FileNotFoundError:
            return None
        except OSError as exc:
            set_aside(path, f"not a task record ({exc.strerror or exc})")
            return None
        except (ValidationError, ValueError, MemoryError) as exc:
            set_aside(path, f"unreadable task record ({_first_line(exc)})")
            return None
        if record.id != task_id:
            set_aside(path, f"its id {record.id!r} does not match the file name")
            return None
        return record

    def delete(self, task_id: str) -> None:
        self._reserved.pop(task_id, None)
        for path in self.files.of_task(task_id):
            _unlink_or_warn(path)


def _unlink_or_warn(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError as exc:  # a directory planted under the name: in the way, never fatal
        logger.warning("could not remove %s: %s", path, exc.strerror or exc)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return " ".join(lines[:3]) if lines else type(exc).__name__
