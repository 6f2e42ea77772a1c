"""hive_bash.core.tasks.ending on its own: every cause, exit and cgroup report against the one verdict."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from hive_bash.core.tasks.ending import NO_REPORT, UNREADABLE_REASON, Cause, CgroupReport, Ending, Exit, decide_ending
from hive_bash.model import Status

TASKS = Path("/var/lib/hive-bash/tasks")
DISK_FULL = f"disk full: output could not be written completely to {TASKS}"
OOM = "most likely killed by the kernel's OOM killer: the cgroup's oom_kill count rose while it ran; ..."
MEMORY = "memory limit 64 MiB reached"
PIDS = "process limit 8 reached"
KILLED = Cause(Status.KILLED, "killed with SIGINT")
TIMED_OUT = Cause(Status.TIMED_OUT, "timed out after 5s")
IDLE = Cause(Status.TIMED_OUT, "timed out: idle, no output for 5s")
CAP = Cause(Status.FAILED, "stdout exceeded the output cap of 200000 bytes")
TERMINAL = Cause(Status.FAILED, "disk full: terminal output could not be written to /t/x.out")
STOPPED = Cause(Status.INTERRUPTED, "interrupted: the daemon stopped")
RESTART = Cause(Status.INTERRUPTED, "interrupted: the daemon restarted while it ran")
SPAWN = Cause(Status.FAILED, "No such file or directory (errno 2)")
CANCELLED = Cause(Status.KILLED, "killed before it started")

OK, FAILING, SIGKILLED_BASH = Exit(exit_code=0), Exit(exit_code=2), Exit(exit_code=137)
SIGKILL, SIGTERM = Exit(signal="SIGKILL"), Exit(signal="SIGTERM")
LIMIT, OOM_ROSE = CgroupReport(limit_reason=MEMORY), CgroupReport(oom_diagnosis=OOM)


@pytest.mark.parametrize(
    ("exit", "cause", "report", "disk_full_in", "expected"),
    [
        # No cause: the exit speaks, unless the cgroup or the disk says otherwise.
        (OK, None, NO_REPORT, None, Ending(Status.DONE, None, 0)),
        (FAILING, None, NO_REPORT, None, Ending(Status.DONE, None, 2)),
        (SIGTERM, None, NO_REPORT, None, Ending(Status.DONE, None, signal="SIGTERM")),
        (SIGKILL, None, NO_REPORT, None, Ending(Status.DONE, None, signal="SIGKILL")),
        # The OOM killer: a SIGKILL (of the leader, or reported by bash) while the count rose.
        (SIGKILL, None, OOM_ROSE, None, Ending(Status.DONE, None, signal="SIGKILL", diagnosis=OOM)),
        (SIGKILLED_BASH, None, OOM_ROSE, None, Ending(Status.DONE, None, 137, diagnosis=OOM)),
        (FAILING, None, OOM_ROSE, None, Ending(Status.DONE, None, 2)),
        # Its own cgroup's limit: failed, with the cgroup's words, unless it exited 0 all the same.
        (SIGKILL, None, LIMIT, None, Ending(Status.FAILED, MEMORY, signal="SIGKILL")),
        (SIGKILLED_BASH, None, CgroupReport(PIDS, OOM), None, Ending(Status.FAILED, PIDS, 137)),
        (OK, None, LIMIT, None, Ending(Status.DONE, None, 0)),
        # A full disk: failed, whatever the exit or the limit said.
        (OK, None, NO_REPORT, TASKS, Ending(Status.FAILED, DISK_FULL, 0)),
        (SIGKILL, None, LIMIT, TASKS, Ending(Status.FAILED, DISK_FULL, signal="SIGKILL")),
        (SIGKILL, None, OOM_ROSE, TASKS, Ending(Status.FAILED, DISK_FULL, signal="SIGKILL", diagnosis=OOM)),
        # An exit that could not be read.
        (None, None, NO_REPORT, None, Ending(Status.FAILED, UNREADABLE_REASON)),
        (None, None, LIMIT, None, Ending(Status.FAILED, MEMORY)),
        (None, None, OOM_ROSE, TASKS, Ending(Status.FAILED, DISK_FULL)),
        # A cause chosen first wins over the exit, the cgroup and the disk; the exit is kept.
        *(
            (exit, cause, LIMIT, TASKS, Ending(cause.status, cause.reason, exit.exit_code, exit.signal))
            for cause in (KILLED, TIMED_OUT, IDLE, CAP, TERMINAL, STOPPED)
            for exit in (OK, SIGKILL, SIGKILLED_BASH)
        ),
        (SIGKILL, KILLED, OOM_ROSE, None, Ending(Status.KILLED, KILLED.reason, signal="SIGKILL")),
        # No exit at all: never started, or found unfinished at a restart.
        *((None, cause, NO_REPORT, None, Ending(cause.status, cause.reason)) for cause in (RESTART, SPAWN, CANCELLED)),
        (None, KILLED, NO_REPORT, None, Ending(Status.KILLED, KILLED.reason)),
    ],
)
def test_the_ending_is_one_verdict_over_exit_cause_and_cgroup(
    exit: Exit | None, cause: Cause | None, report: CgroupReport, disk_full_in: Path | None, expected: Ending
) -> None:
    assert decide_ending(exit, cause, report, disk_full_in) == expected


@pytest.mark.parametrize("reason", ["the task raised its own limit", "process limit 8 reached", "x" * 300])
def test_any_limit_reason_the_cgroup_reports_is_the_ending(reason: str) -> None:
    assert decide_ending(SIGKILL, None, CgroupReport(limit_reason=reason)) == Ending(
        Status.FAILED, reason, signal="SIGKILL"
    )


def test_the_exit_is_read_from_the_wait_status() -> None:
    # The encodings os.wait4 returns: the exit code in the high byte, the signal in the low one.
    assert Exit.of(3 << 8) == Exit(exit_code=3)
    assert Exit.of(signal.SIGKILL) == Exit(signal="SIGKILL") and Exit.of(signal.SIGKILL).sigkilled
    assert Exit.of(137 << 8).sigkilled and not Exit.of(0).sigkilled
