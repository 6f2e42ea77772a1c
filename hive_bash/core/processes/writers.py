"""Writers: processes an ended task left (a `setsid` child escapes the group kill) that still write its
output, found by the file they hold open for writing (only the task's leader got that fd) and ended."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from pathlib import Path

from hive_bash.core.processes.procfs import all_pids, read_start

FLAGS = re.compile(r"^flags:\s*([0-7]+)", re.MULTILINE)  # of /proc/<pid>/fdinfo/<fd>, in octal


def writers_of(path: Path) -> list[int]:
    """Live processes (not the daemon) holding `path`'s file open for writing."""
    try:
        target = os.lstat(path)
    except OSError:
        return []
    own_pid = os.getpid()
    return [pid for pid in all_pids() if pid != own_pid and _writes(pid, target.st_dev, target.st_ino)]


def _writes(pid: int, device: int, inode: int) -> bool:
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # gone, or not ours to look at
        return False
    for fd in fds:
        try:
            info = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if (info.st_dev, info.st_ino) != (device, inode):
            continue
        flags = FLAGS.search(read_start(f"/proc/{pid}/fdinfo/{fd}") or "")
        if flags is not None and int(flags[1], 8) & os.O_ACCMODE != os.O_RDONLY:
            return True
    return False


def end_writers(path: Path) -> list[int]:
    """SIGKILL every process still writing `path`; returns their pids."""
    pids = writers_of(path)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return pids
