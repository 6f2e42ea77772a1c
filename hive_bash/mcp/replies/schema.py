"""Each reply's keys, once, in the order the reply gives them (render.in_schema_order), with what the output
schema says of them; a key is optional unless every reply of its kind has it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from hive_bash.core import KillAction
from hive_bash.model import Status, Stream
from hive_bash.mcp.limits import secs

STATUS_WORDS = "pending, running, done, timed_out, interrupted, killed or failed"
# An ended task's cost is said only when it says something: under this much CPU a number
# is noise (`echo hi` is 0.002s); the reaper's max_rss_bytes is known only above the daemon's
# own peak (a cgroup's memory.peak always).
CPU_WORTH_SAYING_SECS = 0.5


# Built by hive_bash.mcp.replies.task.task_reply; the docstring is sent to clients, so it names no module.
class ErrorLines(BaseModel):
    stream: Stream
    line: int
    offset: int = Field(description="Where text begins: logs(id, stream, offset) reads on from there")
    text: str


class TaskStatus(BaseModel):
    """The run/status reply: keys without anything to say are left out."""

    verdict: str = Field(
        description=f"First, the status ({STATUS_WORDS}) and how it ended: `done, exit 3 after 1.2s`, "
        "`killed, SIGKILL after 2s`, `task started: id=..., running`, `running for 5s`"
    )
    diagnosis: str | None = Field(None, description="Why it most likely ended, e.g. the kernel's OOM killer")
    errors: list[ErrorLines] | None = Field(
        None, description="Once it failed: the lines saying why, found anywhere in its output"
    )
    warning: str | None = Field(None, description="Set by run when the command looks destructive")
    next: str | None = Field(None, description="While the task has not ended: the one next step")
    matched_line: str | None = Field(None, description="With wait_for: the line that matched (the verdict says where)")
    matched_port: str | None = Field(None, description="With wait_for_port: the address that ended the wait")
    id: str
    status: Status = Field(description="What the verdict says first, as data")
    exit_code: int | None = Field(None, description="Once it exited: its exit code")
    signal: str | None = Field(None, description="The signal that ended it, e.g. SIGKILL")
    waiting_for_input: bool | None = Field(None, description="True while it is blocked reading its input (write)")
    listening: list[str] | None = Field(
        None, description="While it runs: addresses its processes listen on (`127.0.0.1:5173`, `[::1]:80`, a unix path)"
    )
    semantic_status: str | None = Field(None, description="Only when an exit status is not a failure (grep: no match)")
    semantic_message: str | None = None
    end_reason: str | None = Field(None, description="Why the daemon ended it (deadline, idle, kill, restart, limit)")
    cpu_secs: float | None = Field(
        None, description=f"Once ended: user + system CPU seconds, when at least {secs(CPU_WORTH_SAYING_SECS)}"
    )
    max_rss_bytes: int | None = Field(
        None, description="Once ended: peak memory (its cgroup's, or a process's above the daemon's)"
    )
    last_output_age_secs: float | None = None
    cmd: str | None = None
    cwd: str | None = None
    session: str | None = Field(None, description="The shell session it ran in")
    session_note: str | None = Field(None, description="Why the session's directory or state was not used")
    session_cwd: str | None = Field(None, description="Once ended: the session's directory after the run")
    exported: str | None = Field(None, description="Once ended: the variables the run exported to its session")
    pty: bool | None = None
    stdout: str | None = Field(
        None, description="Whole, or head and tail cut on lines with a marker saying what was left out"
    )
    stdout_folded: str | None = Field(None, description="What the excerpt folded: \\r overwrites, repeated lines")
    stdout_path: str = Field(description="Absolute path of the full stdout")
    stderr: str | None = None
    stderr_folded: str | None = None
    stderr_path: str | None = None


class SessionSummary(BaseModel):
    name: str
    cwd: str | None = Field(None, description="Where its next task starts; left out until one of its tasks ended")
    tasks: int = Field(description="Its known tasks")


class TaskList(BaseModel):
    verdict: str
    tasks: dict[str, str] | None = Field(None, description="id -> `status, exit N after 3s: cmd`, newest first")
    listening: dict[str, list[str]] | None = Field(None, description="id -> addresses a running task listens on")
    more_listening: int | None = Field(
        None, description="Addresses left out of listening to keep the reply short; status(id=...) shows a task's"
    )
    total: int = Field(description="Known tasks matching the filter, before the limit")
    sessions: list[SessionSummary] | None = Field(
        None, description="Shell sessions (run's session), when there are any"
    )
    more_sessions: int | None = Field(
        None, description="Sessions left out to keep the reply short; list(session=NAME) shows one"
    )


class KillResult(BaseModel):
    verdict: str
    id: str
    status: Status = Field(description="The task's status right after the signal (the end arrives later)")
    action: KillAction


# A page of output, or with a pattern the matching lines: each reply has only its own keys.
class LogPage(BaseModel):
    verdict: str
    matches: list[str] | None = Field(None, description="With pattern: `line:offset:text`, context `line-offset-text`")
    total_matches: int | None = Field(None, description="With pattern: matching lines from offset to size")
    id: str | None = Field(None, description="Left out, like offset, when the page is empty")
    stream: Literal["stdout", "stderr"] | None = Field(None, description="Left out for stdout")
    data: str | None = None
    offset: int | None = Field(None, description="Byte offset this page starts at")
    next_offset: int = Field(description="Pass as offset to continue; equals size when caught up")
    size: int = Field(description="The stream file's size in bytes right now")
    eof: bool | None = Field(None, description="True when the task has ended and nothing is left after next_offset")
    skipped_bytes: int | None = Field(None, description="Bytes at offset skipped because a character began before it")
    status: Status


class WriteResult(BaseModel):
    verdict: str
    id: str
    bytes_accepted: int
    out_offset: int = Field(description="Size of the .out file just before the write: follow with logs(offset=...)")
    queued_bytes: int | None = Field(None, description="Input accepted but not yet read by the task")
    eof_sent: bool | None = None
