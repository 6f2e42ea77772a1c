"""The vocabulary every layer shares: a task's status and streams, what `run` asks for, the name rules.
It imports nothing of hive_bash, so core, mcp and the client speak it without importing one another."""

from __future__ import annotations

import enum
import re
import signal
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

# A task name, a session name: short, lower case, safe in a file name and a shell word.
NAME_MAX_CHARS = 63
NAME_PATTERN = re.compile(rf"[a-z0-9-]{{1,{NAME_MAX_CHARS}}}")
ENV_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# Not a StrEnum: str() and format() of a member stay "Status.DONE", as every log line and
# f-string that formats one has always printed it (a StrEnum prints "done").
class Status(str, enum.Enum):  # noqa: UP042
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    TIMED_OUT = "timed_out"
    INTERRUPTED = "interrupted"
    KILLED = "killed"
    # ended by the daemon, not by the command: it could not start (spawn failure), a limit ended it
    # (output cap, cgroup memory or pids), its output could not be written (disk full), or its end
    # could not be read
    FAILED = "failed"

    @property
    def is_terminal(self) -> bool:
        return self not in (Status.PENDING, Status.RUNNING)


Stream = Literal["stdout", "stderr"]
STREAMS: tuple[Stream, ...] = ("stdout", "stderr")

StdinMode = Literal["null", "pipe"]


@dataclass(frozen=True)
class TaskOptions:
    """What `run` asked for, every rule checked (build it with `hive_bash.mcp.arguments.task_options`)."""

    cmd: str
    name: str | None = None
    timeout_secs: float | None = None
    idle_timeout_secs: float | None = None
    cwd: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    pty: bool = False
    stdin: StdinMode = "null"
    session: str | None = None  # the shell session it starts from and leaves its state to
    memory_max: int | None = None  # bytes; needs the daemon's cgroup tree (checked by the task manager)
    pids_max: int | None = None
    notify_on: str | None = None  # a regex (checked): a matching output line updates the task's todo


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
