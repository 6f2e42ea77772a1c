"""Starting a task: the OS set up once at the daemon's start (`Launcher.start`: its cgroup tree, the
spawner), then per task room on disk for its end, its environment and session wrapper, its cgroup
with its limits and the spawn; a start refused after the spawn ends the process it made (`abandon`)."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Callable

from hive_bash.core.output import file_size, last_printed_line
from hive_bash.core.processes import (
    CgroupMemory,
    CgroupTree,
    InputEnd,
    InputWait,
    Limits,
    ProcReaders,
    Spawner,
    SpawnRequest,
    TaskProcess,
    TerminalWriteFailed,
    choose_spawner,
    locate_cgroups,
    locate_oom_counter,
    oom_counter_at,
    spawn,
)
from hive_bash.core.sessions import SessionStore
from hive_bash.core.storage import RecordStore, TaskFiles, TaskRecord
from hive_bash.core.tasks.task import Task
from hive_bash.errors import InvalidArgument, RecordNotSaved, SpawnFailed
from hive_bash.model import TaskOptions
from hive_bash.settings import Settings, memory_bytes

logger = logging.getLogger(__name__)

# A task began (or stopped) waiting for input: (record, the last line it printed or None, waiting).
InputChanged = Callable[[TaskRecord, "str | None", bool], None]


class Launcher:
    """Starts tasks: the cgroup tree they run in, the limits it enforces, their files, sessions and records."""

    def __init__(self, settings: Settings, store: RecordStore, sessions: SessionStore) -> None:
        self._settings = settings
        self._store = store
        self._sessions = sessions
        self.cgroups: CgroupTree | None = None
        self.spawner: Spawner | None = None
        self.oom_counter: CgroupMemory | None = None
        self._default_limits = Limits()

    def start(self) -> None:
        """At the daemon's start, the one place that touches the OS: the cgroup tree first (the daemon
        moves into its leaf; its root's OOM counter counts the tasks'), then the spawner (probed once)."""
        settings = self._settings
        self.cgroups = tree = locate_cgroups(settings.cgroup_root)
        self.spawner = choose_spawner(tree)
        counting_root = tree.root if tree is not None and oom_counter_at(tree.root) is not None else None
        self.oom_counter = locate_oom_counter(settings.cgroup_dir or counting_root)
        self._default_limits = _default_limits(settings, tree)

    def limits(self, options: TaskOptions) -> Limits:
        """The task's own limits: its arguments over the daemon's defaults; refused where nothing enforces them."""
        asked = (("memory_max", options.memory_max, "memory"), ("pids_max", options.pids_max, "pids"))
        for name, value, controller in asked:
            if value is None:
                continue
            if self.cgroups is None:
                raise InvalidArgument(name, "needs a cgroup per task; this daemon has no delegated cgroup v2 tree")
            if controller not in self.cgroups.controllers:
                raise InvalidArgument(name, f"needs the {controller} controller; this daemon's cgroup tree has none")
        defaults = self._default_limits
        return Limits(
            options.memory_max if options.memory_max is not None else defaults.memory_max,
            options.pids_max if options.pids_max is not None else defaults.pids_max,
        )

    def launch(self, task: Task, output_failed: TerminalWriteFailed) -> TaskProcess:
        """Spawn the task; raises SpawnFailed, with nothing left running. Its record is saved by the caller."""
        assert self.spawner is not None, "Launcher.start() first"
        record = task.record
        try:
            # Room for its end on disk, before anything runs: a full disk refuses the start.
            self._store.reserve(record)
        except RecordNotSaved as exc:
            raise record_not_saved(self._store, record, exc) from exc
        try:
            start = self._sessions.prepare(record, task.options.cwd, task.options.env)
        except OSError as exc:  # its session's wrapper could not be written
            raise _could_not_start(self._store, record, exc) from exc
        # Taken before the spawn: the command may be running before spawn() returns, and a
        # start time taken after it would make a loaded daemon report `sleep 1` as 0.98 s.
        task.prepared(start.session_env_before, self.oom_counter.oom_kills() if self.oom_counter is not None else None)
        started_at = time.time()
        proc = self._spawn(task, start.env, output_failed, self.spawner)  # refused: none of its files is left
        task.started(proc, started_at)
        return proc

    def _spawn(
        self, task: Task, env: dict[str, str], output_failed: TerminalWriteFailed, spawner: Spawner
    ) -> TaskProcess:
        record, store = task.record, self._store
        try:
            cgroup = self.cgroups.create(record.id, task.limits) if self.cgroups is not None else None
        except OSError as exc:
            logger.warning("task %s could not get a cgroup: %s", record.id, exc)
            store.delete(record.id)  # its reserve and its session's wrapper: nothing will run
            raise SpawnFailed(f"its cgroup could not be created: {exc.strerror or exc} (errno {exc.errno})") from exc
        files = store.files
        request = SpawnRequest(
            cmd=record.cmd,
            cwd=record.cwd,
            env=env,
            stdout_path=files.out(record.id),
            stderr_path=files.err(record.id),
            script_path=files.script(record.id),
            stdin=record.stdin,
            pty=record.pty,
            on_output_failed=output_failed,
            cgroup=cgroup,
        )
        try:
            return spawn(request, spawner)
        except OSError as exc:
            failed = _could_not_start(store, record, exc)
            if cgroup is not None:
                cgroup.kill()
                cgroup.remove()
            raise failed from exc

    def keep_reserve(self, record: TaskRecord) -> None:
        """Room for its end again, if saving its record with its pid took the reserve."""
        if not self._store.has_reserve(record.id):
            try:
                self._store.reserve(record)
            except RecordNotSaved as exc:
                logger.warning(
                    "task %s: no room kept for its end (%s): it is saved when the disk has room", record.id, exc
                )


def new_record(task_id: str, options: TaskOptions) -> TaskRecord:
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


def watch_input(task: Task, files: TaskFiles, changed: InputChanged, readers: ProcReaders) -> None:
    """A task with input (pipe or pty) is sampled for a blocked read of it (input_wait), in `readers`' threads."""
    proc, record = task.process, task.record
    if task.input is None or proc is None or proc.input_fd is None:
        return
    fd = proc.input_fd
    try:
        if proc.is_pty:
            end = InputEnd.of_pty(fd, leader=proc.pid)
        else:
            end = InputEnd.of_pipe(fd, leader=proc.pid, pgid=proc.pgid)
    except OSError as exc:  # nothing to sample: the task runs on, never said to wait
        logger.warning("task %s: cannot watch its input: %s", record.id, exc)
        return
    out, err = files.out(record.id), files.err(record.id)

    def activity() -> tuple[int, int, int]:
        return task.input_writes, file_size(out), file_size(err)

    def on_change(waiting: bool) -> None:
        task.waiting_for_input_changed(waiting)
        changed(record, last_printed_line(out, err) if waiting else None, waiting)

    task.watch_input(InputWait(end, activity, on_change), readers)


def _default_limits(settings: Settings, tree: CgroupTree | None) -> Limits:
    """HIVE_BASH_TASK_MEMORY_MAX / _PIDS_MAX, as far as the tree can enforce them (the rest is logged, once)."""
    memory = memory_bytes(settings.task_memory_max) if settings.task_memory_max is not None else None
    pids = settings.task_pids_max
    controllers = tree.controllers if tree is not None else frozenset()
    for name, value, controller in (("task_memory_max", memory, "memory"), ("task_pids_max", pids, "pids")):
        if value is not None and controller not in controllers:
            logger.warning("%s is not enforced: no cgroup tree with the %s controller", name, controller)
    return Limits(memory if "memory" in controllers else None, pids if "pids" in controllers else None)


def record_not_saved(store: RecordStore, record: TaskRecord, exc: RecordNotSaved) -> SpawnFailed:
    store.delete(record.id)  # nothing runs unrecorded: the start is refused, its files go
    return SpawnFailed(f"its record could not be saved in {store.files.dir}: {exc.strerror}")


def _could_not_start(store: RecordStore, record: TaskRecord, exc: OSError) -> SpawnFailed:
    logger.warning("task %s could not start: %s", record.id, exc)
    store.delete(record.id)  # output files the failed spawn may have created
    return SpawnFailed(f"{exc.strerror or exc} (errno {exc.errno})")


def abandon(task: Task) -> None:
    """End the process of a task refused after its spawn: the loop reaps it, its fds are closed, nothing records it."""
    assert task.process is not None
    task.process.wait_status.add_done_callback(lambda _status: task.release())
    task.process.signal(signal.SIGKILL)
