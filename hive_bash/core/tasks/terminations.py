"""Ending tasks nobody asked to end, in the background: a limit the watcher found passed, output
that could not be written, and processes an ended task left that write its output past the
cap. How each ended is decided once its process is reaped (hive_bash.core.tasks.ending)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from hive_bash.core.output import truncate_to
from hive_bash.core.processes import end_writers
from hive_bash.core.storage import TaskRecord
from hive_bash.core.tasks.task import Task
from hive_bash.model import Status
from hive_bash.settings import Settings

logger = logging.getLogger(__name__)

# The manager's answer to "which live task is this record's?" (None: forgotten or replaced).
FindTask = Callable[[TaskRecord], "Task | None"]


class Terminations:
    """Terminates tasks (SIGTERM, grace, SIGKILL) without making anyone wait for it."""

    def __init__(self, settings: Settings, find: FindTask):
        self._grace_secs = settings.kill_grace_secs
        self._cap = settings.max_output_bytes
        self._find = find
        self._background: set[asyncio.Task[None]] = set()

    def limit_passed(self, record: TaskRecord, cause: Status, reason: str, truncate: Path | None) -> None:
        """The watcher found a limit passed: end the task, then cut an over-long file back to the cap."""
        task = self._find(record)
        if task is None:
            return

        async def end() -> None:
            await task.terminate(cause, reason, self._grace_secs)
            if truncate is not None:
                truncate_to(truncate, self._cap)

        self._in_background(end(), f"end-{task.id}")

    def output_failed(self, task: Task, reason: str) -> None:
        """Its output could not be written (a PTY's copy on a full disk): it ends failed."""
        task.output_failed(reason)
        self._in_background(task.terminate(Status.FAILED, reason, self._grace_secs), f"output-{task.id}")

    def hold_cap_after_end(self, record: TaskRecord, stream: str, path: Path) -> None:
        """An ended task's output grew past the cap: what still writes it escaped the group
        kill (`setsid`). It is ended and the file cut back, so the cap holds."""
        try:
            writers = end_writers(path)
            truncate_to(path, self._cap)
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
        """Run it as a task we hold a reference to (the loop itself keeps only weak ones)."""
        background = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(background)
        background.add_done_callback(self._background.discard)
