"""The ways a task ends that nobody asked for, and what its end records beyond its exit.

The watcher finds a limit passed (`for_watcher`), the process layer could not write a
PTY task's output (`for_output_failure`), something a task left behind writes its
output past the cap after it ended (`hold_cap_after_end`). Each ends the task in the
background, off the path of the reply being built. Once the process is reaped, the
manager asks `note_usage` and `note_disk_full` what the record must say besides the exit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from hive_bash.core import escapees, oom, output
from hive_bash.core.records import TaskRecord
from hive_bash.core.task import Task
from hive_bash.model import Status
from hive_bash.settings import Settings

logger = logging.getLogger(__name__)

# The manager's answer to "which live task is this record's?" (None: forgotten or replaced).
FindTask = Callable[[TaskRecord], "Task | None"]


class Endings:
    """Ends tasks for the watcher and the process layer, and notes what an end cost."""

    def __init__(self, settings: Settings, tasks_dir: Path, oom_counter: oom.CgroupMemory | None, find: FindTask):
        self._grace_secs = settings.kill_grace_secs
        self._cap = settings.max_output_bytes
        self._tasks_dir = tasks_dir
        self._oom_counter = oom_counter
        self._find = find
        self._background: set[asyncio.Task[None]] = set()

    # ---- ends nobody asked for ------------------------------------------------

    def for_watcher(self, record: TaskRecord, cause: Status, reason: str, truncate: Path | None) -> None:
        """The watcher found a limit passed: end the task, then cut an over-long file back to the cap."""
        task = self._find(record)
        if task is None:
            return

        async def end() -> None:
            await task.terminate(cause, reason, self._grace_secs)
            if truncate is not None:
                output.truncate_to(truncate, self._cap)

        self._in_background(end(), f"end-{task.id}")

    def for_output_failure(self, task: Task, reason: str) -> None:
        """The daemon could not write a PTY task's output (disk full, I/O error): end it failed.

        The cause is set at once: the failure may come while the process layer handles the
        leader's exit, before the exit is read, and must not be read as a plain exit then.
        """
        if task.end_cause is None:
            task.end_cause, task.end_reason = Status.FAILED, reason
        self._in_background(task.terminate(Status.FAILED, reason, self._grace_secs), f"output-{task.id}")

    def hold_cap_after_end(self, record: TaskRecord, stream: str, path: Path) -> None:
        """An ended task's output grew past the cap: what still writes it escaped the group
        kill (`setsid`). It is ended and the file cut back, so the cap holds."""
        try:
            writers = escapees.end_writers(path)
            output.truncate_to(path, self._cap)
        except OSError as exc:
            logger.error("task %s: could not hold its %s to the output cap: %s", record.id, stream, exc)
            return
        if writers:
            logger.warning(
                "task %s had ended, but processes it left (%s) wrote its %s past the output cap of %d bytes:"
                " ended them and cut the file back to the cap",
                record.id,
                ", ".join(map(str, writers)),
                stream,
                self._cap,
            )
        else:
            logger.info("task %s: its %s grew past the output cap after it ended: cut back", record.id, stream)

    def _in_background(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        """Run a coroutine as a task we hold a reference to (the loop itself keeps only weak ones)."""
        background = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(background)
        background.add_done_callback(self._background.discard)

    # ---- what an exit leaves to note ---------------------------------------------

    def note_usage(self, task: Task) -> None:
        """What the task cost, and whether the OOM killer (not `kill`, not a deadline) most likely ended it."""
        record = task.record
        usage = task.process.usage if task.process is not None else None
        if usage is not None:
            record.cpu_secs, record.max_rss_bytes = usage.cpu_secs, usage.max_rss_bytes
        limit_reason = task.process.limit_reason if task.process is not None else None
        if task.end_cause is None and limit_reason is not None and record.exit_code != 0:
            record.status, record.end_reason = Status.FAILED, limit_reason
        elif task.end_cause is None and oom.sigkilled(record.signal, record.exit_code):
            record.diagnosis = oom.diagnose(self._oom_counter, task.oom_kills_at_start)

    def note_disk_full(self, task: Task) -> None:
        if task.end_cause is None and output.disk_full(self._tasks_dir):
            # Its writes failed with ENOSPC: what it printed is not all in the files.
            task.record.status = Status.FAILED
            task.record.end_reason = f"disk full: output could not be written completely to {self._tasks_dir}"
