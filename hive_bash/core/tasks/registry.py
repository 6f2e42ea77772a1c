"""The known tasks by id. A task run with a name takes it as its id once that name's old task has
ended (the new task replaces it); one without gets a random id."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

from hive_bash.core.storage import TaskRecord
from hive_bash.core.tasks.task import Task
from hive_bash.errors import NameInUse, TaskNotFound
from hive_bash.model import Status

ID_BYTES = 6


class Registry:
    """Tasks by id, live and ended, until they are forgotten."""

    def __init__(self) -> None:
        self._tasks: dict[str, Task] = {}

    def __len__(self) -> int:
        return len(self._tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self._tasks.values())

    def get(self, task_id: str) -> Task:
        task = self._tasks.get(task_id)
        if task is None:
            raise TaskNotFound(task_id)
        return task

    def current(self, record: TaskRecord) -> Task | None:
        """The live task of `record`; None once it was forgotten or its name went to a new task."""
        task = self._tasks.get(record.id)
        return task if task is not None and task.record is record else None

    def newest_first(self, status: Status | None = None, session: str | None = None) -> list[Task]:
        tasks = [
            task
            for task in self._tasks.values()
            if (status is None or task.status is status) and (session is None or task.record.session == session)
        ]
        return sorted(tasks, key=lambda task: task.record.created_at, reverse=True)

    def claim_id(self, name: str | None) -> tuple[str, Task | None]:
        """An id for a new task, and the ended task of that name it replaces (to be forgotten)."""
        if name is None:
            while (task_id := secrets.token_hex(ID_BYTES)) in self._tasks:
                pass
            return task_id, None
        previous = self._tasks.get(name)
        if previous is not None and not previous.ended.is_set():
            raise NameInUse(name, previous.status.value)
        return name, previous

    def add(self, task: Task) -> None:
        self._tasks[task.id] = task

    def remove(self, task: Task) -> None:
        del self._tasks[task.id]
