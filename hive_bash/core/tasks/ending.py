"""How a task ended, decided once (`decide_ending`): a pure function of its exit, the cause the
daemon or `kill` chose before it exited, and what its cgroup reported. A cause chosen first
wins: the exit of a task the daemon ended is read as that end, never as what the kernel saw."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from hive_bash.core.processes import killed_by_sigkill
from hive_bash.model import Status, signal_name

UNREADABLE_REASON = "the daemon could not read how it ended"


@dataclass(frozen=True)
class Cause:
    """Why the daemon or `kill` ended a task, chosen before its process exited (or instead of a start)."""

    status: Status
    reason: str


@dataclass(frozen=True)
class Exit:
    """What the wait status says: an exit code, or the signal that ended the leader."""

    exit_code: int | None = None
    signal: str | None = None

    @classmethod
    def of(cls, wait_status: int) -> Exit:
        if os.WIFEXITED(wait_status):
            return cls(exit_code=os.WEXITSTATUS(wait_status))
        if os.WIFSIGNALED(wait_status):
            return cls(signal=signal_name(os.WTERMSIG(wait_status)))
        return cls()

    @property
    def sigkilled(self) -> bool:
        return killed_by_sigkill(self.signal, self.exit_code)


@dataclass(frozen=True)
class CgroupReport:
    """What the task's cgroup and the OOM counter said once it was empty."""

    limit_reason: str | None = None  # its own cgroup limit ended it ("memory limit 512 MiB reached")
    oom_diagnosis: str | None = None  # the OOM-kill count rose while it ran (read only for a SIGKILL)


NO_REPORT = CgroupReport()


@dataclass(frozen=True)
class Ending:
    """How a task ended: what its record says once it is terminal."""

    status: Status
    reason: str | None
    exit_code: int | None = None
    signal: str | None = None
    diagnosis: str | None = None


def decide_ending(
    exit: Exit | None, cause: Cause | None, report: CgroupReport = NO_REPORT, disk_full_in: Path | None = None
) -> Ending:
    """The one verdict on a task's end; `exit` None: none to read (it never started, or reading failed).
    With no cause chosen: its own cgroup's limit with a failing exit makes it failed, a SIGKILL while
    the OOM counter rose is diagnosed, a full disk (`disk_full_in`) makes it failed: its output is cut."""
    exit_code, signal = (exit.exit_code, exit.signal) if exit is not None else (None, None)
    if cause is not None:
        return Ending(cause.status, cause.reason, exit_code, signal)
    status, reason = (Status.DONE, None) if exit is not None else (Status.FAILED, UNREADABLE_REASON)
    diagnosis = None
    if report.limit_reason is not None and exit_code != 0:
        status, reason = Status.FAILED, report.limit_reason
    elif exit is not None and exit.sigkilled:
        diagnosis = report.oom_diagnosis
    if disk_full_in is not None:
        status, reason = Status.FAILED, f"disk full: output could not be written completely to {disk_full_in}"
    return Ending(status, reason, exit_code, signal, diagnosis)
