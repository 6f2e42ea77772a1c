"""What the tools return: the advertised output schemas, and one `*_reply` function per tool.

Each gathers the facts of its reply from the task and what the tool learned from the task
manager's public methods; hive_bash.mcp.replies (pure) turns the facts into the reading a model
gets, and the text block renders the same dict. hive_bash.mcp.tools only calls these.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from mcp.types import CallToolResult
from pydantic import BaseModel, Field

from hive_bash.core import line_match, output, search, semantics
from hive_bash.mcp import replies
from hive_bash.mcp.limits import secs
from hive_bash.sdk.server import tool_result
from hive_bash.core.records import TaskRecord
from hive_bash.model import Status, Stream
from hive_bash.core.sessions import SessionState
from hive_bash.core.task import KillAction, Task

STATUS_WORDS = "pending, running, done, timed_out, interrupted, killed or failed"


def reply(content: Mapping[str, Any]) -> CallToolResult:
    """The structured result is the model's reading (Claude Code shows it alone); the text, its lines."""
    return tool_result(replies.as_text(content), content)


class TaskStatus(BaseModel):
    """The run/status reply (hive_bash.mcp.replies.task_reply): keys without anything to say are left out."""

    verdict: str = Field(
        description=f"First, the status ({STATUS_WORDS}) and how it ended: `done, exit 3 after 1.2s`, "
        "`killed, SIGKILL after 2s`, `task started: id=..., running`, `running for 5s`"
    )
    diagnosis: str | None = Field(None, description="Why it most likely ended, e.g. the kernel's OOM killer")
    id: str
    signal: str | None = Field(None, description="The signal that ended it, when the verdict names an exit code")
    semantic_status: str | None = Field(None, description="Only when an exit status is not a failure (grep: no match)")
    semantic_message: str | None = None
    end_reason: str | None = Field(None, description="Why the daemon ended it (deadline, idle, kill, restart, limit)")
    warning: str | None = Field(None, description="Set by run when the command looks destructive")
    next: str | None = Field(None, description="While the task has not ended: the one next step")
    matched_line: str | None = Field(None, description="With wait_for: the line that matched (the verdict says where)")
    cpu_secs: float | None = Field(
        None, description=f"Once ended: user + system CPU seconds, when at least {secs(replies.CPU_WORTH_SAYING_SECS)}"
    )
    max_rss_bytes: int | None = Field(None, description="Once ended: largest process's peak memory, above the daemon's")
    last_output_age_secs: float | None = None
    cmd: str | None = None
    cwd: str | None = None
    pty: bool | None = None
    stdout: str | None = Field(
        None, description="Whole, or head and tail cut on lines with a marker saying what was left out"
    )
    stdout_path: str = Field(description="Absolute path of the full stdout")
    stdout_folded: str | None = Field(None, description="What the excerpt folded: \\r overwrites, repeated lines")
    stderr: str | None = None
    stderr_folded: str | None = None
    stderr_path: str | None = None
    session: str | None = Field(None, description="The shell session it ran in")
    session_note: str | None = Field(None, description="Why the session's directory or state was not used")
    session_cwd: str | None = Field(None, description="Once ended: the session's directory after the run")
    exported: str | None = Field(None, description="Once ended: the variables the run exported to its session")
    waiting_for_input: bool | None = Field(None, description="True while it is blocked reading its input (write)")


def status_reply(
    task: Task,
    paths: tuple[Path, Path],
    warning: str | None = None,
    from_run: bool = False,
    offset: int = 0,
    todos: bool = False,
    session: SessionState | None = None,
    waited: line_match.FirstMatch | None = None,
    wait_secs: float = 0.0,
) -> CallToolResult:
    """`run` and `status`: the task from its record and its (stdout, stderr) files; stdout from `offset`;
    `session`: the state of the session it ran in; `waited`: what a wait_for wait of `wait_secs` found."""
    facts = task_facts(task, paths, warning, from_run, offset, todos, session)
    if waited is not None:
        facts = dataclasses.replace(
            facts, line_wait=replies.LineWaitFacts(waited.pattern, wait_secs, waited.match, waited.gave_up)
        )
    return reply(replies.task_reply(facts))


def session_left(task: Task, session: SessionState | None) -> tuple[str | None, tuple[str, ...]]:
    """(directory, exported names) the task's shell left its session, once it ended and its state was taken."""
    if session is None or session.task_id != task.id or not task.record.status.is_terminal:
        return None, ()
    before = task.session_env_before or {}
    # PWD and OLDPWD follow a `cd`, which session_cwd says
    exported = tuple(
        name for name, value in session.set.items() if before.get(name) != value and name not in ("PWD", "OLDPWD")
    )
    return session.cwd, exported


def task_facts(
    task: Task,
    paths: tuple[Path, Path],
    warning: str | None,
    from_run: bool,
    offset: int,
    todos: bool,
    session: SessionState | None = None,
) -> replies.TaskFacts:
    """What a run/status reply may say about a task, each stream opened and read once."""
    record = task.record
    out_path, err_path = paths
    out_bytes, err_bytes = output.read_stream(out_path, offset), output.read_stream(err_path)
    out_budget, err_budget = replies.excerpt_budgets(out_bytes.json_cost_bound(), err_bytes.json_cost_bound())
    out, err = output.excerpt_of(out_bytes, out_budget), output.excerpt_of(err_bytes, err_budget)
    semantic_status, semantic_message = semantics.semantic(record)
    last_output_age = kill_age = None
    now = time.time()
    if record.status is Status.RUNNING:
        start = record.started_at or record.created_at
        streams = [(stream.size, stream.mtime) for stream in (out_bytes, err_bytes)]
        last_output_age = now - output.last_output_time(start, streams)
    if task.kill_sent_at is not None and not record.status.is_terminal:
        kill_age = now - task.kill_sent_at
    session_cwd, exported = session_left(task, session)
    return replies.TaskFacts(
        id=record.id,
        status=record.status,
        cmd=record.cmd,
        cwd=record.cwd,
        exit_code=record.exit_code,
        signal=record.signal,
        semantic_status=semantic_status,
        semantic_message=semantic_message,
        end_reason=record.end_reason,
        duration_secs=record.duration_secs,
        last_output_age_secs=last_output_age,
        stdout=replies.StreamFacts("stdout", str(out_path), out),
        stderr=replies.StreamFacts("stderr", str(err_path), err),
        warning=warning,
        pty=record.pty,
        from_run=from_run,
        kill_sent=task.kill_signal if kill_age is not None else None,
        kill_age_secs=kill_age,
        todos=todos,
        session=record.session,
        session_note=record.session_note,
        cpu_secs=record.cpu_secs,
        max_rss_bytes=record.max_rss_bytes,
        diagnosis=record.diagnosis,
        waiting_for_input=task.input_wait is not None and task.input_wait.waiting,
        session_cwd=session_cwd,
        session_exports=exported,
    )


class SessionSummary(BaseModel):
    name: str
    cwd: str | None = Field(None, description="Where its next task starts; left out until one of its tasks ended")
    tasks: int = Field(description="Its known tasks")


class TaskList(BaseModel):
    verdict: str
    tasks: dict[str, str] | None = Field(None, description="id -> `status, exit N after 3s: cmd`, newest first")
    total: int = Field(description="Known tasks matching the filter, before the limit")
    sessions: list[SessionSummary] | None = Field(
        None, description="Shell sessions (run's session), when there are any"
    )
    more_sessions: int | None = Field(
        None, description="Sessions left out to keep the reply short; list(session=NAME) shows one"
    )


def task_row(task: Task) -> replies.TaskRow:
    record: TaskRecord = task.record
    return replies.TaskRow(
        id=record.id,
        status=record.status,
        cmd=record.cmd,
        exit_code=record.exit_code,
        signal=record.signal,
        duration_secs=record.duration_secs,
        session=record.session,
        cpu_secs=record.cpu_secs,
        max_rss_bytes=record.max_rss_bytes,
        waiting_for_input=task.input_wait is not None and task.input_wait.waiting,
    )


def list_reply(
    tasks: Sequence[Task],
    total: int,
    known: int,
    status: Status | None,
    sessions: Sequence[tuple[SessionState, int]] = (),
) -> CallToolResult:
    """`list`: the first tasks of `total` matching, newest first, then the shell sessions with their
    task counts; `known` says what exists when none match."""
    rows = [task_row(task) for task in tasks]
    shells = [replies.SessionRow(state.name, state.cwd, count) for state, count in sessions]
    return reply(replies.list_reply(rows, total, known, None if status is None else status.value, shells))


class KillResult(BaseModel):
    verdict: str
    id: str
    status: Status = Field(description="The task's status right after the signal (the end arrives later)")
    action: KillAction


def kill_reply(task: Task, action: KillAction) -> CallToolResult:
    return reply(replies.kill_reply(task.id, task.status, action))


class LogPage(BaseModel):
    verdict: str
    id: str | None = Field(None, description="Left out, like offset, when the page is empty")
    stream: Literal["stdout", "stderr"] | None = Field(None, description="Left out for stdout")
    data: str | None = None
    offset: int | None = Field(None, description="Byte offset this page starts at")
    next_offset: int = Field(description="Pass as offset to continue; equals size when caught up")
    size: int = Field(description="The stream file's size in bytes right now")
    eof: bool | None = Field(None, description="True when the task has ended and nothing is left after next_offset")
    skipped_bytes: int | None = Field(None, description="Bytes at offset skipped because a character began before it")
    status: Status
    matches: list[str] | None = Field(None, description="With pattern: `line:offset:text`, context `line-offset-text`")
    total_matches: int | None = Field(None, description="With pattern: matching lines from offset to size")


def log_reply(
    task: Task, stream: Stream, page: output.Page, ended: bool, other: replies.OtherStream | None = None
) -> CallToolResult:
    """`logs`: one page of a stream; `ended` is whether the task had ended before the page was read;
    `other`: the stream not read, when the call named none."""
    facts = replies.PageFacts(
        id=task.id,
        stream=stream,
        data=page.data,
        offset=page.offset,
        next_offset=page.next_offset,
        size=page.size,
        skipped_bytes=page.skipped_bytes,
        task_status=task.status,
        ended=ended,
        other=other,
    )
    return reply(replies.logs_reply(facts))


def search_reply(
    task: Task, stream: Stream, pattern: str, found: search.SearchResult, other: replies.OtherStream | None = None
) -> CallToolResult:
    """`logs` with a pattern: next_offset is the first match not listed (else the searched size)."""
    facts = replies.SearchFacts(
        id=task.id,
        stream=stream,
        pattern=pattern,
        lines=[replies.MatchLine(line.number, line.offset, line.text, line.is_match) for line in found.lines],
        total_matches=found.total_matches,
        offset=found.start_offset,
        next_offset=found.next_offset,
        size=found.end_offset,
        task_status=task.status,
        ended=task.ended.is_set(),
        other=other,
    )
    return reply(replies.search_reply(facts))


class WriteResult(BaseModel):
    verdict: str
    id: str
    bytes_accepted: int
    out_offset: int = Field(description="Size of the .out file just before the write: follow with logs(offset=...)")
    queued_bytes: int | None = Field(None, description="Input accepted but not yet read by the task")
    eof_sent: bool | None = None


def write_reply(task: Task, accepted: int, out_offset: int, eof: bool) -> CallToolResult:
    queued = task.input.queued if task.input is not None else 0
    return reply(replies.write_reply(task.id, accepted, out_offset, queued, eof))
