"""A task's life: the manager the layers above call (manager), over the records and todos
(bookkeeping) and the life in order (lifecycle, launch, slots, watcher, terminations, ending,
retention); the live `Task` and the frozen `TaskView` replies read (task, view). Other
subpackages import these names from here (tests/core/test_layers.py).
"""

from __future__ import annotations

from hive_bash.core.tasks.manager import TaskManager
from hive_bash.core.tasks.task import KillAction, Task
from hive_bash.core.tasks.view import TaskView, task_view
from hive_bash.core.tasks.wait import ANY_PORT, PROGRESS_SECS, Growth, LineWanted, OnProgress, PortSeen, WaitOutcome

__all__ = [
    "ANY_PORT",
    "PROGRESS_SECS",
    "Growth",
    "KillAction",
    "LineWanted",
    "OnProgress",
    "PortSeen",
    "Task",
    "TaskManager",
    "TaskView",
    "WaitOutcome",
    "task_view",
]
