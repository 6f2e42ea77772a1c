"""A task while the daemon runs: its record (what survives a restart) plus what only this daemon
holds: its process, the input channel `write` feeds, and the cause chosen for its end (so an
exit is read as that end). Its attributes are set by its own methods."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Literal

from hive_bash.core.processes import InputBudget, InputChannel, InputWait, Limits, ProcReaders, TaskProcess, boot_id
from hive_bash.core.storage import TaskRecord
from hive_bash.core.tasks.ending import Cause, Ending
from hive_bash.errors import NoInput, TaskFinished
from hive_bash.model import Status, TaskOptions

BOOT_ID = boot_id()

KillAction = Literal["SIGINT", "SIGHUP", "SIGKILL", "cancelled"]


class Task:
    """A record plus what only lives while the daemon runs: its process, input channel and how it is being ended."""

    def __init__(
        self,
        record: TaskRecord,
        *,
        options: TaskOptions | None = None,
        input_budget: InputBudget | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.record = record
        # What `run` asked for (a task read back at start: its command alone). A session's task starts in
        # its session's cwd unless it asked for one; a notify_on line updates its todo while it runs.
        self.options = options or TaskOptions(record.cmd)
        self.ended = asyncio.Event()
        self.process: TaskProcess | None = None
        self.input: InputChannel | None = None  # what `write` feeds
        if record.pty or record.stdin == "pipe":
            self.input = InputChannel(record.id, record.pty, budget=input_budget)
        self.cause: Cause | None = None  # set when the daemon or `kill` decided how it ends
        self.kill_signal: str | None = None  # what `kill` last sent, and when: status says so while it runs
        self.kill_sent_at: float | None = None
        self.terminating = False
        self.oom_kills_at_start: int | None = None  # the cgroup's OOM-kill count when it started
        self._input_watch: InputWait | None = None  # samples whether it is blocked reading its input
        self.input_writes = 0  # `write` calls so far: a wait for input starts over at each
        # Set while it is blocked reading its input and nothing was written since: an inline
        # wait on it ends, since no output can come before the input does.
        self.waiting_for_input = asyncio.Event()
        self.session_env_before: dict[str, str] | None = None  # its session's variables when it started
        self.limits = limits or Limits()  # its own cgroup's limits (none without a cgroup tree)
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
        self.waiting_for_input.clear()  # answered: its next wait for input is sampled anew

    def send_kill(self, force: bool) -> KillAction:
        """Signal the running task's group the way `kill` does; it will end as killed however it exits."""
        assert self.process is not None
        # Closing a terminal sends SIGHUP; a REPL under a PTY ignores SIGINT.
        action: KillAction = "SIGKILL" if force else "SIGHUP" if self.record.pty else "SIGINT"
        self.cause = Cause(Status.KILLED, f"killed with {action}")
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
        if self.cause is None:
            self.cause = Cause(cause, reason)
        self.process.signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(grace_secs):
                await asyncio.shield(self.process.wait_status)
        except TimeoutError:
            self.process.signal(signal.SIGKILL)
        await self.ended.wait()

    def started(self, proc: TaskProcess, started_at: float) -> None:
        self.process = proc
        if self.input is not None:
            self.input.attach(proc)
        record = self.record
        record.status, record.started_at = Status.RUNNING, started_at
        record.pid, record.proc_start_ticks, record.boot_id = proc.pid, proc.start_ticks, BOOT_ID

    def prepared(self, session_env_before: dict[str, str] | None, oom_kills_at_start: int | None) -> None:
        """What its start found just before the spawn: its session's variables, the cgroup's OOM-kill count."""
        self.session_env_before = session_env_before
        self.oom_kills_at_start = oom_kills_at_start

    def watch_input(self, watch: InputWait, readers: ProcReaders) -> None:
        self._input_watch = watch
        watch.start(readers)

    def waiting_for_input_changed(self, waiting: bool) -> None:
        """The input-wait sampler's answer flipped (hive_bash.core.processes.input_wait)."""
        if waiting:
            self.waiting_for_input.set()
        else:
            self.waiting_for_input.clear()

    def output_failed(self, reason: str) -> None:
        """Its output could not be written: it ends failed. Chosen at once: the failure may come while
        the process layer handles the leader's exit, and the exit must not be read as a plain one."""
        if self.cause is None:
            self.cause = Cause(Status.FAILED, reason)

    def release(self) -> None:
        """Its process has ended and been reaped: let go of what the daemon held for it."""
        assert self.process is not None
        if self._input_watch is not None:
            self._input_watch.stop()  # before release: it asks the PTY master for its foreground group
        if self.input is not None:
            self.input.detach()
        self.process.release()

    def end(self, ending: Ending, ended_at: float) -> None:
        """Its end, decided once (hive_bash.core.tasks.ending), into the record; the waiters wake."""
        record = self.record
        record.status, record.end_reason, record.ended_at = ending.status, ending.reason, ended_at
        record.exit_code, record.signal, record.diagnosis = ending.exit_code, ending.signal, ending.diagnosis
        if self.input is not None:
            self.input.detach()  # a task cancelled before it started still held its backlog
        self.ended.set()

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
