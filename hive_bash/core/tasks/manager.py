"""The task engine's face: what the tools ask of tasks. Their life (hive_bash.core.tasks.lifecycle)
changes them; this class finds them, waits on them and reads what a reply shows."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from hive_bash.core.output import file_size
from hive_bash.core.processes import Listening, TaskProcesses, base_environment, read_listening
from hive_bash.core.sessions import SessionState, SessionStore
from hive_bash.core.storage import TaskFiles
from hive_bash.core.tasks.bookkeeping import Bookkeeping
from hive_bash.core.tasks.lifecycle import Lifecycle
from hive_bash.core.tasks.task import KillAction, Task
from hive_bash.core.tasks.wait import Waits
from hive_bash.errors import TaskFinished, TaskNotFound
from hive_bash.model import Status, Stream, TaskOptions
from hive_bash.settings import Settings


class TaskManager:
    """The registry of tasks as the tools see it; their life is the lifecycle's."""

    def __init__(self, settings: Settings) -> None:
        self.files = TaskFiles(settings.tasks_dir.resolve())
        self._book = Bookkeeping(settings, self.files)
        base_env = base_environment(os.environ, settings.hidden_env_names)
        self._sessions = SessionStore(self.files, base_env, settings.hidden_env_names)
        self._life = Lifecycle(settings, self.files, sessions=self._sessions, book=self._book)
        self._tasks = self._life.tasks
        self.wait = Waits(self.files, self.listening, self._book).wait  # the inline wait (hive_bash.core.tasks.wait)

    async def start(self) -> None:
        """Load the records a previous daemon left (what was pending or running is now interrupted), then serve."""
        await self._life.start()

    async def shutdown(self) -> None:
        """End every task (pending cancelled, running terminated group by group), then flush todos."""
        await self._life.stop()
        await self._book.stop()

    def submit(self, options: TaskOptions) -> Task:
        return self._life.submit(options)

    def kill(self, task_id: str, force: bool) -> tuple[Task, KillAction]:
        """Signal a running task's group or cancel a pending task; returns it and the signal sent, or "cancelled"."""
        task = self.get(task_id)
        if task.ended.is_set():
            raise TaskFinished(task_id, task.status.value)
        return task, self._life.kill(task, force)

    def write_input(self, task_id: str, data: bytes, eof: bool) -> tuple[Task, int]:
        """Queue input for a task; returns it and the .out size just before the write."""
        task = self.get(task_id)
        out_offset = file_size(self.files.out(task_id))
        task.write(data, eof)
        return task, out_offset

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
        return self._life.running_count

    @property
    def todo_backlog(self) -> int:
        return self._book.todos.backlog

    async def listening(self, tasks: Sequence[Task]) -> list[Listening]:
        """What each running task's processes listen on now (hive_bash.core.processes.listening), read off the loop."""
        return await read_listening(self._life.readers, [_processes(task) for task in tasks])

    def shown(self, task: Task) -> None:
        """A reply showed the task to the agent (what it printed so far): its notify_on notice is seen."""
        self._book.shown(task.record)

    def reply_sent(self) -> None:
        """A response has gone out: write the records it reported (the app calls this after each)."""
        self._book.reply_sent()


def _processes(task: Task) -> TaskProcesses | None:
    """Where a running task's processes are found; None once it ended (nothing of it listens)."""
    proc = task.process
    if proc is None or task.ended.is_set() or task.status is not Status.RUNNING:
        return None
    return proc.processes()
