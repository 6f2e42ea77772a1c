"""Tiny exception classes, each message written for the agent that made the call.

The tool layer (hive_bash.mcp.tools) turns them into MCP tool errors. The task manager
catches one itself: SpawnFailed of a pending task ends that task `failed`.
"""

from __future__ import annotations


class HiveBashError(Exception):
    """Base class: the message is written for the agent that made the call."""


class InvalidArgument(HiveBashError):
    """A tool argument broke a rule. The message names the argument and the rule."""

    def __init__(self, argument: str, rule: str) -> None:
        super().__init__(f"invalid argument {argument!r}: {rule}")
        self.argument = argument
        self.rule = rule


class TaskNotFound(HiveBashError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"no task with id {task_id!r} (use list to see known tasks)")


class NameInUse(HiveBashError):
    def __init__(self, name: str, status: str) -> None:
        super().__init__(f"invalid argument 'name': task {name!r} is still {status}; pick another name or wait")


class TaskFinished(HiveBashError):
    def __init__(self, task_id: str, status: str) -> None:
        super().__init__(f"task {task_id!r} has already ended ({status}); nothing to do")


class QueueFull(HiveBashError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"too many pending tasks (limit {limit}); wait for some to finish or kill some")


class SpawnFailed(HiveBashError):
    def __init__(self, reason: str) -> None:
        super().__init__(f"could not start the task: {reason}")


class NoInput(HiveBashError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r} takes no input: start it with pty=true or stdin='pipe'")
