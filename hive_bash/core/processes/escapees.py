"""Processes an ended task left behind that still write its output (a child that left the
task's session with `setsid` escapes the group kill).

Found only when an ended task's output is over the cap, by the file they hold open for
writing: that fd came from the task (the daemon gave it only to the task's leader), so
they are the task's, and they are ended.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from pathlib import Path

logger = logging.getLogger(__name__)


def writers_of(path: Path) -> list[int]:
    """Live processes (not the daemon) holding `path`'s file open for writing."""
    try:
        target = os.lstat(path)
    except OSError:
        return []
    own_pid = os.getpid()
    writers = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != own_pid and _writes(entry, target.st_dev, target.st_ino):
            writers.append(int(entry))
    return writers


def _writes(pid: str, device: int, inode: int) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or not ours to look at
        return False
    for fd in fds:
        try:
            info = os.stat(f"/proc/{pid}/fd/{fd}")
            if (info.st_dev, info.st_ino) == (device, inode) and _open_for_writing(pid, fd):
                return True
        except OSError:
            continue
    return False


def _open_for_writing(pid: str, fd: str) -> bool:
    with open(f"/proc/{pid}/fdinfo/{fd}", "rb") as fdinfo:
        for line in fdinfo:
            if line.startswith(b"flags:"):
                return int(line.split()[1], 8) & os.O_ACCMODE != os.O_RDONLY
    return False


def end_writers(path: Path) -> list[int]:
    """SIGKILL every process still writing `path`; returns their pids."""
    pids = writers_of(path)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids
