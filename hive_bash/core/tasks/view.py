"""A task as the layers above read it: a frozen `TaskView`, taken by `task_view`, the one reader of a
live task's state for replies, so what a reply may say about a task is listed here once."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from hive_bash.core.exit_meaning import SemanticStatus, exit_meaning
from hive_bash.core.processes import Listening
from hive_bash.core.tasks.task import Task
from hive_bash.model import Status


@dataclass(frozen=True)
class TaskView:
    """What its record said and what only the running daemon knew, at one moment."""

    id: str
    cmd: str
    status: Status
    exit_code: int | None
    signal: str | None
    end_reason: str | None
    diagnosis: str | None  # why it most likely ended (the OOM reading)
    created_at: float
    started_at: float | None
    duration_secs: float | None  # so far while it runs
    cwd: str
    session: str | None
    session_note: str | None
    pty: bool
    cpu_secs: float | None
    max_rss_bytes: int | None
    # what only the running daemon knows
    ended: bool  # its end is settled (the record says so, and waiters were woken)
    kill_signal: str | None  # what `kill` last sent, and when
    kill_sent_at: float | None
    waiting_for_input: bool  # blocked reading its pipe or terminal, nothing written since
    queued_input_bytes: int  # written to it and not yet read
    session_env_before: Mapping[str, str]  # its session's variables when it started
    # the addresses its processes listen on (hive_bash.core.processes.listening), read only when a reply asks;
    # as shown: a unix path's controls escaped, one over 64 characters cut (Address.__str__)
    listening: tuple[str, ...] = ()

    @property
    def semantic(self) -> tuple[SemanticStatus | None, str | None]:
        """What its exit status means: `("ok", "no match")` for grep's 1 (hive_bash.core.exit_meaning)."""
        return exit_meaning(self)


def task_view(task: Task, listening: Listening | None = None) -> TaskView:
    """The task now, the one place a reply's facts are read from a live task (`listening`: read off the loop)."""
    record = task.record
    return TaskView(
        id=record.id,
        cmd=record.cmd,
        status=record.status,
        exit_code=record.exit_code,
        signal=record.signal,
        end_reason=record.end_reason,
        diagnosis=record.diagnosis,
        created_at=record.created_at,
        started_at=record.started_at,
        duration_secs=record.duration_secs,
        cwd=record.cwd,
        session=record.session,
        session_note=record.session_note,
        pty=record.pty,
        cpu_secs=record.cpu_secs,
        max_rss_bytes=record.max_rss_bytes,
        ended=task.ended.is_set(),
        kill_signal=task.kill_signal,
        kill_sent_at=task.kill_sent_at,
        waiting_for_input=task.waiting_for_input.is_set(),
        queued_input_bytes=task.input.queued if task.input is not None else 0,
        session_env_before=MappingProxyType(dict(task.session_env_before or {})),
        listening=tuple(listening.words()) if listening is not None and not task.ended.is_set() else (),
    )
