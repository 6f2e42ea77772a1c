"""A task's record and its todo, kept in step: every record write is said here, now or after the
reply that reports it (hive_bash.core.storage.saver), and a record is kept (retention) until the
harness confirmed its todo."""

from __future__ import annotations

import logging

from hive_bash.core.storage import RecordSaver, RecordStore, TaskFiles, TaskRecord, max_record_bytes
from hive_bash.core.tasks import launch
from hive_bash.core.tasks.retention import Retention
from hive_bash.core.todos import TodoStateMachine
from hive_bash.errors import RecordNotSaved
from hive_bash.settings import Settings

logger = logging.getLogger(__name__)

SHUTDOWN_TODO_FLUSH_SECS = 3.0


class Bookkeeping:
    """What the disk and the harness are owed for each task: its record, its todo, until when it is kept.
    What writes no record (a todo tracked, a line matched, a wait begun) goes to `todos` itself."""

    def __init__(self, settings: Settings, files: TaskFiles) -> None:
        self.store = RecordStore(files, max_record_bytes(settings.max_cmd_bytes))
        self._saver = RecordSaver(self.store)
        self.todos = TodoStateMachine(settings.agent_socket, files, save_now=self._todo_changed)
        self.retention = Retention(retain_count=settings.retain_count, retain_secs=settings.retain_secs)

    async def stop(self) -> None:
        """Write what waits for a reply, then deliver todos for a moment (the rest stays owed in the records)."""
        self._saver.reply_sent()
        await self.todos.stop(SHUTDOWN_TODO_FLUSH_SECS)

    def recovered(self, record: TaskRecord) -> None:
        """Read back at start: a todo still owed is wanted again."""
        if self.todos.track(record):
            self._todo_changed(record)
        if record.status.is_terminal:
            self.retention.task_ended(record)

    def save_or_refuse(self, record: TaskRecord) -> None:
        """Save a task's record now, or refuse its start (SpawnFailed): nothing runs unrecorded."""
        try:
            self._saver.save_or_raise(record)
        except RecordNotSaved as exc:
            raise launch.record_not_saved(self.store, record, exc) from exc

    def started(self, record: TaskRecord) -> None:
        """Its running todo and its record with its pid, saved now (or SpawnFailed); the reserve takes the
        write if the command filled the disk already (`yes` on a small disk does, within microseconds)."""
        self.todos.started(record)
        self.save_or_refuse(record)

    def ended(self, record: TaskRecord) -> None:
        """Its end is in the record: saved now, or after the reply of the inline wait that reports it."""
        try:
            self.todos.task_ended(record)
        except Exception:
            logger.exception("task %s: could not hand its end to its todo", record.id)
        if self.todos.holds_back(record):
            self._saver.save_after_reply(record)
        else:
            self._saver.save_now(record)
        self.retention.task_ended(record)  # pruned by the watcher's tick, off the reply's path

    def forget(self, record: TaskRecord) -> None:
        """The record goes, with its files and its todo."""
        self.retention.forgotten(record)
        self._saver.forget(record)
        self.todos.forget(record)
        self.store.delete(record.id)

    def wait_over(self, record: TaskRecord, result_seen: bool) -> None:
        """An inline wait is over; what its todo settles is written after the reply."""
        if self.todos.wait_over(record, result_seen):
            self._saver.save_after_reply(record)
            self.retention.todo_changed(record)

    def shown(self, record: TaskRecord) -> None:
        """A reply showed the running task: its notify_on notice is seen."""
        if self.todos.task_shown(record):
            self._saver.save_now(record)

    def reply_sent(self) -> None:
        """A response has gone out: write the records it reported."""
        self._saver.reply_sent()

    def _todo_changed(self, record: TaskRecord) -> None:
        """Its todo changed with no reply to wait for (a delivery, a notice): saved now."""
        self._saver.save_now(record)
        self.retention.todo_changed(record)
