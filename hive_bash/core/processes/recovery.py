"""What a previous daemon left running, ended by what the task cannot change: its pid, its start time,
the boot, and the session and group it was started leading (`exec env -i` changes none of them)."""

from __future__ import annotations

import contextlib
import logging
import os
import signal

from hive_bash.core.processes import procfs
from hive_bash.core.processes.process import signal_group
from hive_bash.core.storage import TaskRecord

logger = logging.getLogger(__name__)


def end_leftover_processes(record: TaskRecord) -> None:
    """A previous daemon died without ending this task: end what is left of its process group."""
    if record.pid is None:
        return
    pgid, start_ticks, boot = record.pid, record.proc_start_ticks, procfs.boot_id()
    if record.boot_id is not None and boot is not None and record.boot_id != boot:
        return  # the pid and start time belonged to a process of another boot: nothing of it is left
    # A record older than its boot id: its leader must also carry its task id.
    leader = record.boot_id is not None or procfs.task_id_of(pgid) == record.id
    if leader and procfs.same_process_alive(pgid, start_ticks=start_ticks):
        logger.warning("task %s (pid %d) outlived the previous daemon; ending its group", record.id, pgid)
        signal_group(pgid, signal.SIGKILL)
        return
    for pid in procfs.leftover_group_members(pgid, leader_start_ticks=start_ticks):
        logger.warning("task %s left process %d behind; ending it", record.id, pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def interrupted_reason(record: TaskRecord) -> str:
    return f"interrupted: the daemon restarted while the task was {record.status.value}"
