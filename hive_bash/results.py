"""What the tools return: pydantic models (the advertised output schemas) and the text a model reads.

One `*_reply` function per tool builds its whole reply from the task and what the
tool learned from the task manager's public methods; hive_bash.tools only calls them.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Sequence
from pathlib import Path

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from . import output, semantics, summaries
from .mcp_compat import tool_result
from .records import Status, Stream, TaskRecord
from .sessions import SessionState
from .tasks import KillAction, Task

STATUS_WORDS = "pending, running, done, timed_out, interrupted, killed or failed"


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.datetime.fromtimestamp(timestamp, datetime.timezone.utc).isoformat(timespec="milliseconds")


class TaskStatus(BaseModel):
    id: str
    status: Status = Field(description=STATUS_WORDS)
    exit_code: int | None = Field(description="Exit status; null while running and when a signal ended it")
    signal: str | None = Field(description="The signal that ended the process, e.g. SIGKILL")
    semantic_status: semantics.SemanticStatus | None = Field(
        description="ok, error, signal or timeout: read this first (grep exit 1 is ok, 'no match')"
    )
    semantic_message: str | None
    end_reason: str | None = Field(description="Why the daemon ended it (deadline, idle, kill, restart, limit)")
    duration_secs: float | None
    cmd: str
    cwd: str
    started_at: str | None = Field(description="ISO 8601, UTC")
    ended_at: str | None
    stdout_bytes: int
    stderr_bytes: int
    last_output_age_secs: float | None = Field(
        description="While running: seconds since stdout or stderr last grew (since the start if silent)"
    )
    stdout_tail: str = Field(description="Last 4 KiB of stdout, cut on a character boundary")
    stderr_tail: str
    stdout_path: str
    stderr_path: str
    warning: str | None = Field(None, description="Set by run when the command looks destructive")
    pty: bool = False
    session: str | None = Field(None, description="The shell session it ran in")
    session_note: str | None = Field(None, description="Why the session's directory or state was not used")


def status_reply(
    task: Task, paths: tuple[Path, Path], warning: str | None = None, started: bool = False
) -> CallToolResult:
    """`run` and `status`: the task's status from its record and its (stdout, stderr) files."""
    result, text = describe(task, paths, warning, started)
    return tool_result(text, result)


def describe(
    task: Task, paths: tuple[Path, Path], warning: str | None = None, started: bool = False
) -> tuple[TaskStatus, str]:
    """A task's status (the structured result) and its text, each stream stat()ed and read once."""
    record = task.record
    out_path, err_path = paths
    out, err = output.view(out_path), output.view(err_path)
    semantic_status, semantic_message = semantics.semantic(record)
    last_output_age = None
    if record.status is Status.RUNNING:
        start = record.started_at or record.created_at
        last_output_age = time.time() - output.last_output_time(start, [(out.size, out.mtime), (err.size, err.mtime)])
    result = TaskStatus(
        id=record.id,
        status=record.status,
        exit_code=record.exit_code,
        signal=record.signal,
        semantic_status=semantic_status,
        semantic_message=semantic_message,
        end_reason=record.end_reason,
        duration_secs=_rounded(record.duration_secs),
        cmd=record.cmd,
        cwd=record.cwd,
        started_at=iso(record.started_at),
        ended_at=iso(record.ended_at),
        stdout_bytes=out.size,
        stderr_bytes=err.size,
        last_output_age_secs=_rounded(last_output_age),
        stdout_tail=out.tail,
        stderr_tail=err.tail,
        stdout_path=str(out_path),
        stderr_path=str(err_path),
        warning=warning,
        pty=record.pty,
        session=record.session,
        session_note=record.session_note,
    )
    return result, _status_text(result, out.excerpt, err.excerpt, started)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def _status_text(result: TaskStatus, out_excerpt: str, err_excerpt: str, started: bool) -> str:
    """Status word and exit first (`done, exit 3`), then facts, then head+tail of each stream."""
    words = summaries.ending_words(result.status, result.exit_code, result.signal)
    lines = [f"task started: id={result.id}" if started else words]
    if started:
        lines.append(f"status: {words}; it keeps running: status(id) or logs(id) to follow, kill(id) to stop")
    if result.warning:
        lines.append(f"warning: {result.warning}")
    if result.semantic_status is not None:
        meaning = f"semantic: {result.semantic_status}"
        if result.semantic_message:
            meaning += f" ({result.semantic_message})"
        lines.append(meaning)
    facts = [f"id={result.id}"]
    if result.session is not None:
        facts.append(f"session={result.session} cwd={result.cwd}")
    if result.duration_secs is not None:
        facts.append(f"duration={summaries.seconds(result.duration_secs)}")
    if result.last_output_age_secs is not None:
        facts.append(f"last output {summaries.seconds(result.last_output_age_secs)} ago")
    lines.append(" ".join(facts))
    if result.end_reason:
        lines.append(f"reason: {result.end_reason}")
    if result.session_note:
        lines.append(f"note: {result.session_note}")
    lines.append(_stream_block("stdout", result.stdout_path, result.stdout_bytes, out_excerpt))
    lines.append(_stream_block("stderr", result.stderr_path, result.stderr_bytes, err_excerpt))
    return "\n".join(lines)


def _stream_block(stream: str, path: str, size: int, excerpt: str) -> str:
    if size == 0:
        return f"[{stream}: empty]"
    return f"[{stream}: {size} bytes, full output in {path}]\n{excerpt}"


class TaskSummary(BaseModel):
    id: str
    status: Status
    cmd: str
    started_at: str | None
    duration_secs: float | None
    exit_code: int | None
    signal: str | None
    session: str | None = None


class SessionSummary(BaseModel):
    name: str
    cwd: str | None = Field(description="Where its next task starts; null until one of its tasks ended")
    tasks: int = Field(description="Its known tasks")


class TaskList(BaseModel):
    tasks: list[TaskSummary]
    total: int = Field(description="Known tasks matching the filter, before the limit")
    sessions: list[SessionSummary] = Field(default_factory=list, description="Shell sessions (run's session)")


def task_summary(task: Task) -> TaskSummary:
    record: TaskRecord = task.record
    return TaskSummary(
        id=record.id,
        status=record.status,
        cmd=summaries.shorten(record.cmd, 80),
        started_at=iso(record.started_at),
        duration_secs=_rounded(record.duration_secs),
        exit_code=record.exit_code,
        signal=record.signal,
        session=record.session,
    )


def list_reply(
    tasks: Sequence[Task], total: int, sessions: Sequence[tuple[SessionState, int]] = ()
) -> CallToolResult:
    """`list`: tasks (already filtered and cut to the limit), then the shell sessions with their task counts."""
    result = TaskList(
        tasks=[task_summary(task) for task in tasks],
        total=total,
        sessions=[SessionSummary(name=state.name, cwd=state.cwd, tasks=count) for state, count in sessions],
    )
    return tool_result(list_text(result), result)


def list_text(result: TaskList) -> str:
    lines = [f"{len(result.tasks)} of {result.total} task(s), newest first:" if result.tasks else "no tasks"]
    for item in result.tasks:
        words = summaries.ending_words(item.status, item.exit_code, item.signal)
        duration = summaries.seconds(item.duration_secs) if item.duration_secs is not None else "-"
        session = f"[{item.session}]  " if item.session else ""
        lines.append(f"{item.id}  {words}  {duration}  {session}{item.cmd}")
    if result.sessions:
        lines.append("sessions (name, cwd of its next run, tasks):")
        lines.extend(f"{item.name}  {item.cwd or '-'}  {item.tasks}" for item in result.sessions)
    return "\n".join(lines)


class KillResult(BaseModel):
    id: str
    status: Status = Field(description="The task's status right after the signal (the end arrives later)")
    action: KillAction


def kill_reply(task: Task, action: KillAction) -> CallToolResult:
    result = KillResult(id=task.id, status=task.status, action=action)
    text = f"{action} sent to task {task.id}" if action != "cancelled" else f"task {task.id} cancelled"
    return tool_result(text, result)


class LogPage(BaseModel):
    id: str
    stream: Stream
    data: str
    offset: int = Field(description="Byte offset this page starts at")
    next_offset: int = Field(description="Pass as offset to continue; equals size when caught up")
    size: int = Field(description="The stream file's size in bytes right now")
    eof: bool = Field(description="True when the task has ended and nothing is left after next_offset")
    skipped_bytes: int = Field(description="Bytes at offset skipped because a character began before it")
    status: Status


def log_reply(task: Task, stream: Stream, page: output.Page, ended: bool) -> CallToolResult:
    """`logs`: one page of a stream; `ended` is whether the task had ended before the page was read."""
    result = LogPage(
        id=task.id,
        stream=stream,
        data=page.data,
        offset=page.offset,
        next_offset=page.next_offset,
        size=page.size,
        eof=ended and page.next_offset >= page.size,
        skipped_bytes=page.skipped_bytes,
        status=task.status,
    )
    return tool_result(log_text(result), result)


def log_text(page: LogPage) -> str:
    head = f"{page.stream} bytes {page.offset}-{page.next_offset} of {page.size}"
    head += ", end of output" if page.eof else f", task {page.status.value}"
    if page.skipped_bytes:
        head += f" ({page.skipped_bytes} bytes of a split character skipped at {page.offset})"
    if page.next_offset < page.size:
        head += f"; more: logs(offset={page.next_offset})"
    return f"{head}\n{page.data}" if page.data else head


class WriteResult(BaseModel):
    id: str
    bytes_accepted: int
    out_offset: int = Field(description="Size of the .out file just before the write: follow with logs(offset=...)")
    queued_bytes: int = Field(description="Input accepted but not yet read by the task")
    eof_sent: bool


def write_reply(task: Task, accepted: int, out_offset: int, eof: bool) -> CallToolResult:
    queued = task.input.queued if task.input is not None else 0
    result = WriteResult(id=task.id, bytes_accepted=accepted, out_offset=out_offset, queued_bytes=queued, eof_sent=eof)
    text = f"{accepted} bytes sent to task {task.id}"
    if queued:
        text += f" ({queued} bytes still wait for the task to read them)"
    text += f"; follow with logs(id={task.id!r}, offset={out_offset}, wait_seconds=5)"
    return tool_result(text, result)
