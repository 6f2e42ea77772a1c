"""What a previous daemon left running: ended by process identity (pid, kernel start time and task id), never by pid alone."""

from __future__ import annotations

import logging
import os
import signal

from . import process
from .records import TaskRecord

logger = logging.getLogger(__name__)


def end_leftover_processes(record: TaskRecord) -> None:
    """A previous daemon died without ending this task: end what is left of its process group."""
    if record.pid is None:
        return
    pgid, start_ticks = record.pid, record.proc_start_ticks
    if process.same_process_alive(pgid, start_ticks, record.id):
        logger.warning("task %s (pid %d) outlived the previous daemon; ending its group", record.id, pgid)
        process.signal_group(pgid, signal.SIGKILL)
        return
    for pid in process.leftover_group_members(pgid, start_ticks):
        logger.warning("task %s left process %d behind; ending it", record.id, pid)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def interrupted_reason(record: TaskRecord) -> str:
    return f"interrupted: the daemon restarted while the task was {record.status.value}"
