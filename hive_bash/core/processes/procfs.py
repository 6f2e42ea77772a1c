"""What /proc says about a process: its stat line, and the task it was started for.

Below every module that looks at processes, the cgroup tree and its sweep included (which
process.py imports), so each reads /proc/<pid>/stat through this one parser.
"""

from __future__ import annotations

import os
import time

# Set in every task's environment (and how records written before `boot_id` existed recognise their leaders).
TASK_ID_ENV = "HIVE_BASH_TASK_ID"
CLOCK_TICKS_PER_SEC = os.sysconf("SC_CLK_TCK")
NS_PER_CLOCK_TICK = 1_000_000_000 // CLOCK_TICKS_PER_SEC


def stat_fields(pid: int | str) -> list[bytes] | None:
    """/proc/<pid>/stat from field 3 on: state(0) ppid(1) pgrp(2) session(3) ... starttime(19); None if gone.

    The one parser of that file: the command name (field 2) may contain spaces and
    parentheses, so the fields are split after its last ')'."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            data = stat.read()
    except OSError:  # gone, or not ours to read
        return None
    return data[data.rindex(b")") + 2 :].split()


def ticks_now() -> int:
    """Now, in the clock ticks since boot that /proc/<pid>/stat gives a process's start time in."""
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) // NS_PER_CLOCK_TICK


def task_id_of(pid: int) -> str | None:
    """The HIVE_BASH_TASK_ID the process was started with (its environment at exec), if it kept it."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as environ:
            variables = environ.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{TASK_ID_ENV}=".encode()
    found = next((name[len(prefix) :] for name in variables if name.startswith(prefix)), None)
    return None if found is None else found.decode("utf-8", "replace")
