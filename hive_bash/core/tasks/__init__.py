"""A task's life: the manager the layers above call, the lifecycle that takes a task from
submit to forgotten (lifecycle, launch, slots, watcher, endings, ending, retention), the
live `Task` and the frozen `TaskView` replies are built from (task, view).

The other subpackages of hive_bash.core import these names from here, never one of the
modules (tests/core/test_layers.py).
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
