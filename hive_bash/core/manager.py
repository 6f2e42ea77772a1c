"""The task registry and lifecycle: submit -> start -> exited -> ended -> forgotten.

Follow a task from `submit`: it gets an id and a record, waits for a slot if all are
taken (hive_bash.core.slots), is started (hive_bash.core.launch: its disk reserve, its
shell session's `prepare`, its cgroup, the spawn) and watched (hive_bash.core.watcher:
deadline, idle deadline, output cap). `kill`, the watcher (hive_bash.core.endings) or
shutdown may end it; once its process is reaped, its end is noted (usage, its session's
`collect`, the disk) and finalised in `_ended`, which tells hive_bash.core.todo_state
(its completion todo) and hive_bash.core.retention (when to drop it). The record is saved
whenever the todo state machine says it changed; an end a reply reports is saved right
after that reply (hive_bash.core.record_saver).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hive_bash.core import launch, output, process, recovery, wording
from hive_bash.core.endings import Endings
from hive_bash.core.input_wait import InputSampler
from hive_bash.core.record_saver import RecordSaver
from hive_bash.core.records import RecordStore, TaskRecord, max_record_bytes
from hive_bash.core.retention import Retention
from hive_bash.core.sessions import SessionState, SessionStore
from hive_bash.core.slots import Slots
from hive_bash.core.store import TaskFiles
from hive_bash.core.task import KillAction, Task
from hive_bash.core.task_input import InputBudget
from hive_bash.core.todo_state import TodoStateMachine
from hive_bash.core.watcher import Watcher
from hive_bash.errors import NameInUse, SpawnFailed, TaskFinished, TaskNotFound
from hive_bash.model import Status, Stream, TaskOptions
from hive_bash.settings import Settings

logger = logging.getLogger(__name__)

SHUTDOWN_TODO_FLUSH_SECS = 3.0
ID_BYTES = 6


class TaskManager:
    """The registry of tasks and their lifecycle; the watcher, retention and todo state machine report to it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.files = TaskFiles(settings.tasks_dir.resolve())
        self._store = RecordStore(self.files, max_record_bytes(settings.max_cmd_bytes))
        self._saver = RecordSaver(self._store)
        self._todos = TodoStateMachine(settings.agent_socket, self.files, self._todo_changed)
        self._tasks: dict[str, Task] = {}
        self._slots = Slots(settings.max_running, settings.max_pending)
        self._retention = Retention(settings.retain_count, settings.retain_secs)
        self._input_budget = InputBudget()  # input waiting for all tasks together
        self._input_sampler = InputSampler()  # the one thread that reads whether tasks wait for input
        base_env = process.base_environment(os.environ, settings.hidden_env_names)
        self._sessions = SessionStore(self.files, base_env, settings.hidden_env_names)
        self._launcher = launch.Launcher(settings, self._store, self._saver, self._sessions)
        self._endings = Endings(settings, self.files.dir, self._launcher.oom_counter, self._current)
        self._watcher = Watcher(
            self.files,
            settings.max_output_bytes,
            self._endings.for_watcher,
            self._todos.line_matched,
            self._endings.hold_cap_after_end,
        )
        self._watching: asyncio.Task[None] | None = None
        self._watching_cgroups: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the records a previous daemon left (what was pending or running is now interrupted), then serve."""
        self._sessions.load()
        if self._launcher.cgroups is not None:
            await self._launcher.cgroups.end_leftovers()  # what a previous daemon's tasks left, setsid'd or not
        for record in sorted(self._store.load_all(), key=lambda record: record.ended_at or time.time()):
            task = self._tasks[record.id] = Task(record)
            self._todos.track(record)
            if record.status.is_terminal:
                self._retention.ended(record)
            else:
                _guarded(recovery.end_leftover_processes, record, "ending what it left running")
                if record.pid is not None:
                    # a shell that ended while no daemon watched left its state
                    _guarded(self._sessions.collect, record, "taking its session's state")
                self._ended(task, Status.INTERRUPTED, recovery.interrupted_reason(record))
        self.prune(sessions_too=True)
        self._todos.start()
        loop = asyncio.get_running_loop()
        self._watching = loop.create_task(self._watcher.run(self.prune), name="task-watcher")
        if self._launcher.cgroups is not None:  # limits a task changed, processes that left its cgroup
            self._watching_cgroups = loop.create_task(self._launcher.cgroups.watch(), name="cgroup-watch")

    async def shutdown(self) -> None:
        """End every task (pending cancelled, running terminated group by group), then flush todos."""
        for watching in (self._watching, self._watching_cgroups):
            if watching is not None:
                watching.cancel()
        for task in self._slots.close():
            self._ended(task, Status.INTERRUPTED, "interrupted: the daemon stopped before it started")
        stopped = "interrupted: the daemon stopped"
        grace = self.settings.kill_grace_secs
        await asyncio.gather(
            *(task.terminate(Status.INTERRUPTED, stopped, grace) for task in list(self._slots.running))
        )
        self._input_sampler.close()
        self._saver.write_settled()
        await self._todos.stop(SHUTDOWN_TODO_FLUSH_SECS)

    def get(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    def newest_first(self, status: Status | None = None, session: str | None = None) -> list[Task]:
        tasks = [
            task
            for task in self._tasks.values()
            if (status is None or task.status is status) and (session is None or task.record.session == session)
        ]
        return sorted(tasks, key=lambda task: task.record.created_at, reverse=True)

    def session_state(self, name: str) -> SessionState | None:
        """What session `name` carries now (the state the last of its tasks to end left)."""
        return self._sessions.get(name)

    def sessions(self, name: str | None = None) -> list[tuple[SessionState, int]]:
        """Each shell session (or only `name`) by name, with how many known tasks it has."""
        return self._sessions.listing((task.record.session for task in self._tasks.values()), name)

    def output_path(self, task: Task, stream: Stream) -> Path:
        return self.files.output(task.id, stream)

    @property
    def task_count(self) -> int:
        return len(self._tasks)

    @property
    def running_count(self) -> int:
        return len(self._slots.running)

    @property
    def todo_backlog(self) -> int:
        return self._todos.backlog

    def write_settled_records(self) -> None:
        """Write the records whose changes a reply reported (see RecordSaver); the app calls this
        once a response has gone out."""
        self._saver.write_settled()

    async def wait_for_result(
        self, task: Task, seconds: float, abandon: asyncio.Event | None = None, until: asyncio.Event | None = None
    ) -> bool:
        """Wait up to `seconds` for the task to end (or until `abandon`: the caller left, or `until`: a
        wait_for line matched); True if it has ended.

        A caller that gets the terminal result hands it to the agent, so the todo state
        machine hears of the wait and whether its reply carries the result.
        """
        result_seen = False
        self._todos.wait_begins(task.record)
        try:
            await task.wait_for_end(seconds, abandon, until)
            result_seen = task.ended.is_set() and not (abandon is not None and abandon.is_set())
        finally:
            with self._saver.settling():  # the reply reports the end: the record is written after it
                self._todos.wait_over(task.record, result_seen)
        return task.ended.is_set()

    def shown(self, task: Task) -> None:
        """A reply showed the task to the agent (what it printed so far): its notify_on notice is seen."""
        self._todos.task_shown(task.record)

    def submit(self, options: TaskOptions) -> Task:
        limits = self._launcher.limits(options)
        # Before the name is claimed: a start refused for want of room keeps the old task of that name.
        self._slots.check_room()
        task_id = self._claim_id(options.name)
        record = launch.new_record(task_id, options)
        task = Task(record, dict(options.env), options.cwd, options.notify_on, self._input_budget)
        task.limits = limits
        self._todos.track(record)
        try:
            if self._slots.free():
                self._start(task)
            else:
                # A task no restart could find must not start later either.
                self._launcher.save_or_refuse(record)
                self._slots.pending.append(task)
        except SpawnFailed:
            self._todos.forget(record)
            raise
        self._tasks[task_id] = task
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
        self._launcher.start(task, self._todos.started, self._endings.for_output_failure)
        assert task.process is not None
        launch.watch_input(task, self.files, self._todos.waits_for_input, self._input_sampler)
        self._slots.running.add(task)
        self._watcher.watch(task.record, task.notify_on)
        # A callback, not a task awaiting the future: the end is handled in the same loop turn.
        task.process.wait_status.add_done_callback(functools.partial(self._process_exited, task))
        logger.debug("task %s started: pid %d", task.id, task.process.pid)

    def _start_pending(self) -> None:
        while (task := self._slots.next_pending()) is not None:
            try:
                self._start(task)
            except SpawnFailed as exc:
                self._ended(task, Status.FAILED, str(exc))

    def write_input(self, task_id: str, data: bytes, eof: bool) -> tuple[Task, int]:
        """Queue input for a task; returns it and the .out size just before the write."""
        task = self.get(task_id)
        out_offset = output.file_size(self.files.out(task_id))
        task.write(data, eof)
        return task, out_offset

    def kill(self, task_id: str, force: bool) -> tuple[Task, KillAction]:
        """Signal a running task's group or cancel a pending task; returns it and the signal sent, or "cancelled"."""
        task = self.get(task_id)
        if task.ended.is_set():
            raise TaskFinished(task_id, task.status.value)
        if self._slots.cancel(task):
            self._ended(task, Status.KILLED, "killed before it started")
            return task, "cancelled"
        return task, task.send_kill(force)

    def _process_exited(self, task: Task, exited: asyncio.Future[int]) -> None:
        """The end's bookkeeping, always finished: a step that fails (a file a task made
        hostile, MemoryError) is logged and skipped, never leaves a slot taken or a name stuck."""
        task.note_exit(exited)
        self._slots.running.discard(task)
        self._watcher.unwatch(task.record)
        self._watcher.keep_cap_after_end(task.record)
        _guarded(self._endings.note_usage, task, "noting what it cost")
        _guarded(self._sessions.collect, task.record, "taking its session's state")
        _guarded(self._endings.note_disk_full, task, "checking the disk")
        self._ended(task)
        self._start_pending()

    def _ended(self, task: Task, status: Status | None = None, reason: str = "") -> None:
        """Wake the waiters, tell the todo state machine, hand the record to retention.

        With `status`, the task ended with no exit to report (cancelled before it started,
        found unfinished at start); otherwise its exit is in the record already.
        """
        record = task.record
        if status is not None:
            record.status, record.end_reason, record.ended_at = status, reason, time.time()
        if task.input is not None:
            task.input.detach()  # a task cancelled before it started still held its backlog
        task.ended.set()
        try:
            # Saved now if its final todo is wanted now; held back for an inline wait, it settles
            # with the wait's outcome, in one write after the reply.
            self._todos.ended(record)
            if self._todos.holds_back(record):
                self._saver.settle(record)
        except Exception:
            logger.exception("task %s: could not hand its end to its todo", record.id)
            self._saver.save(record)
        self._retention.ended(record)  # pruned by the watcher's tick, off the reply's path
        logger.debug("task %s ended: %s", record.id, wording.status_words(record))

    def _todo_changed(self, record: TaskRecord) -> None:
        """The todo state machine changed a record: saved, and retention hears whether its todo is still owed."""
        self._saver.save(record)
        self._retention.todo_changed(record)

    def _forget(self, task: Task) -> None:
        del self._tasks[task.id]
        self._retention.forgotten(task.record)
        self._watcher.forget(task.record)
        self._saver.forget(task.record)
        self._todos.forget(task.record)
        self._store.delete(task.id)

    def prune(self, sessions_too: bool = False) -> None:
        """Drop the finished records retention says are too many or too old, files with them,
        then the shell sessions no retained task belongs to."""
        expired = self._retention.expired(lambda record: self._current(record) is not None)
        for record in expired:
            self._forget(self._tasks[record.id])
        if expired or sessions_too:
            self._sessions.prune(task.record.session for task in self._tasks.values() if task.record.session)

    def _current(self, record: TaskRecord) -> Task | None:
        """The live task of `record`; None once it was forgotten or its name went to a new task."""
        task = self._tasks.get(record.id)
        return task if task is not None and task.record is record else None


def _guarded(step: Callable[[Any], None], subject: Any, doing: str) -> None:
    """Run one step of a task's end or recovery; a failure is logged and the rest goes on."""
    try:
        step(subject)
    except Exception:
        logger.exception("%s: failed %s", getattr(subject, "id", subject), doing)
