"""The task registry and lifecycle: pending -> running -> one terminal status.

Follow a task here from ``submit`` to ``_finish``: it gets a record on disk, waits
for a slot, is spawned (hive_bash.process), may be ended by its deadline, idle
deadline, ``kill`` or shutdown, and on exit its record is finalised and its
completion todo handed to the notifier (hive_bash.todos).
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
import secrets
import signal
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import output, process, summaries
from .errors import NameInUse, NoInput, QueueFull, SpawnFailed, TaskFinished, TaskNotFound
from .task_input import InputChannel
from .records import RecordStore, Status, TaskRecord, TodoState
from .settings import Settings
from .todos import TodoMessage, TodoNotifier

logger = logging.getLogger(__name__)

WATCH_INTERVAL_SECS = 0.5
CAP_CHECKS_PER_TICK = 64
SHUTDOWN_TODO_FLUSH_SECS = 3.0
ID_BYTES = 6
SETTLE_SAVE_SECS = 0.05

KillAction = Literal["SIGINT", "SIGHUP", "SIGKILL", "cancelled"]


@dataclass
class TaskOptions:
    """What `run` asked for, already validated by the tool layer."""

    cmd: str
    name: str | None = None
    timeout_secs: float | None = None
    idle_timeout_secs: float | None = None
    cwd: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    pty: bool = False
    stdin: str = "null"


class Task:
    """A record plus what only lives while the daemon runs (process, waiters, deadline)."""

    def __init__(self, record: TaskRecord, env: dict[str, str] | None = None) -> None:
        self.record = record
        self.env = env or {}
        self.ended = asyncio.Event()
        self.process: process.TaskProcess | None = None
        # Input for `write`: only for tasks started with pty or stdin='pipe'.
        self.input: InputChannel | None = None
        if record.pty or record.stdin == "pipe":
            self.input = InputChannel(record.id, record.pty)
        self.end_cause: Status | None = None  # set when the daemon or `kill` decided how it ends
        self.end_reason: str | None = None
        self.deadline: asyncio.TimerHandle | None = None
        self.terminating = False
        self.unsaved = False  # the record changed and waits for a deferred save
        self.waiters = 0  # inline waits (run/status) in progress
        self.final_todo_held = False  # ended while waiters were there: they settle the todo
        self.observed = False  # the agent has seen the terminal result (inline wait or status)
        if record.status.is_terminal:
            self.ended.set()

    @property
    def id(self) -> str:
        return self.record.id

    @property
    def status(self) -> Status:
        return self.record.status


class TaskManager:
    def __init__(self, settings: Settings, notifier: TodoNotifier | None = None) -> None:
        self.settings = settings
        self.tasks_dir = settings.tasks_dir.resolve()
        self.store = RecordStore(self.tasks_dir)
        self.notifier = notifier or TodoNotifier(settings.agent_socket, self._on_todo_delivered)
        self._tasks: dict[str, Task] = {}
        self._pending: collections.deque[Task] = collections.deque()
        self._finished: collections.deque[Task] = collections.deque()  # in the order they ended
        self._live: set[Task] = set()  # running tasks (their count is what max_running limits)
        self._base_env = process.base_environment(os.environ, settings.hidden_env_names)
        self._background: set[asyncio.Task[None]] = set()
        self._watcher: asyncio.Task[None] | None = None
        self._stopping = False

    # ---- start and stop -------------------------------------------------

    async def start(self) -> None:
        self._recover_records()
        self.prune()
        self.notifier.start()
        self._watcher = asyncio.get_running_loop().create_task(self._watch(), name="task-watcher")

    def _recover_records(self) -> None:
        """Load the records a previous daemon left; what was pending or running is now interrupted."""
        for record in sorted(self.store.load_all(), key=lambda record: record.ended_at or time.time()):
            task = Task(record)
            self._tasks[record.id] = task
            if record.todo_ever_sent:
                self.notifier.remember_sent(record.id)
            if not record.status.is_terminal:
                self._interrupt_leftover(task)
                continue
            if not record.todo_delivered and record.todo_wanted is not None:
                self._want_todo(task, record.todo_wanted)
            self._finished.append(task)

    def _interrupt_leftover(self, task: Task) -> None:
        record = task.record
        if record.pid is not None:
            self._end_leftover_group(record.id, record.pid, record.proc_start_ticks)
        reason = f"interrupted: the daemon restarted while the task was {record.status.value}"
        self._end_without_exit(task, Status.INTERRUPTED, reason)

    @staticmethod
    def _end_leftover_group(task_id: str, pgid: int, start_ticks: int | None) -> None:
        """A previous daemon died without ending this task: end what is left of its group (never by pid alone)."""
        if process.same_process_alive(pgid, start_ticks):
            logger.warning("task %s (pid %d) outlived the previous daemon; ending its group", task_id, pgid)
            process.signal_group(pgid, signal.SIGKILL)
            return
        for pid in process.leftover_group_members(pgid, start_ticks):
            logger.warning("task %s left process %d behind; ending it", task_id, pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    async def shutdown(self) -> None:
        """End every task (pending cancelled, running terminated group by group), then flush todos."""
        self._stopping = True
        if self._watcher is not None:
            self._watcher.cancel()
        for task in list(self._pending):
            self._pending.remove(task)
            self._end_without_exit(task, Status.INTERRUPTED, "interrupted: the daemon stopped before it started")
        stopped = "interrupted: the daemon stopped"
        await asyncio.gather(*(self._terminate(task, Status.INTERRUPTED, stopped) for task in list(self._live)))
        for task in self._tasks.values():
            self._save_if_unsaved(task)
        await self.notifier.flush(SHUTDOWN_TODO_FLUSH_SECS)
        await self.notifier.stop()

    # ---- queries -------------------------------------------------------

    def get(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    def all_tasks(self) -> list[Task]:
        return list(self._tasks.values())

    @property
    def running_count(self) -> int:
        return len(self._live)

    async def wait_for_result(self, task: Task, seconds: float, abandon: asyncio.Event | None = None) -> bool:
        """Wait up to `seconds` for the task to end (or until `abandon`: the caller left); True if it has ended.

        A caller that returns the terminal result hands it to the agent, so the task's
        completion todo is cleared instead of sent. While callers wait, a task that ends
        holds its completion todo back for them to settle (no race with the notifier).
        """
        if seconds > 0 and not task.ended.is_set():
            task.waiters += 1
            try:
                await self._wait_either(task.ended, abandon, seconds)
            finally:
                task.waiters -= 1
        left = abandon is not None and abandon.is_set()
        if task.ended.is_set() and not left:
            self.observe_terminal(task)
        elif task.final_todo_held and task.waiters == 0:
            task.final_todo_held = False
            self._want_todo(task, "final")
        return task.ended.is_set()

    @staticmethod
    async def _wait_either(ended: asyncio.Event, abandon: asyncio.Event | None, seconds: float) -> None:
        waiters = [asyncio.ensure_future(ended.wait())]
        if abandon is not None:
            waiters.append(asyncio.ensure_future(abandon.wait()))
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    def observe_terminal(self, task: Task) -> None:
        """The agent has the terminal result in hand: no completion todo should linger for it."""
        if task.observed or not task.ended.is_set():
            return
        task.observed = True
        task.final_todo_held = False
        self._want_todo(task, "clear")

    # ---- submit and start ---------------------------------------------

    def submit(self, options: TaskOptions) -> Task:
        task_id = self._claim_id(options.name)
        if len(self._live) >= self.settings.max_running and len(self._pending) >= self.settings.max_pending:
            raise QueueFull(self.settings.max_pending)
        record = TaskRecord(
            id=task_id,
            cmd=options.cmd,
            created_at=time.time(),
            timeout_secs=options.timeout_secs,
            idle_timeout_secs=options.idle_timeout_secs,
            cwd=options.cwd or os.getcwd(),
            pty=options.pty,
            stdin="pipe" if options.stdin == "pipe" else "null",
        )
        task = Task(record, options.env)
        if len(self._live) < self.settings.max_running:
            self._start(task)  # raises SpawnFailed before the task is registered
            self._tasks[task_id] = task
        else:
            self._tasks[task_id] = task
            self._pending.append(task)
            self._save(task)
        return task

    def _claim_id(self, name: str | None) -> str:
        if name is None:
            while (task_id := secrets.token_hex(ID_BYTES)) in self._tasks:
                pass
            return task_id
        previous = self._tasks.get(name)
        if previous is not None:
            if not previous.ended.is_set():
                raise NameInUse(name, previous.status.value)
            # The name is free again: the new task replaces the old record and files.
            self._forget(previous)
        return name

    def _start(self, task: Task) -> None:
        record = task.record
        env = process.task_environment(self._base_env, task.env, record.id, record.pty)
        request = process.SpawnRequest(
            cmd=record.cmd,
            cwd=record.cwd,
            env=env,
            stdout_path=self.store.out_path(record.id),
            stderr_path=self.store.err_path(record.id),
            script_path=self.store.script_path(record.id),
            stdin=record.stdin,
            pty=record.pty,
        )
        try:
            proc = process.spawn(request)
        except OSError as exc:
            logger.warning("task %s could not start: %s", record.id, exc)
            self.store.delete(record.id)  # output files the failed spawn may have created
            raise SpawnFailed(f"{exc.strerror or exc} (errno {exc.errno})") from exc
        task.process = proc
        self._live.add(task)
        if task.input is not None:
            task.input.attach(proc)
        record.status = Status.RUNNING
        record.started_at = time.time()
        record.pid = proc.pid
        record.proc_start_ticks = proc.start_ticks
        self._arm_deadline(task)
        self._want_todo(task, "running")  # also saves the record
        self._in_background(self._await_exit(task), f"task-{record.id}")
        logger.debug("task %s started: pid %d", record.id, proc.pid)

    def _in_background(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        """Run a coroutine as a task we hold a reference to (the loop itself keeps only weak ones)."""
        background = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(background)
        background.add_done_callback(self._background.discard)

    def _arm_deadline(self, task: Task) -> None:
        timeout = task.record.timeout_secs
        if timeout is not None:
            task.deadline = asyncio.get_running_loop().call_later(timeout, self._on_deadline, task)

    def _on_deadline(self, task: Task) -> None:
        reason = f"timed out after {summaries.seconds(task.record.timeout_secs or 0)}"
        self._in_background(self._terminate(task, Status.TIMED_OUT, reason), f"deadline-{task.id}")

    def _start_pending(self) -> None:
        while self._pending and len(self._live) < self.settings.max_running and not self._stopping:
            task = self._pending.popleft()
            try:
                self._start(task)
            except SpawnFailed as exc:
                self._end_without_exit(task, Status.FAILED, str(exc))

    # ---- ending --------------------------------------------------------

    def kill(self, task_id: str, force: bool) -> tuple[Task, KillAction]:
        """Signal a running task's group or cancel a pending task; returns it and the signal sent, or "cancelled"."""
        task = self.get(task_id)
        if task.ended.is_set():
            raise TaskFinished(task_id, task.status.value)
        if task in self._pending:
            self._pending.remove(task)
            self._end_without_exit(task, Status.KILLED, "killed before it started")
            return task, "cancelled"
        assert task.process is not None
        # Closing a terminal sends SIGHUP; a REPL under a PTY ignores SIGINT.
        action: KillAction = "SIGKILL" if force else "SIGHUP" if task.record.pty else "SIGINT"
        task.end_cause = Status.KILLED
        task.end_reason = f"killed with {action}"
        task.process.signal(signal.Signals[action])
        return task, action

    def write_input(self, task_id: str, data: bytes, eof: bool) -> tuple[Task, int]:
        """Queue input for a task; returns it and the .out size just before the write."""
        task = self.get(task_id)
        if task.input is None:
            raise NoInput(task_id)
        if task.ended.is_set():
            raise TaskFinished(task_id, task.status.value)
        out_offset = output.file_size(self.store.out_path(task_id))
        task.input.write(data, eof)
        return task, out_offset

    async def _terminate(self, task: Task, cause: Status, reason: str) -> None:
        """SIGTERM the group, wait a grace period, then SIGKILL it; returns once the task has ended."""
        if task.ended.is_set() or task.process is None:
            return
        if task.terminating:
            await task.ended.wait()
            return
        task.terminating = True
        if task.end_cause is None:
            task.end_cause, task.end_reason = cause, reason
        task.process.signal(signal.SIGTERM)
        try:
            async with asyncio.timeout(self.settings.kill_grace_secs):
                await asyncio.shield(task.process.exited)
        except TimeoutError:
            task.process.signal(signal.SIGKILL)
        await task.ended.wait()

    async def _await_exit(self, task: Task) -> None:
        assert task.process is not None
        wait_status = await task.process.exited
        if task.input is not None:
            task.input.detach()
        task.process.release()
        self._live.discard(task)
        self._finish(task, wait_status)
        self._start_pending()

    def _finish(self, task: Task, wait_status: int) -> None:
        record = task.record
        if task.deadline is not None:
            task.deadline.cancel()
        record.ended_at = time.time()
        if os.WIFEXITED(wait_status):
            record.exit_code = os.WEXITSTATUS(wait_status)
        elif os.WIFSIGNALED(wait_status):
            record.signal = summaries.signal_name(os.WTERMSIG(wait_status))
        record.status = task.end_cause or Status.DONE
        record.end_reason = task.end_reason
        if task.end_cause is None and output.disk_full(self.tasks_dir):
            # Its writes failed with ENOSPC: what it printed is not all in the files.
            record.status = Status.FAILED
            record.end_reason = f"disk full: output could not be written completely to {self.tasks_dir}"
        task.ended.set()
        if task.waiters:
            self._hold_final_todo(task)
        else:
            self._want_todo(task, "final")
        logger.debug("task %s ended: %s", record.id, summaries.status_words(record))
        self._finished.append(task)  # pruned by the watcher, off the reply's path

    def _end_without_exit(self, task: Task, status: Status, reason: str) -> None:
        """End a task with no exit to report: cancelled before it started, or found unfinished at start."""
        record = task.record
        record.status = status
        record.end_reason = reason
        record.ended_at = time.time()
        task.ended.set()
        self._want_todo(task, "final")
        self._finished.append(task)

    # ---- todos and persistence -----------------------------------------

    def _want_todo(self, task: Task, state: TodoState) -> None:
        """Record the wanted todo state (persisted with the record), then hand it to the notifier."""
        record = task.record
        if state == "final" and task.observed:
            state = "clear"
        if state == "clear":
            if not self.notifier.clear(record.id):
                record.todo_wanted, record.todo_delivered = None, True
                self._save(task)
                return
        elif state == "running":
            self.notifier.upsert(record.id, summaries.running_todo(record), "running")
        else:
            body = summaries.final_todo(record, self.store.out_path(record.id), self.store.err_path(record.id))
            self.notifier.upsert(record.id, body, "final")
        record.todo_wanted = state
        record.todo_delivered = not self.notifier.enabled
        self._save(task)

    def _hold_final_todo(self, task: Task) -> None:
        """Note that a final todo is owed without sending it yet: the waiters settle it at once.

        The record is saved when they do (one write instead of two per inline run); should
        they not within SETTLE_SAVE_SECS, it is saved as owed so a crash cannot lose the todo.
        """
        task.final_todo_held = True
        task.record.todo_wanted, task.record.todo_delivered = "final", not self.notifier.enabled
        task.unsaved = True
        asyncio.get_running_loop().call_later(SETTLE_SAVE_SECS, self._save_if_unsaved, task)

    def _save_if_unsaved(self, task: Task) -> None:
        if task.unsaved and self._tasks.get(task.id) is task:
            self._save(task)

    def _on_todo_delivered(self, message: TodoMessage) -> None:
        task = self._tasks.get(message.key)
        if task is None:
            return
        record = task.record
        record.todo_ever_sent = message.kind == "upsert"
        if record.todo_wanted == message.label:
            record.todo_delivered = True
        self._save(task)

    def _save(self, task: Task) -> None:
        task.unsaved = False
        try:
            self.store.save(task.record)
        except OSError as exc:
            # Disk full or gone: the in-memory record stays authoritative and is saved at the next change.
            logger.error("could not save the record of task %s: %s", task.id, exc)

    def _forget(self, task: Task) -> None:
        self._tasks.pop(task.id, None)
        self.notifier.forget(task.id)
        self.store.delete(task.id)

    def prune(self) -> None:
        """Drop the oldest finished records beyond the count limit, and those past the age limit.

        `_finished` is kept in end order, so this looks at the oldest few only.
        """
        cutoff = time.time() - self.settings.retain_secs
        while self._finished:
            oldest = self._finished[0]
            if self._tasks.get(oldest.id) is not oldest:  # its name was reused: already forgotten
                self._finished.popleft()
                continue
            too_many = len(self._finished) > self.settings.retain_count
            too_old = (oldest.record.ended_at or oldest.record.created_at) < cutoff
            if not (too_many or too_old):
                return
            self._finished.popleft()
            self._forget(oldest)

    # ---- the watcher: idle deadlines, output caps ----------------------

    async def _watch(self) -> None:
        """Twice a second: idle deadlines, a slice of the output caps, then retention.

        Idle deadlines need every tick, but only tasks that asked for one. Output caps are
        checked round-robin, CAP_CHECKS_PER_TICK tasks a tick, so hundreds of running tasks
        never mean hundreds of stat calls in one burst between two replies.
        """
        cap_queue: collections.deque[Task] = collections.deque()
        while True:
            await asyncio.sleep(WATCH_INTERVAL_SECS)
            now = time.time()
            for task in [task for task in self._live if task.record.idle_timeout_secs is not None]:
                self._check_idle(task, now)
            if not cap_queue:
                cap_queue.extend(self._live)
            for _ in range(min(CAP_CHECKS_PER_TICK, len(cap_queue))):
                task = cap_queue.popleft()
                if task in self._live:
                    self._check_output_cap(task)
            self.prune()

    def _check_output_cap(self, task: Task) -> None:
        if task.terminating:
            return
        for path, stream in ((self.store.out_path(task.id), "stdout"), (self.store.err_path(task.id), "stderr")):
            if output.file_size(path) > self.settings.max_output_bytes:
                reason = f"{stream} exceeded the output cap of {self.settings.max_output_bytes} bytes"
                self._end_for_limit(task, reason, truncate=(path, self.settings.max_output_bytes))
                return

    def _check_idle(self, task: Task, now: float) -> None:
        idle_timeout = task.record.idle_timeout_secs
        if task.terminating or idle_timeout is None:
            return
        if now - self.last_output_at(task) >= idle_timeout:
            reason = f"timed out: idle, no output for {summaries.seconds(idle_timeout)}"
            self._in_background(self._terminate(task, Status.TIMED_OUT, reason), f"idle-{task.id}")

    def _end_for_limit(self, task: Task, reason: str, truncate: tuple[Path, int]) -> None:
        """End a task over a resource limit, then cut its output back to the limit."""

        async def end() -> None:
            await self._terminate(task, Status.FAILED, reason)
            os.truncate(*truncate)

        self._in_background(end(), f"limit-{task.id}")

    def last_output_at(self, task: Task) -> float:
        """When stdout or stderr last grew (their mtimes), or the start if neither has any output."""
        record = task.record
        streams = (self.store.out_path(record.id), self.store.err_path(record.id))
        return output.last_output_time(record.started_at or record.created_at, map(output.size_and_mtime, streams))
