"""A task's life, in order: submit -> start -> exited -> ended -> forgotten.

This is the one part that calls across the engine's parts. A task submitted gets an id
and a record, waits for a slot if all are taken (hive_bash.core.tasks.slots), is started
(hive_bash.core.tasks.launch: its disk reserve, its shell session's `prepare`, its cgroup, the
spawn), its record saved with its pid, and watched (hive_bash.core.tasks.watcher: deadline,
idle deadline, output cap). `kill`, the watcher (hive_bash.core.tasks.endings) or shutdown may
choose its end (a `Cause` on the task); once its process is reaped, its end is decided
once (hive_bash.core.tasks.ending.decide_ending) and written into the record in `_end`, its
session's state taken, its completion todo told (hive_bash.core.todos.state) and retention
(hive_bash.core.tasks.retention) told when to drop it. Every write of a record goes through
this module's saver (hive_bash.core.storage.saver): at once, or settled with the reply
that reports it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import time
from collections.abc import Callable
from typing import Any

from hive_bash.core import wording
from hive_bash.core.output import disk_full
from hive_bash.core.processes import (
    CgroupMemory,
    CgroupTree,
    InputBudget,
    ProcReaders,
    base_environment,
    diagnose_oom,
    end_leftover_processes,
    interrupted_reason,
)
from hive_bash.core.sessions import SessionStore
from hive_bash.core.storage import RecordSaver, RecordStore, TaskFiles, TaskRecord, max_record_bytes
from hive_bash.core.tasks import launch
from hive_bash.core.tasks.ending import NO_REPORT, Cause, CgroupReport, Ending, Exit, decide_ending
from hive_bash.core.tasks.endings import Endings
from hive_bash.core.tasks.retention import Retention
from hive_bash.core.tasks.slots import Slots
from hive_bash.core.tasks.task import KillAction, Task
from hive_bash.core.tasks.watcher import Watcher
from hive_bash.core.todos import TodoStateMachine
from hive_bash.errors import NameInUse, RecordNotSaved, SpawnFailed
from hive_bash.model import Status, TaskOptions
from hive_bash.settings import Settings

logger = logging.getLogger(__name__)

ID_BYTES = 6


class Lifecycle:
    """Takes tasks from submit to forgotten; holds the registry and the parts a task passes through."""

    def __init__(self, settings: Settings, files: TaskFiles) -> None:
        self.files = files
        self.tasks: dict[str, Task] = {}
        self._store = RecordStore(files, max_record_bytes(settings.max_cmd_bytes))
        self._saver = RecordSaver(self._store)
        self.todos = TodoStateMachine(settings.agent_socket, files, self._todo_changed)
        self.slots = Slots(settings.max_running, settings.max_pending)
        self._retention = Retention(settings.retain_count, settings.retain_secs)
        self._input_budget = InputBudget()  # input waiting for all tasks together
        self.readers = ProcReaders()  # the threads /proc is read in: input waits, listening
        base_env = base_environment(os.environ, settings.hidden_env_names)
        self.sessions = SessionStore(files, base_env, settings.hidden_env_names)
        self.launcher = launch.Launcher(settings, self._store, self.sessions)
        self._grace_secs = settings.kill_grace_secs
        self._endings = Endings(settings, self.current)
        self.watcher = Watcher(
            files,
            settings.max_output_bytes,
            self._endings.for_watcher,
            self.todos.line_matched,
            self._endings.hold_cap_after_end,
        )

    @property
    def cgroups(self) -> CgroupTree | None:
        """The daemon's cgroup tree, where it has one (found by `launcher.start()`)."""
        return self.launcher.cgroups

    async def recover(self) -> None:
        """Load the records a previous daemon left: what was pending or running is now interrupted."""
        self.sessions.load()
        if self.launcher.cgroups is not None:
            await self.launcher.cgroups.end_leftovers()  # what a previous daemon's tasks left, setsid'd or not
        for record in sorted(self._store.load_all(), key=lambda record: record.ended_at or time.time()):
            task = self.tasks[record.id] = Task(record)
            self.todos.track(record)
            if record.status.is_terminal:
                self._retention.task_ended(record)
            else:
                _guarded(end_leftover_processes, record, "ending what it left running")
                if record.pid is not None:
                    # a shell that ended while no daemon watched left its state
                    _guarded(self.sessions.collect, record, "taking its session's state")
                self._end(task, Cause(Status.INTERRUPTED, interrupted_reason(record)))

    def submit(self, options: TaskOptions) -> Task:
        limits = self.launcher.limits(options)
        # Before the name is claimed: a start refused for want of room keeps the old task of that name.
        self.slots.check_room()
        task_id = self._claim_id(options.name)
        record = launch.new_record(task_id, options)
        task = Task(record, dict(options.env), options.cwd, options.notify_on, self._input_budget, limits)
        self.todos.track(record)
        try:
            if self.slots.free():
                self._start(task)
            else:
                # A task no restart could find must not start later either.
                _save_or_refuse(self._saver, self._store, record)
                self.slots.pending.append(task)
        except SpawnFailed:
            self.todos.forget(record)
            raise
        self.tasks[task_id] = task
        return task

    def _claim_id(self, name: str | None) -> str:
        if name is None:
            while (task_id := secrets.token_hex(ID_BYTES)) in self.tasks:
                pass
            return task_id
        previous = self.tasks.get(name)
        if previous is not None:
            if not previous.ended.is_set():
                raise NameInUse(name, previous.status.value)
            # The name is free again: the new task replaces the old record and files.
            self._forget(previous)
        return name

    def _start(self, task: Task) -> None:
        """Spawn it, save its record with its pid (before anything else happens), watch it."""
        record = task.record
        proc = self.launcher.launch(task, functools.partial(self._output_failed, task))
        with self._saver.settling():
            self.todos.started(record)  # wants its running todo; the record is written just below
        try:
            # Its pid is on disk before anything else happens: the reserve takes it if the
            # command filled the disk already (`yes` on a small disk does, within microseconds).
            _save_or_refuse(self._saver, self._store, record)
        except SpawnFailed:
            launch.abandon(task)
            raise
        self.launcher.keep_reserve(record)
        launch.watch_input(task, self.files, self.todos.waits_for_input, self.readers)
        self.slots.running.add(task)
        self.watcher.watch(record, task.notify_on)
        # A callback, not a task awaiting the future: the end is handled in the same loop turn.
        proc.wait_status.add_done_callback(functools.partial(self._process_exited, task))
        logger.debug("task %s started: pid %d", task.id, proc.pid)

    def _start_pending(self) -> None:
        while (task := self.slots.next_pending()) is not None:
            try:
                self._start(task)
            except SpawnFailed as exc:
                self._end(task, Cause(Status.FAILED, str(exc)))

    def kill(self, task: Task, force: bool) -> KillAction:
        """Signal a running task's group or cancel a pending task; returns the signal sent, or "cancelled"."""
        if self.slots.cancel(task):
            self._end(task, Cause(Status.KILLED, "killed before it started"))
            return "cancelled"
        return task.send_kill(force)

    def _output_failed(self, task: Task, reason: str) -> None:
        task.output_failed(reason)
        self._endings.terminate(task, Status.FAILED, reason)

    async def shutdown(self) -> None:
        """Cancel what is pending, terminate what runs, group by group."""
        for task in self.slots.close():
            self._end(task, Cause(Status.INTERRUPTED, "interrupted: the daemon stopped before it started"))
        stopped = "interrupted: the daemon stopped"
        await asyncio.gather(
            *(task.terminate(Status.INTERRUPTED, stopped, self._grace_secs) for task in list(self.slots.running))
        )

    def _process_exited(self, task: Task, wait_status: asyncio.Future[int]) -> None:
        """The end's bookkeeping, always finished: a step that fails (a file a task made
        hostile, MemoryError) is logged and skipped, never leaves a slot taken or a name stuck."""
        try:
            task.release()
            exit: Exit | None = Exit.of(wait_status.result())
        except Exception:
            logger.exception("task %s: could not read how it ended", task.id)
            exit = None
        self.slots.running.discard(task)
        self.watcher.unwatch(task.record)
        self.watcher.keep_cap_after_end(task.record)
        report = _cgroup_report(task, exit, self.launcher.oom_counter)
        full_dir = self.files.dir if task.cause is None and disk_full(self.files.dir) else None
        self._end(task, decide_ending(exit, task.cause, report, full_dir), collect=True)
        self._start_pending()

    def _end(self, task: Task, ending: Cause | Ending, collect: bool = False) -> None:
        """Write its end into the record (a `Cause` alone: no exit to report), wake the waiters, take
        its session's state (`collect`: its shell ran), tell its todo and retention."""
        record = task.record
        task.end(decide_ending(None, ending) if isinstance(ending, Cause) else ending, time.time())
        if collect:
            _guarded(self.sessions.collect, record, "taking its session's state")
        try:
            # Saved now if its final todo is wanted now; held back for an inline wait, it settles
            # with the wait's outcome, in one write after the reply.
            self.todos.task_ended(record)
            if self.todos.holds_back(record):
                self._saver.settle(record)
        except Exception:
            logger.exception("task %s: could not hand its end to its todo", record.id)
            self._saver.save(record)
        self._retention.task_ended(record)  # pruned by the watcher's tick, off the reply's path
        logger.debug(
            "task %s ended: %s", record.id, wording.ending_words(record.status, record.exit_code, record.signal)
        )

    def wait_over(self, task: Task, result_seen: bool) -> None:
        """A reply's wait for the end is over: the end it reports is written after the reply."""
        with self._saver.settling():
            self.todos.wait_over(task.record, result_seen)

    def write_settled(self) -> None:
        """Write the records whose changes a reply reported (hive_bash.core.storage.saver)."""
        self._saver.write_settled()

    def _todo_changed(self, record: TaskRecord) -> None:
        """The todo state machine changed a record: saved, and retention hears whether its todo is still owed."""
        self._saver.save(record)
        self._retention.todo_changed(record)

    def _forget(self, task: Task) -> None:
        del self.tasks[task.id]
        self._retention.forgotten(task.record)
        self.watcher.forget(task.record)
        self._saver.forget(task.record)
        self.todos.forget(task.record)
        self._store.delete(task.id)

    def prune(self, sessions_too: bool = False) -> None:
        """Drop the finished records retention says are too many or too old, files with them,
        then the shell sessions no retained task belongs to."""
        expired = self._retention.expired(lambda record: self.current(record) is not None)
        for record in expired:
            self._forget(self.tasks[record.id])
        if expired or sessions_too:
            self.sessions.prune(task.record.session for task in self.tasks.values() if task.record.session)

    def current(self, record: TaskRecord) -> Task | None:
        """The live task of `record`; None once it was forgotten or its name went to a new task."""
        task = self.tasks.get(record.id)
        return task if task is not None and task.record is record else None


def _guarded(step: Callable[[Any], None], subject: Any, doing: str) -> None:
    """Run one step of a task's end or recovery; a failure is logged and the rest goes on."""
    try:
        step(subject)
    except Exception:
        logger.exception("%s: failed %s", getattr(subject, "id", subject), doing)


def _save_or_refuse(saver: RecordSaver, store: RecordStore, record: TaskRecord) -> None:
    """Save a starting task's record, or refuse the start (nothing runs unrecorded)."""
    try:
        saver.write_now(record)
    except RecordNotSaved as exc:
        raise launch.record_not_saved(store, record, exc) from exc


def _cgroup_report(task: Task, exit: Exit | None, oom_counter: CgroupMemory | None) -> CgroupReport:
    """What its process and cgroup counted (into the record), and what they say of its end;
    a failure to read them (a file the task made hostile) is logged, and nothing is said."""
    proc, record = task.process, task.record
    if proc is None:
        return NO_REPORT
    try:
        if proc.usage is not None:
            record.cpu_secs, record.max_rss_bytes = proc.usage.cpu_secs, proc.usage.max_rss_bytes
        sigkilled = task.cause is None and exit is not None and exit.sigkilled
        diagnosis = diagnose_oom(oom_counter, task.oom_kills_at_start) if sigkilled else None
    except Exception:
        logger.exception("%s: failed noting what it cost", task.id)
        return NO_REPORT
    return CgroupReport(proc.limit_reason, diagnosis)
