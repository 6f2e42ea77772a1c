"""The task engine's face: what the tools ask of tasks, answered from the registry.

A task's life, submit -> start -> exited -> ended -> forgotten, is in one module,
hive_bash.core.tasks.lifecycle, read in order there; this class starts and stops it, finds
tasks, waits for their ends and hands on what a reply asks for (`submit`, `kill`,
`write_input`, `wait_for_result`, `shown`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from pathlib import Path

from hive_bash.core.output import file_size
from hive_bash.core.processes import Listening, TaskProcesses, read_listening
from hive_bash.core.sessions import SessionState
from hive_bash.core.storage import TaskFiles
from hive_bash.core.tasks.lifecycle import Lifecycle
from hive_bash.core.tasks.task import KillAction, Task
from hive_bash.errors import TaskFinished, TaskNotFound
from hive_bash.model import Status, Stream, TaskOptions
from hive_bash.settings import Settings

logger = logging.getLogger(__name__)

SHUTDOWN_TODO_FLUSH_SECS = 3.0


class TaskManager:
    """The registry of tasks, as the tools see it; their lifecycle (hive_bash.core.tasks.lifecycle) does the rest."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.files = TaskFiles(settings.tasks_dir.resolve())
        self._life = Lifecycle(settings, self.files)
        self._tasks = self._life.tasks
        self._watching: asyncio.Task[None] | None = None
        self._watching_cgroups: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Load the records a previous daemon left (what was pending or running is now interrupted), then serve."""
        self._life.launcher.start()
        await self._life.recover()
        self._life.prune(sessions_too=True)
        self._life.todos.start()
        loop = asyncio.get_running_loop()
        self._watching = loop.create_task(self._life.watcher.run(self._life.prune), name="task-watcher")
        cgroups = self._life.cgroups
        if cgroups is not None:  # limits a task changed, processes that left its cgroup
            self._watching_cgroups = loop.create_task(cgroups.watch(), name="cgroup-watch")

    async def shutdown(self) -> None:
        """End every task (pending cancelled, running terminated group by group), then flush todos."""
        for watching in (self._watching, self._watching_cgroups):
            if watching is not None:
                watching.cancel()
        await self._life.shutdown()
        self._life.readers.close()
        self._life.write_settled()
        await self._life.todos.stop(SHUTDOWN_TODO_FLUSH_SECS)

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
        return self._life.sessions.get(name)

    def sessions(self, name: str | None = None) -> list[tuple[SessionState, int]]:
        """Each shell session (or only `name`) by name, with how many known tasks it has."""
        return self._life.sessions.listing((task.record.session for task in self._tasks.values()), name)

    def output_path(self, task: Task, stream: Stream) -> Path:
        return self.files.output(task.id, stream)

    @property
    def task_count(self) -> int:
        return len(self._tasks)

    @property
    def running_count(self) -> int:
        return len(self._life.slots.running)

    @property
    def todo_backlog(self) -> int:
        return self._life.todos.backlog

    def write_settled_records(self) -> None:
        """Write the records whose changes a reply reported (hive_bash.core.storage.saver); the app
        calls this once a response has gone out."""
        self._life.write_settled()

    async def wait_for_result(
        self, task: Task, seconds: float, abandon: asyncio.Event | None = None, until: asyncio.Event | None = None
    ) -> bool:
        """Wait up to `seconds` for the task to end (or until `abandon`: the caller left, or `until`: a
        wait_for line matched, or the task waits for its input: nothing can come before it does);
        True if it has ended.

        A caller that gets the terminal result hands it to the agent, so the todo state
        machine hears of the wait and whether its reply carries the result.
        """
        result_seen = False
        self._life.todos.wait_begins(task.record)
        try:
            await task.wait_for_end(seconds, abandon, until, task.wants_input)
            result_seen = task.ended.is_set() and not (abandon is not None and abandon.is_set())
        finally:
            self._life.wait_over(task, result_seen)
        return task.ended.is_set()

    async def wait_for_end(self, task: Task, seconds: float, abandon: asyncio.Event | None = None) -> None:
        """Wait up to `seconds` for the task to end (or until `abandon`): one step of a caller's poll,
        which hands over no result (no todo bookkeeping, unlike wait_for_result)."""
        await task.wait_for_end(seconds, abandon)

    async def listening(self, tasks: Sequence[Task]) -> list[Listening]:
        """What each running task's processes listen on now (hive_bash.core.processes.listening), read in a
        worker thread: its cgroup's processes, else its process group's and their descendants'."""
        return await read_listening(self._life.readers, [_processes(task) for task in tasks])

    def shown(self, task: Task) -> None:
        """A reply showed the task to the agent (what it printed so far): its notify_on notice is seen."""
        self._life.todos.task_shown(task.record)

    def submit(self, options: TaskOptions) -> Task:
        return self._life.submit(options)

    def write_input(self, task_id: str, data: bytes, eof: bool) -> tuple[Task, int]:
        """Queue input for a task; returns it and the .out size just before the write."""
        task = self.get(task_id)
        out_offset = file_size(self.files.out(task_id))
        task.write(data, eof)
        return task, out_offset

    def kill(self, task_id: str, force: bool) -> tuple[Task, KillAction]:
        """Signal a running task's group or cancel a pending task; returns it and the signal sent, or "cancelled"."""
        task = self.get(task_id)
        if task.ended.is_set():
            raise TaskFinished(task_id, task.status.value)
        return task, self._life.kill(task, force)


def _processes(task: Task) -> TaskProcesses | None:
    """Where a running task's processes are found; None once it ended (nothing of it listens)."""
    proc = task.process
    if proc is None or task.ended.is_set() or task.status is not Status.RUNNING:
        return None
    return proc.processes()
