"""The task registry and lifecycle: submit -> start -> end, pending -> running -> one terminal status.

Follow a task from `submit`: it gets a record, waits for a slot if all are taken,
is spawned (hive_bash.core.process) and watched (hive_bash.core.watcher: deadline, idle
deadline, output cap); `kill`, the watcher or shutdown may end it; on exit its
record is finalised in `_ended`, which tells hive_bash.core.todo_state (its completion
todo) and hive_bash.core.retention (when to drop it). The manager saves the record
whenever the todo state machine says it changed; an end a reply reports is saved
right after that reply (RecordSaver).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import secrets
import signal
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

from hive_bash.core import cgroups, escapees, oom, output, process, recovery, summaries
from hive_bash.core.sessions import SessionState, SessionStore
from hive_bash.core.input_wait import InputEnd, InputWait
from hive_bash.errors import InvalidArgument, NameInUse, SpawnFailed, TaskFinished, TaskNotFound
from hive_bash.core.record_saver import RecordSaver
from hive_bash.core.records import RecordNotSaved, RecordStore, TaskRecord, max_record_bytes
from hive_bash.model import Status, Stream, TaskOptions
from hive_bash.core.retention import Retention
from hive_bash.settings import Settings, memory_bytes
from hive_bash.core.slots import Slots
from hive_bash.core.store import TaskFiles
from hive_bash.core.task import KillAction, Task
from hive_bash.core.task_input import InputBudget
from hive_bash.core.todo_state import TodoStateMachine
from hive_bash.core.watcher import Watcher

logger = logging.getLogger(__name__)

SHUTDOWN_TODO_FLUSH_SECS = 3.0
ID_BYTES = 6


class TaskManager:
    """The registry of tasks and their lifecycle; the watcher, retention and todo state machine report to it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.tasks_dir = settings.tasks_dir.resolve()
        self.files = TaskFiles(self.tasks_dir)
        self._store = RecordStore(self.files, max_record_bytes(settings.max_cmd_bytes))
        self._saver = RecordSaver(self._store)
        self._todos = TodoStateMachine(settings.agent_socket, self.files, self._saver.save)
        self._watcher = Watcher(
            self.files,
            settings.max_output_bytes,
            self._end_for_watcher,
            self._todos.line_matched,
            self._hold_cap_after_end,
        )
        self._retention = Retention(settings.retain_count, settings.retain_secs)
        self._tasks: dict[str, Task] = {}
        self._slots = Slots(settings.max_running, settings.max_pending)
        self._input_budget = InputBudget()  # input waiting for all tasks together
        self._base_env = process.base_environment(os.environ, settings.hidden_env_names)
        # The tree first: it moves the daemon into a leaf, and the OOM counter of its root counts the tasks'.
        self._cgroups = cgroups.locate(settings.cgroup_root)
        self._cgroup = oom.locate(settings.cgroup_dir or _counting_root(self._cgroups))
        self._default_limits = _default_limits(settings, self._cgroups)
        self._sessions = SessionStore(self.files, self._base_env, settings.hidden_env_names)
        self._background: set[asyncio.Task[None]] = set()
        self._watching: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the records a previous daemon left (what was pending or running is now interrupted), then serve."""
        self._sessions.load()
        if self._cgroups is not None:
            await self._cgroups.end_leftovers()  # what a previous daemon's tasks left, setsid'd or not
        for record in sorted(self._store.load_all(), key=lambda record: record.ended_at or time.time()):
            task = self._tasks[record.id] = Task(record)
            self._todos.track(record)
            if record.status.is_terminal:
                self._retention.ended(record)
            else:
                _guarded(recovery.end_leftover_processes, record, "ending what it left running")
                if record.pid is not None:
                    # a shell that ended while no daemon watched left its state
                    _guarded(self._collect_session, task, "taking its session's state")
                self._ended(task, Status.INTERRUPTED, recovery.interrupted_reason(record))
        self.prune(sessions_too=True)
        self._todos.start()
        self._watching = asyncio.get_running_loop().create_task(self._watcher.run(self.prune), name="task-watcher")

    async def shutdown(self) -> None:
        """End every task (pending cancelled, running terminated group by group), then flush todos."""
        if self._watching is not None:
            self._watching.cancel()
        for task in self._slots.close():
            self._ended(task, Status.INTERRUPTED, "interrupted: the daemon stopped before it started")
        stopped = "interrupted: the daemon stopped"
        grace = self.settings.kill_grace_secs
        await asyncio.gather(
            *(task.terminate(Status.INTERRUPTED, stopped, grace) for task in list(self._slots.running))
        )
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
            if seconds > 0 and not task.ended.is_set():
                await _wait_any((task.ended, abandon, until), seconds)
            result_seen = task.ended.is_set() and not (abandon is not None and abandon.is_set())
        finally:
            with self._saver.settling():  # the reply reports the end: the record is written after it
                self._todos.wait_over(task.record, result_seen)
        return task.ended.is_set()

    def shown(self, task: Task) -> None:
        """A reply showed the task to the agent (what it printed so far): its notify_on notice is seen."""
        self._todos.task_shown(task.record)

    def submit(self, options: TaskOptions) -> Task:
        limits = self._limits(options)
        task_id = self._claim_id(options.name)
        self._slots.check_room()
        record = _new_record(task_id, options)
        task = Task(record, dict(options.env), options.cwd, options.notify_on, self._input_budget)
        task.limits = limits
        self._todos.track(record)
        try:
            if self._slots.free():
                self._start(task)
            else:
                # A task no restart could find must not start later either.
                self._save_or_refuse(record)
                self._slots.pending.append(task)
        except SpawnFailed:
            self._todos.forget(record)
            raise
        self._tasks[task_id] = task
        return task

    def _limits(self, options: TaskOptions) -> cgroups.Limits:
        """The task's own limits: its arguments over the daemon's defaults; refused where nothing enforces them."""
        for argument, value, controller in (
            ("memory_max", options.memory_max, "memory"),
            ("pids_max", options.pids_max, "pids"),
        ):
            if value is None:
                continue
            if self._cgroups is None:
                raise InvalidArgument(argument, "needs a cgroup per task; this daemon has no delegated cgroup v2 tree")
            if controller not in self._cgroups.controllers:
                raise InvalidArgument(
                    argument, f"needs the {controller} controller; this daemon's cgroup tree has none"
                )
        defaults = self._default_limits
        return cgroups.Limits(
            options.memory_max if options.memory_max is not None else defaults.memory_max,
            options.pids_max if options.pids_max is not None else defaults.pids_max,
        )

    def _save_or_refuse(self, record: TaskRecord) -> None:
        """Save a starting task's record, or refuse the start."""
        try:
            self._saver.write_now(record)
        except RecordNotSaved as exc:
            self._store.delete(record.id)
            raise SpawnFailed(f"its record could not be saved in {self.tasks_dir}: {exc.strerror}") from exc

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
        env = self._task_env(task)
        # Taken before the spawn: the command may be running before spawn() returns, and a
        # start time taken after it would make a loaded daemon report `sleep 1` as 0.98 s.
        task.oom_kills_at_start = self._cgroup.oom_kills() if self._cgroup is not None else None
        try:
            # Room for its end on disk, before anything runs: a full disk refuses the start.
            self._store.reserve(record)
        except RecordNotSaved as exc:
            self._store.delete(record.id)
            raise SpawnFailed(f"its record could not be saved in {self.tasks_dir}: {exc.strerror}") from exc
        started_at = time.time()
        proc = _spawn(
            task,
            self._store,
            env,
            self._sessions,
            lambda reason: self._end_for_output_failure(task, reason),
            self._cgroups,
        )
        task.started(proc, started_at)
        with self._saver.settling():
            self._todos.started(record)  # wants its running todo; the record is written just below
        try:
            # Its pid is on disk before anything else happens: the reserve takes it if the
            # command filled the disk already (`yes` on a small disk does, within microseconds).
            self._save_or_refuse(record)
        except SpawnFailed:
            _abandon(task)
            raise
        if not self._store.has_reserve(record.id):
            try:
                self._store.reserve(record)
            except RecordNotSaved as exc:
                logger.warning(
                    "task %s: no room kept for its end (%s): it is saved when the disk has room", record.id, exc
                )
        self._watch_input(task)
        self._slots.running.add(task)
        self._watcher.watch(record, task.notify_on)
        # A callback, not a task awaiting the future: the end is handled in the same loop turn.
        proc.exited.add_done_callback(functools.partial(self._process_exited, task))
        logger.debug("task %s started: pid %d", record.id, proc.pid)

    def _start_pending(self) -> None:
        while (task := self._slots.next_pending()) is not None:
            try:
                self._start(task)
            except SpawnFailed as exc:
                self._ended(task, Status.FAILED, str(exc))

    def _task_env(self, task: Task) -> dict[str, str]:
        """The environment a task starts with; a session's task also learns its directory from it."""
        record = task.record
        base = self._base_env
        if record.session is not None:
            launch = self._sessions.launch(record.session, task.cwd, os.getcwd())
            before = self._sessions.get(record.session)
            task.session_env_before = dict(before.set) if before is not None else {}
            base, record.cwd, record.session_note = launch.env, launch.cwd, launch.note
        return process.task_environment(base, task.env, record.id, record.pty)

    def _collect_session(self, task: Task) -> None:
        """A session's task ended: what its shell left becomes the session's state (the later end wins)."""
        record = task.record
        if record.session is not None:
            note = self._sessions.collect(record.session, record.id, time.time(), record.signal)
            record.session_note = "; ".join(filter(None, (record.session_note, note))) or None

    def _in_background(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        """Run a coroutine as a task we hold a reference to (the loop itself keeps only weak ones)."""
        background = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(background)
        background.add_done_callback(self._background.discard)

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

    def _end_for_watcher(self, record: TaskRecord, cause: Status, reason: str, truncate: Path | None) -> None:
        """The watcher found a limit passed: end the task, then cut an over-long file back to the cap."""
        task = self._tasks.get(record.id)
        if task is None or task.record is not record:
            return

        async def end() -> None:
            await task.terminate(cause, reason, self.settings.kill_grace_secs)
            if truncate is not None:
                output.truncate_to(truncate, self.settings.max_output_bytes)

        self._in_background(end(), f"end-{task.id}")

    def _hold_cap_after_end(self, record: TaskRecord, stream: str, path: Path) -> None:
        """An ended task's output grew past the cap: what still writes it escaped the group
        kill (`setsid`). It is ended and the file cut back, so the cap holds."""
        cap = self.settings.max_output_bytes
        try:
            writers = escapees.end_writers(path)
            output.truncate_to(path, cap)
        except OSError as exc:
            logger.error("task %s: could not hold its %s to the output cap: %s", record.id, stream, exc)
            return
        if writers:
            logger.warning(
                "task %s had ended, but processes it left (%s) wrote its %s past the output cap of %d bytes:"
                " ended them and cut the file back to the cap",
                record.id,
                ", ".join(map(str, writers)),
                stream,
                cap,
            )
        else:
            logger.info("task %s: its %s grew past the output cap after it ended: cut back", record.id, stream)

    def _end_for_output_failure(self, task: Task, reason: str) -> None:
        """The daemon could not write a PTY task's output (disk full, I/O error): end it failed.

        The cause is set at once: the failure may come while the process layer handles the
        leader's exit, before the exit is read, and must not be read as a plain exit then.
        """
        if task.end_cause is None:
            task.end_cause, task.end_reason = Status.FAILED, reason
        self._in_background(task.terminate(Status.FAILED, reason, self.settings.kill_grace_secs), f"output-{task.id}")

    def _watch_input(self, task: Task) -> None:
        """A task with input (pipe or pty) is sampled for a blocked read of it (hive_bash.core.input_wait)."""
        proc, record = task.process, task.record
        if task.input is None or proc is None or proc.input_fd is None:
            return
        fd = proc.input_fd
        try:
            end = InputEnd.of_pty(fd, proc.pid) if proc.is_pty else InputEnd.of_pipe(fd, proc.pid, proc.pgid)
        except OSError as exc:  # nothing to sample: the task runs on, never said to wait
            logger.warning("task %s: cannot watch its input: %s", record.id, exc)
            return
        out, err = self.files.out(record.id), self.files.err(record.id)

        def activity() -> tuple[int, int, int]:
            return task.input_writes, output.file_size(out), output.file_size(err)

        def changed(waiting: bool) -> None:
            self._todos.waits_for_input(record, output.last_printed_line(out, err) if waiting else None, waiting)

        task.input_wait = InputWait(end, activity, changed)
        task.input_wait.start()

    def _process_exited(self, task: Task, exited: asyncio.Future[int]) -> None:
        """The end's bookkeeping, always finished: a step that fails (a file a task made
        hostile, MemoryError) is logged and skipped, never leaves a slot taken or a name stuck."""
        try:
            task.exited(exited.result())
        except Exception:
            logger.exception("task %s: could not read how it ended", task.id)
            if not task.record.status.is_terminal:
                task.record.status, task.record.ended_at = task.end_cause or Status.FAILED, time.time()
                task.record.end_reason = task.end_reason or "the daemon could not read how it ended"
        self._slots.running.discard(task)
        self._watcher.unwatch(task.record)
        self._watcher.keep_cap_after_end(task.record)
        _guarded(self._note_usage, task, "noting what it cost")
        _guarded(self._collect_session, task, "taking its session's state")
        _guarded(self._note_disk_full, task, "checking the disk")
        self._ended(task)
        self._start_pending()

    def _note_disk_full(self, task: Task) -> None:
        if task.end_cause is None and output.disk_full(self.tasks_dir):
            # Its writes failed with ENOSPC: what it printed is not all in the files.
            task.record.status = Status.FAILED
            task.record.end_reason = f"disk full: output could not be written completely to {self.tasks_dir}"

    def _note_usage(self, task: Task) -> None:
        """What the task cost, and whether the OOM killer (not `kill`, not a deadline) most likely ended it."""
        record = task.record
        usage = task.process.usage if task.process is not None else None
        if usage is not None:
            record.cpu_secs, record.max_rss_bytes = usage.cpu_secs, usage.max_rss_bytes
        limit_reason = task.process.limit_reason if task.process is not None else None
        if task.end_cause is None and limit_reason is not None and record.exit_code != 0:
            record.status, record.end_reason = Status.FAILED, limit_reason
        elif task.end_cause is None and oom.sigkilled(record.signal, record.exit_code):
            record.diagnosis = oom.diagnose(self._cgroup, task.oom_kills_at_start)

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
        logger.debug("task %s ended: %s", record.id, summaries.status_words(record))

    def _forget(self, task: Task) -> None:
        del self._tasks[task.id]
        self._watcher.forget(task.record)
        self._saver.forget(task.record)
        self._todos.forget(task.record)
        self._store.delete(task.id)

    def prune(self, sessions_too: bool = False) -> None:
        """Drop the finished records retention says are too many or too old, files with them,
        then the shell sessions no retained task belongs to."""
        expired = self._retention.expired(self._is_current)
        for record in expired:
            self._forget(self._tasks[record.id])
        if expired or sessions_too:
            self._sessions.prune(task.record.session for task in self._tasks.values() if task.record.session)

    def _is_current(self, record: TaskRecord) -> bool:
        task = self._tasks.get(record.id)
        return task is not None and task.record is record


def _counting_root(tree: cgroups.CgroupTree | None) -> Path | None:
    """The tree's root, whose memory.events counts the OOM kills of every task cgroup below it."""
    return tree.root if tree is not None and oom.at(tree.root) is not None else None


def _default_limits(settings: Settings, tree: cgroups.CgroupTree | None) -> cgroups.Limits:
    """HIVE_BASH_TASK_MEMORY_MAX / _PIDS_MAX, as far as the tree can enforce them (the rest is logged, once)."""
    memory = memory_bytes(settings.task_memory_max) if settings.task_memory_max is not None else None
    pids = settings.task_pids_max
    controllers = tree.controllers if tree is not None else frozenset()
    for name, value, controller in (("task_memory_max", memory, "memory"), ("task_pids_max", pids, "pids")):
        if value is not None and controller not in controllers:
            logger.warning("%s is not enforced: no cgroup tree with the %s controller", name, controller)
    return cgroups.Limits(memory if "memory" in controllers else None, pids if "pids" in controllers else None)


def _new_record(task_id: str, options: TaskOptions) -> TaskRecord:
    return TaskRecord(
        id=task_id,
        cmd=options.cmd,
        created_at=time.time(),
        timeout_secs=options.timeout_secs,
        idle_timeout_secs=options.idle_timeout_secs,
        cwd=options.cwd or os.getcwd(),
        pty=options.pty,
        stdin=options.stdin,
        session=options.session,
    )


def _spawn(
    task: Task,
    store: RecordStore,
    env: dict[str, str],
    sessions: SessionStore,
    on_output_failed: process.OutputFailed,
    tree: cgroups.CgroupTree | None = None,
) -> process.TaskProcess:
    record = task.record
    try:
        cgroup = tree.create(record.id, task.limits) if tree is not None else None
    except OSError as exc:
        logger.warning("task %s could not get a cgroup: %s", record.id, exc)
        raise SpawnFailed(f"its cgroup could not be created: {exc.strerror or exc} (errno {exc.errno})") from exc
    request = process.SpawnRequest(
        cmd=record.cmd,
        cwd=record.cwd,
        env=env,
        stdout_path=store.files.out(record.id),
        stderr_path=store.files.err(record.id),
        script_path=store.files.script(record.id),
        stdin=record.stdin,
        pty=record.pty,
        on_output_failed=on_output_failed,
        cgroup=cgroup,
    )
    try:
        if record.session is not None:
            sessions.wrap(record.id, env)
        return process.spawn(request)
    except OSError as exc:
        logger.warning("task %s could not start: %s", record.id, exc)
        store.delete(record.id)  # output files the failed spawn may have created
        if cgroup is not None:
            cgroup.kill()
            cgroup.remove()
        raise SpawnFailed(f"{exc.strerror or exc} (errno {exc.errno})") from exc


def _abandon(task: Task) -> None:
    """End the process of a task refused after its spawn: the loop reaps it, its fds are closed, nothing records it."""
    assert task.process is not None
    task.process.exited.add_done_callback(lambda exited: task.exited(exited.result()))
    task.process.signal(signal.SIGKILL)


def _guarded(step: Callable[[Any], None], subject: Any, doing: str) -> None:
    """Run one step of a task's end or recovery; a failure is logged and the rest goes on."""
    try:
        step(subject)
    except Exception:
        logger.exception("%s: failed %s", getattr(subject, "id", subject), doing)


async def _wait_any(events: tuple[asyncio.Event | None, ...], seconds: float) -> None:
    waiters = [asyncio.ensure_future(event.wait()) for event in events if event is not None]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
