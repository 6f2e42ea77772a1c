"""A task's life, read in order: start (what a previous daemon left ends interrupted), submit (an
id, a record, a slot or the queue), start (hive_bash.core.tasks.launch; the record saved with its
pid before anything else happens), exited (the pidfd says so), ended (decide_ending, once; its
session's state taken; its record and todo told), forgotten (retention), stop."""

from __future__ import annotations

import asyncio
import functools
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from hive_bash.core import wording
from hive_bash.core.output import disk_full
from hive_bash.core.processes import (
    CgroupMemory,
    InputBudget,
    ProcReaders,
    diagnose_oom,
    end_leftover_processes,
    interrupted_reason,
)
from hive_bash.core.sessions import SessionStore
from hive_bash.core.storage import TaskFiles, TaskRecord
from hive_bash.core.tasks import launch
from hive_bash.core.tasks.bookkeeping import Bookkeeping
from hive_bash.core.tasks.ending import NO_REPORT, Cause, CgroupReport, Ending, Exit, decide_ending
from hive_bash.core.tasks.slots import Slots
from hive_bash.core.tasks.task import KillAction, Task
from hive_bash.core.tasks.terminations import Terminations
from hive_bash.core.tasks.watcher import Watcher
from hive_bash.errors import NameInUse, SpawnFailed
from hive_bash.model import Status, TaskOptions
from hive_bash.settings import Settings

logger = logging.getLogger(__name__)

ID_BYTES = 6


class Lifecycle:
    """Takes tasks from submit to forgotten: the one part that calls across the others."""

    def __init__(self, settings: Settings, files: TaskFiles, *, sessions: SessionStore, book: Bookkeeping) -> None:
        self._files, self._sessions, self._book = files, sessions, book
        self._tasks: dict[str, Task] = {}
        self._grace_secs = settings.kill_grace_secs
        self._slots = Slots(max_running=settings.max_running, max_pending=settings.max_pending)
        self._input_budget = InputBudget()  # input waiting for all tasks together
        self.readers = ProcReaders()  # the threads /proc is read in: input waits, listening
        self._launcher = launch.Launcher(settings, book.store, sessions)
        ends = self._terminations = Terminations(settings, self._current)
        self._watcher = Watcher(
            files,
            settings.max_output_bytes,
            end=ends.limit_passed,
            on_line=book.todos.line_matched,
            over_cap_after_end=ends.hold_cap_after_end,
        )
        self._background: list[asyncio.Task[None]] = []

    @property
    def tasks(self) -> Mapping[str, Task]:
        """The known tasks by id, live and ended, until they are forgotten."""
        return MappingProxyType(self._tasks)

    @property
    def running_count(self) -> int:
        return len(self._slots.running)

    async def start(self) -> None:
        """Touch the OS (the cgroup tree, the spawner), take over what a previous daemon left, then watch."""
        self._launcher.start()
        self._sessions.load()
        cgroups = self._launcher.cgroups
        if cgroups is not None:
            await cgroups.end_leftovers()  # what a previous daemon's tasks left, setsid'd or not
        for record in sorted(self._book.store.load_all(), key=lambda record: record.ended_at or time.time()):
            self._recover(record)
        self._prune(sessions_too=True)
        self._book.todos.start()
        loop = asyncio.get_running_loop()
        self._background.append(loop.create_task(self._watcher.run(self._prune), name="task-watcher"))
        if cgroups is not None:  # limits a task changed, processes that left its cgroup
            self._background.append(loop.create_task(cgroups.watch(), name="cgroup-watch"))

    def _recover(self, record: TaskRecord) -> None:
        """A record a previous daemon left: what was pending or running is now interrupted."""
        task = self._tasks[record.id] = Task(record)
        self._book.recovered(record)
        if record.status.is_terminal:
            return
        _guarded(end_leftover_processes, record, "ending what it left running")
        if record.pid is not None:  # a shell that ended while no daemon watched left its state
            _guarded(self._sessions.collect, record, "taking its session's state")
        self._end(task, Cause(Status.INTERRUPTED, interrupted_reason(record)))

    def submit(self, options: TaskOptions) -> Task:
        limits = self._launcher.limits(options)
        self._slots.check_room()  # before the name is claimed: a refused start keeps the old task of that name
        task_id = self._claim_id(options.name)
        record = launch.new_record(task_id, options)
        task = Task(record, options=options, input_budget=self._input_budget, limits=limits)
        self._book.todos.track(record)
        try:
            if self._slots.free():
                self._start(task)
            else:
                self._book.save_or_refuse(record)  # a task no restart could find must not start later either
                self._slots.pending.append(task)
        except SpawnFailed:
            self._book.todos.forget(record)  # its start was refused: nothing of it is kept
            raise
        self._tasks[task_id] = task
        return task

    def _claim_id(self, name: str | None) -> str:
        """Its name, once that name's old task has ended (the new task takes its record and files), or a random id."""
        if name is None:
            while (task_id := secrets.token_hex(ID_BYTES)) in self._tasks:
                pass
            return task_id
        previous = self._tasks.get(name)
        if previous is not None:
            if not previous.ended.is_set():
                raise NameInUse(name, previous.status.value)
            self._forget(previous)
        return name

    def _start(self, task: Task) -> None:
        """Spawn it, save its record with its pid (before anything else happens), watch it."""
        record = task.record
        proc = self._launcher.launch(task, functools.partial(self._terminations.output_failed, task))
        try:
            self._book.started(record)
        except SpawnFailed:
            launch.abandon(task)
            raise
        self._launcher.keep_reserve(record)
        launch.watch_input(task, self._files, self._book.todos.waiting_for_input_changed, self.readers)
        self._slots.running.add(task)
        self._watcher.watch(record, task.options.notify_on)
        # A callback, not a task awaiting the future: the end is handled in the same loop turn.
        proc.wait_status.add_done_callback(functools.partial(self._process_exited, task))
        logger.debug("task %s started: pid %d", task.id, proc.pid)

    def kill(self, task: Task, force: bool) -> KillAction:
        """Signal a running task's group, or cancel a pending one: the signal sent, or "cancelled"."""
        if not self._slots.cancel(task):
            return task.send_kill(force)
        self._end(task, Cause(Status.KILLED, "killed before it started"))
        return "cancelled"

    def _process_exited(self, task: Task, wait_status: asyncio.Future[int]) -> None:
        """The end's bookkeeping, always finished: a step that fails (a file a task made hostile,
        MemoryError) is logged and skipped, never leaves a slot taken or a name stuck."""
        try:
            task.release()
            exit: Exit | None = Exit.of(wait_status.result())
        except Exception:
            logger.exception("task %s: could not read how it ended", task.id)
            exit = None
        self._slots.running.discard(task)
        self._watcher.unwatch(task.record)
        self._watcher.keep_cap_after_end(task.record)
        report = _cgroup_report(task, exit, self._launcher.oom_counter)
        full_dir = self._files.dir if task.cause is None and disk_full(self._files.dir) else None
        self._end(task, decide_ending(exit, task.cause, report, full_dir), collect=True)
        while (pending := self._slots.next_pending()) is not None:
            try:
                self._start(pending)
            except SpawnFailed as exc:
                self._end(pending, Cause(Status.FAILED, str(exc)))

    def _end(self, task: Task, ending: Cause | Ending, collect: bool = False) -> None:
        """Its end into the record (a `Cause` alone: no exit to report), the waiters woken; its
        session's state taken (`collect`: its shell ran); its record and todo told."""
        record = task.record
        task.end(decide_ending(None, ending) if isinstance(ending, Cause) else ending, time.time())
        if collect:
            _guarded(self._sessions.collect, record, "taking its session's state")
        self._book.ended(record)
        logger.debug("task %s ended: %s", task.id, wording.ending_words(record.status, record.exit_code, record.signal))

    def _forget(self, task: Task) -> None:
        del self._tasks[task.id]
        self._watcher.forget(task.record)
        self._book.forget(task.record)

    def _prune(self, sessions_too: bool = False) -> None:
        """Drop what retention says is too many or too old, then the sessions no retained task belongs to."""
        expired = self._book.retention.expired(lambda record: self._current(record) is not None)
        for record in expired:
            self._forget(self._tasks[record.id])
        if expired or sessions_too:
            self._sessions.prune(task.record.session for task in self._tasks.values() if task.record.session)

    def _current(self, record: TaskRecord) -> Task | None:
        """The live task of `record`; None once it was forgotten or its name went to a new task."""
        task = self._tasks.get(record.id)
        return task if task is not None and task.record is record else None

    async def stop(self) -> None:
        """End every task: pending ones cancelled, running ones terminated group by group."""
        for background in self._background:
            background.cancel()
        for task in self._slots.close():
            self._end(task, Cause(Status.INTERRUPTED, "interrupted: the daemon stopped before it started"))
        stopped = "interrupted: the daemon stopped"
        running = list(self._slots.running)
        await asyncio.gather(*(task.terminate(Status.INTERRUPTED, stopped, self._grace_secs) for task in running))
        self.readers.close()


def _guarded(step: Callable[[Any], None], subject: Any, doing: str) -> None:
    """One step of a task's end or recovery; a failure is logged and the rest goes on."""
    try:
        step(subject)
    except Exception:
        logger.exception("%s: failed %s", getattr(subject, "id", subject), doing)


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
