"""A task while the daemon runs: its record plus its process, its input and how it is being ended.

The record (hive_bash.core.records) is what survives a restart; a `Task` adds what only
lives in this daemon: the process it supervises, the input channel `write` feeds, and
the cause the daemon or `kill` chose for its end, so an exit is read as that end.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from typing import Literal

from hive_bash.core import cgroups, process
from hive_bash.core.input_wait import InputWait
from hive_bash.core.records import TaskRecord
from hive_bash.core.task_input import InputBudget, InputChannel
from hive_bash.errors import NoInput, TaskFinished
from hive_bash.model import Status, signal_name

logger = logging.getLogger(__name__)

BOOT_ID = process.boot_id()

KillAction = Literal["SIGINT", "SIGHUP", "SIGKILL", "cancelled"]


class Task:
    """A record plus what only lives while the daemon runs: its process, input channel and how it is being ended."""

    def __init__(
        self,
        record: TaskRecord,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        notify_on: str | None = None,
        input_budget: InputBudget | None = None,
    ) -> None:
        self.record = record
        self.env = env or {}
        self.cwd = cwd  # the cwd `run` asked for; a session's task otherwise starts in its session's
        self.notify_on = notify_on  # a regex: a matching output line updates its todo while it runs
        self.ended = asyncio.Event()
        self.process: process.TaskProcess | None = None
        # Input for `write`: only for tasks started with pty or stdin='pipe'.
        self.input: InputChannel | None = None
        if record.pty or record.stdin == "pipe":
            self.input = InputChannel(record.id, record.pty, budget=input_budget)
        self.end_cause: Status | None = None  # set when the daemon or `kill` decided how it ends
        self.end_reason: str | None = None
        self.kill_signal: str | None = None  # what `kill` last sent, and when: status says so while it runs
        self.kill_sent_at: float | None = None
        self.terminating = False
        self.oom_kills_at_start: int | None = None  # the cgroup's OOM-kill count when it started
        self.input_wait: InputWait | None = None  # whether it is blocked reading its input (pipe or pty)
        self.input_writes = 0  # `write` calls so far: a wait for input starts over at each
        self.session_env_before: dict[str, str] | None = None  # its session's variables when it started
        self.limits = cgroups.Limits()  # its own cgroup's limits (none without a cgroup tree)
        if record.status.is_terminal:
            self.ended.set()

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def status(self) -> Status:
        return self.record.status

    def write(self, data: bytes, eof: bool) -> None:
        if self.input is None:
            raise NoInput(self.id)
        if self.ended.is_set():
            raise TaskFinished(self.id, self.status.value)
        self.input.write(data, eof)
        self.input_writes += 1

    def send_kill(self, force: bool) -> KillAction:
        """Signal the running task's group the way `kill` does; it will end as killed however it exits."""
        assert self.process is not None
        # Closing a terminal sends SIGHUP; a REPL under a PTY ignores SIGINT.
        action: KillAction = "SIGKILL" if force else "SIGHUP" if self.record.pty else "SIGINT"
        self.end_cause, self.end_reason = Status.KILLED, f"killed with {action}"
        self.kill_signal, self.kill_sent_at = action, time.time()
        self.process.signal(signal.Signals[action])
        return action

    async def terminate(self, cause: Status, reason: str, grace_secs: float) -> None:
        """SIGTERM the group, wait a grace period, then SIGKILL it; returns once the task has ended."""
        if self.ended.is_set() or self.process is None:
            return
        if self.terminating:
            await self.ended.wait()
            return
        self.terminating = True
        if self.end_cause is None:
            self.end_cause, self.end_reason = cause, reason
        self.process.signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(grace_secs):
                await asyncio.shield(self.process.wait_status)
        except TimeoutError:
            self.process.signal(signal.SIGKILL)
        await self.ended.wait()

    def started(self, proc: process.TaskProcess, started_at: float) -> None:
        self.process = proc
        if self.input is not None:
            self.input.attach(proc)
        record = self.record
        record.status, record.started_at = Status.RUNNING, started_at
        record.pid, record.proc_start_ticks, record.boot_id = proc.pid, proc.start_ticks, BOOT_ID

    def exited(self, wait_status: int) -> None:
        """Its process has ended and been reaped: release what the daemon held for it, put its end in the record."""
        assert self.process is not None
        if self.input_wait is not None:
            self.input_wait.stop()  # before release: it asks the PTY master for its foreground group
        if self.input is not None:
            self.input.detach()
        self.process.release()
        record = self.record
        record.ended_at = time.time()
        if os.WIFEXITED(wait_status):
            record.exit_code = os.WEXITSTATUS(wait_status)
        elif os.WIFSIGNALED(wait_status):
            record.signal = signal_name(os.WTERMSIG(wait_status))
        record.status = self.end_cause or Status.DONE
        record.end_reason = self.end_reason

    def note_exit(self, exited: asyncio.Future[int]) -> None:
        """`exited`, always leaving a terminal record: an end that cannot be read (a file the task
        made hostile, MemoryError) is logged and recorded as failed, or as the cause already chosen."""
        try:
            self.exited(exited.result())
        except Exception:
            logger.exception("task %s: could not read how it ended", self.id)
            if not self.record.status.is_terminal:
                self.record.status, self.record.ended_at = self.end_cause or Status.FAILED, time.time()
                self.record.end_reason = self.end_reason or "the daemon could not read how it ended"

    async def wait_for_end(self, seconds: float, *also: asyncio.Event | None) -> None:
        """Wait up to `seconds` for the task to end, or for any of `also` (None: not waited on) to be set."""
        if seconds <= 0 or self.ended.is_set():
            return
        waiters = [asyncio.ensure_future(event.wait()) for event in (self.ended, *also) if event is not None]
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
