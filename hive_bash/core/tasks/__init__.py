"""A task's life: the manager the layers above call (manager) over the records and todos (bookkeeping) and
the life in order (lifecycle and the parts it calls); the live `Task` and the frozen `TaskView` (task, view)."""

from __future__ import annotations

from hive_bash.core.tasks.manager import TaskManager as TaskManager
from hive_bash.core.tasks.task import KillAction as KillAction, Task as Task
from hive_bash.core.tasks.view import TaskView as TaskView, task_view as task_view
from hive_bash.core.tasks.wait import (
    ANY_PORT as ANY_PORT,
    PROGRESS_SECS as PROGRESS_SECS,
    Growth as Growth,
    LineWanted as LineWanted,
    OnProgress as OnProgress,
    WaitOutcome as WaitOutcome,
)
