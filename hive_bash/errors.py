"""Tiny exception classes, every one that leaves its module. A `HiveBashError` carries a message written
for the agent: the tool layer turns it into a tool error (and the lifecycle ends a pending task whose start
raised SpawnFailed `failed`). The others are the programs' own failures (a config error: one line, exit 2)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class HiveBashError(Exception):
    """`facts`, when set, are the same refusal as keys, for programs (the CLI's `write` retries on them)."""

    facts: dict[str, object] | None = None


class InvalidArgument(HiveBashError):
    """A tool argument broke a rule. The message names the argument and the rule."""

    def __init__(self, argument: str, rule: str) -> None:
        super().__init__(f"invalid argument {argument!r}: {rule}")


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


class InputClosed(HiveBashError):
    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id!r}: its input was already closed (eof)")


class BacklogFull(HiveBashError):
    refused = "input_backlog_full"

    def __init__(self, task_id: str, queued: int, limit: int) -> None:
        super().__init__(
            f"task {task_id!r} is not reading its input: {queued} bytes already wait "
            f"(limit {limit}); try again once it has read some"
        )
        self.facts = {"id": task_id, "refused": self.refused, "queued_bytes": queued, "limit_bytes": limit}


class AllBacklogsFull(HiveBashError):
    refused = "all_input_backlogs_full"

    def __init__(self, task_id: str, queued: int, limit: int) -> None:
        super().__init__(
            f"task {task_id!r}: input waiting for tasks not reading it would pass the limit for all tasks "
            f"together: {queued} bytes already wait (limit {limit}); try again once they have read some, "
            "or kill the tasks that never will"
        )
        self.facts = {"id": task_id, "refused": self.refused, "queued_bytes": queued, "limit_bytes": limit}


class SearchFailed(HiveBashError):
    """The search failed, ran past its deadline or lost its caller."""


class SearchBusy(HiveBashError):
    def __init__(self, running: int, waiting: int, max_running: int, max_waiting: int) -> None:
        super().__init__(
            f"too many searches at once: {running} running and {waiting} waiting (the limit is "
            f"{max_running} running and {max_waiting} waiting); try again when one has ended"
        )


class OutputUnreadable(HiveBashError):
    """A task's output file cannot be read as one: not a regular file of ours (a FIFO, a link, a directory)."""


class ConfigError(ValueError):
    """Bad configuration (a setting, the tasks dir, the token or servers file): one line, exit status 2."""


class TokenError(ValueError):
    """The token file is missing, unsafe or holds no usable token; the message says which and how to fix it."""


class ToolFailed(Exception):
    """The client CLI's tool error; `facts`, its structured content (a full input backlog says so as keys)."""

    def __init__(self, message: str, facts: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.facts = facts or {}


class Unreachable(Exception):
    """The daemon could not be reached, or refused the session (wrong URL, wrong token)."""


class BodyRefused(Exception):
    """A request body refused before the MCP app sees it; `close` when the body was not read to its end."""

    def __init__(self, message: str, *, status: int, code: int, request_id: Any = None, close: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.request_id = request_id
        self.close = close


class ListenError(Exception):
    """The daemon's address cannot be bound (in use, not local, no permission)."""


class CgroupError(Exception):
    """HIVE_BASH_CGROUP_ROOT names nothing the daemon can use."""


class NotOurs(OSError):
    """A name in the tasks dir is not a regular file owned by the daemon's user."""


class TooLarge(OSError):
    """A file in the tasks dir is larger than what it may legitimately hold."""


class RecordNotSaved(OSError):
    """A record could not be written whole (disk full, I/O error); the old one, if any, stands."""
