"""The run/status reply: verdict, how it ended, next step, output excerpts, absolute paths.

`status_reply` reads what the reply shows (the two output files, once each) and `task_reply`
(pure) writes it from the task's view (hive_bash.core.tasks.view: its record and what only the running
daemon knows, frozen) and that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult

from hive_bash.core import (
    ANY_PORT,
    FirstMatch,
    PortSeen,
    SessionState,
    TaskView,
    WaitOutcome,
    describe,
    ending_words,
    json_chars,
    last_output_time,
    read_stream,
    seconds,
    shorten,
    size,
)
from hive_bash.model import Status, Stream
from hive_bash.mcp.limits import WAIT_CAP
from hive_bash.mcp.replies.budget import Excerpt, excerpt_of, json_cost_bound
from hive_bash.mcp.replies.render import counted, duration, in_schema_order, reply, rounded
from hive_bash.mcp.replies.schema import CPU_WORTH_SAYING_SECS, TaskStatus

# JSON characters a run/status reply may spend on output excerpts; the rest of the reply
# (verdict, paths, markers) stays well under 1,000, so a reply stays under 6,000.
EXCERPT_BUDGET = 4400
# What `listening` may take of the rest (16 IPv4 addresses); past it, it takes from the excerpts:
# 16 unix paths are up to 16 x 64 characters (hive_bash.core.processes.listening.ADDRESS_CHARS).
LISTENING_FREE_CHARS = 300
STATUS_CMD_CHARS = 300  # a cmd may be 256 KiB; the record and `list` keep it, a reply shows its start
EXPORTS_CHARS = 200  # the names a session run exported, within the reply's budget


@dataclass(frozen=True)
class StreamExcerpt:
    name: Stream
    path: str
    excerpt: Excerpt


@dataclass(frozen=True)
class Shown:
    """What a run/status reply says beside the task's record: read at the call, or the call's own."""

    stdout: StreamExcerpt
    stderr: StreamExcerpt
    from_run: bool = False  # a run reply: the model just wrote cmd and cwd itself
    warning: str | None = None  # run's, when the command looks destructive
    todos: bool = False  # a harness socket is configured: a running task's end arrives as a todo
    last_output_age_secs: float | None = None  # while it runs
    kill_sent: str | None = None  # the signal kill sent to a task that still runs
    kill_age_secs: float | None = None
    waiting_for_input: bool = False  # blocked reading its pipe or terminal (hive_bash.core.processes.input_wait)
    session_cwd: str | None = None  # once ended: the session's directory its shell left
    session_exports: tuple[str, ...] = ()  # once ended: the variables it exported or changed
    line_wait: FirstMatch | None = None  # run/status with wait_for: what the wait found
    wait_secs: float = 0.0  # and how long it was
    port_wait: tuple[str, str | None] | None = None  # wait_for_port: (what it waited for, the address found)


def status_reply(
    task: TaskView,
    paths: tuple[Path, Path],
    *,
    warning: str | None = None,
    from_run: bool = False,
    offset: int = 0,
    todos: bool = False,
    session: SessionState | None = None,
    wait: WaitOutcome | None = None,
) -> CallToolResult:
    """`run` and `status`: the task from its view and its (stdout, stderr) files; stdout from `offset`;
    `session`: the state of the session it ran in; `wait`: what the wait saw of a wait_for line or a
    wait_for_port port."""
    out_path, err_path = paths
    out_bytes, err_bytes = read_stream(out_path, offset), read_stream(err_path)
    listening_cost = sum(json_chars(address) + 3 for address in task.listening)
    out_budget, err_budget = excerpt_budgets(
        json_cost_bound(out_bytes),
        json_cost_bound(err_bytes),
        EXCERPT_BUDGET - max(0, listening_cost - LISTENING_FREE_CHARS),
    )
    last_output_age = kill_age = None
    now = time.time()
    if task.status is Status.RUNNING:
        start = task.started_at or task.created_at
        streams = [(stream.size, stream.mtime) for stream in (out_bytes, err_bytes)]
        last_output_age = now - last_output_time(start, streams)
    if task.kill_sent_at is not None and not task.status.is_terminal:
        kill_age = now - task.kill_sent_at
    session_cwd, exported = session_left(task, session)
    shown = Shown(
        stdout=StreamExcerpt("stdout", str(out_path), excerpt_of(out_bytes, out_budget)),
        stderr=StreamExcerpt("stderr", str(err_path), excerpt_of(err_bytes, err_budget)),
        from_run=from_run,
        warning=warning,
        todos=todos,
        last_output_age_secs=last_output_age,
        kill_sent=task.kill_signal if kill_age is not None else None,
        kill_age_secs=kill_age,
        waiting_for_input=task.waiting_for_input,
        session_cwd=session_cwd,
        session_exports=exported,
        line_wait=wait.line if wait is not None else None,
        wait_secs=wait.seconds if wait is not None else 0.0,
        port_wait=port_words(wait.port) if wait is not None and wait.port is not None else None,
    )
    return reply(task_reply(task, shown))


def port_words(port: PortSeen) -> tuple[str, str | None]:
    """(`a TCP port` or `port 8080`: what the verdict says it waited for, the address found)."""
    return "a TCP port" if port.port == ANY_PORT else f"port {port.port}", port.found


def session_left(task: TaskView, session: SessionState | None) -> tuple[str | None, tuple[str, ...]]:
    """(directory, exported names) the task's shell left its session, once it ended and its state was taken."""
    if session is None or session.task_id != task.id or not task.status.is_terminal:
        return None, ()
    before = task.session_env_before
    # PWD and OLDPWD follow a `cd`, which session_cwd says
    exported = tuple(
        name for name, value in session.set.items() if before.get(name) != value and name not in ("PWD", "OLDPWD")
    )
    return session.cwd, exported


def excerpt_budgets(stdout_cost: int, stderr_cost: int, budget: int = EXCERPT_BUDGET) -> tuple[int, int]:
    """Split the excerpt budget: half each, and what one stream does not need goes to the other."""
    half = budget // 2
    if stderr_cost < half:
        return budget - stderr_cost, stderr_cost
    if stdout_cost < half:
        return stdout_cost, budget - stdout_cost
    return half, budget - half


def task_reply(task: TaskView, shown: Shown) -> dict[str, Any]:
    """The verdict says the status and how it ended in words, for the model; `status`, `exit_code`
    and `signal` say the same as keys, for programs. A run reply's pty is the call's own."""
    ended = task.status.is_terminal
    semantic_status, semantic_message = task.semantic
    meaningful = semantic_status == "ok" and task.exit_code not in (None, 0)
    # the model wrote cmd and cwd itself (run), or is following a task it knows (an offset)
    known = shown.from_run or shown.stdout.excerpt.start > 0
    cpu_secs, max_rss_bytes = worth_saying(task.cpu_secs, task.max_rss_bytes)
    match = shown.line_wait.match if shown.line_wait is not None else None
    return in_schema_order(
        TaskStatus,
        {
            "verdict": verdict(task, shown, semantic_message if meaningful else None),
            "diagnosis": task.diagnosis,
            "warning": shown.warning,
            "next": next_step(task, shown),
            "matched_line": match.text if match is not None else None,
            "matched_port": shown.port_wait[1] if shown.port_wait is not None else None,
            "id": task.id,
            "status": task.status.value,
            "exit_code": task.exit_code,
            "signal": task.signal,
            "waiting_for_input": shown.waiting_for_input and not ended,
            "listening": list(task.listening) if not ended else None,
            "semantic_status": semantic_status if meaningful else None,
            "semantic_message": semantic_message if meaningful else None,
            "end_reason": task.end_reason if ended else None,
            "cpu_secs": cpu_secs,
            "max_rss_bytes": max_rss_bytes,
            "last_output_age_secs": None if shown.from_run else rounded(shown.last_output_age_secs),
            "cmd": None if known else shorten(task.cmd, STATUS_CMD_CHARS),
            # a session's task starts where the session was: not something the model wrote
            "cwd": None if known and task.session is None else task.cwd,
            "session": task.session,
            "session_note": task.session_note,
            # where the session is now, and what it exported: a `cd` that worked reads as one
            "session_cwd": shown.session_cwd,
            "exported": shorten(", ".join(shown.session_exports), EXPORTS_CHARS),
            "pty": task.pty and not shown.from_run,
            **stream_keys(task.id, shown.stdout, always_path=True),
            **stream_keys(task.id, shown.stderr, always_path=False),
        },
    )


def verdict(task: TaskView, shown: Shown, ok_meaning: str | None) -> str:
    """`ok_meaning`: what a nonzero exit that is no failure means (grep: `no match`)."""
    words = _verdict(task, shown, ok_meaning)
    if shown.port_wait is not None and not task.status.is_terminal:
        return port_verdict(words, task, shown, shown.port_wait)
    return line_verdict(words, task, shown)


def port_verdict(words: str, task: TaskView, shown: Shown, port_wait: tuple[str, str | None]) -> str:
    """A wait_for_port wait (with a wait_for one, whichever came first) that the task's end did not end."""
    wanted, found = port_wait
    if found is not None:
        return f"{words}; listening on {found}"
    waited = shown.line_wait
    if waited is not None and (waited.match is not None or waited.gave_up is not None or not waited.started):
        return line_verdict(words, task, shown)  # the line wait ended it (or could not start)
    if shown.waiting_for_input:  # the wait ended there: no server comes up before the input does
        return f"{words}; wait_for_port stopped: it waits for input"
    return f"{words}; not listening on {wanted} within {duration(shown.wait_secs)}"


def line_verdict(words: str, task: TaskView, shown: Shown) -> str:
    waited = shown.line_wait
    if waited is None or task.status.is_terminal:
        return words
    if waited.match is not None:  # the state first, then why the wait returned
        return f"{words}; {describe(waited.match, waited.pattern)}"
    if waited.gave_up is not None:
        return f"{words}; wait_for {waited.pattern!r} stopped: {waited.gave_up}"
    if not waited.started:  # no line was looked at: never "no line matched"
        again = f"status(id='{task.id}', wait_for={waited.pattern!r}, wait_seconds={WAIT_CAP}) tries again"
        why = waited.busy or f"its matcher had not started within {duration(shown.wait_secs)}"
        return f"{words}; wait_for {waited.pattern!r} did not start: {why}; {again}"
    if shown.waiting_for_input:  # the wait ended there: no line can come before the input does
        return f"{words}; wait_for {waited.pattern!r} stopped: it waits for input"
    new = "" if shown.from_run else "new "
    return f"{words}; no {new}line matched {waited.pattern!r} within {duration(shown.wait_secs)}"


def _verdict(task: TaskView, shown: Shown, ok_meaning: str | None) -> str:
    words = ending_words(task.status, task.exit_code, task.signal)
    if shown.from_run and not task.status.is_terminal:
        return f"task started: id={task.id}, {task.status.value}"
    took = task.duration_secs
    if task.status is Status.RUNNING and took is not None:
        return f"running for {duration(took)}" + nothing_new(shown)
    if task.status.is_terminal and took is not None:
        words += f" after {duration(took)}"
    if ok_meaning:
        words += f" (ok: {ok_meaning})"
    return words + nothing_new(shown)


def nothing_new(shown: Shown) -> str:
    """Said when status was asked from a stdout offset the stream has not passed."""
    excerpt = shown.stdout.excerpt
    if excerpt.start == 0 or excerpt.size > excerpt.start:
        return ""
    return f"; nothing new on stdout since offset {excerpt.start}"


def next_step(task: TaskView, shown: Shown) -> str | None:
    """The one thing to do next about a task that has not ended."""
    if task.status.is_terminal:
        return None
    quoted = f"id='{task.id}'"
    if shown.kill_sent is not None:
        age = f" {duration(shown.kill_age_secs)} ago" if shown.kill_age_secs is not None else ""
        return f"{shown.kill_sent} was sent{age} and it still runs: kill({quoted}, force=true) ends it"
    todo = "; its end also arrives as a todo" if shown.todos else ""
    if shown.waiting_for_input:
        return f"it waits for input: write({quoted}, data='...\\n') answers it{todo}"
    if shown.stdout.excerpt.size:
        return f"logs({quoted}, offset={shown.stdout.excerpt.size}, wait_seconds={WAIT_CAP}) follows new output{todo}"
    err_size = shown.stderr.excerpt.size
    if err_size:  # all it printed went to stderr (a server's request log): follow the stream that moves
        where = f"{quoted}, stream='stderr', offset={err_size}"
        return f"logs({where}, wait_seconds={WAIT_CAP}) follows new output{todo}"
    return f"status({quoted}, wait_seconds={WAIT_CAP}) waits for the end{todo}"


def worth_saying(cpu_secs: float | None, max_rss_bytes: int | None) -> tuple[float | None, int | None]:
    """(cpu_secs, max_rss_bytes) as a reply shows them: each left out unless it says something."""
    cpu = round(cpu_secs, 2) if cpu_secs is not None and cpu_secs >= CPU_WORTH_SAYING_SECS else None
    return cpu, max_rss_bytes


def usage_words(cpu_secs: float | None, max_rss_bytes: int | None) -> str:
    """`cpu 12s, 410 MiB` from what worth_saying kept; "" when nothing was."""
    cpu, rss = worth_saying(cpu_secs, max_rss_bytes)
    words = [f"cpu {seconds(cpu)}"] if cpu is not None else []
    return ", ".join(words + ([size(rss)] if rss is not None else []))


def stream_keys(task_id: str, stream: StreamExcerpt, always_path: bool) -> dict[str, Any]:
    shown = stream.excerpt.size > stream.excerpt.start
    return {
        stream.name: excerpt_text(task_id, stream.name, stream.excerpt) if shown else None,
        f"{stream.name}_folded": folded_note(stream.excerpt) if shown else None,
        f"{stream.name}_path": stream.path if shown or always_path else None,
    }


def cut_marker(task_id: str, stream: str, excerpt: Excerpt) -> str:
    count = excerpt.cut_lines if excerpt.lines_counted else float(f"{excerpt.cut_lines:.2g}")
    about = "" if excerpt.lines_counted else "about "
    lines = f", {about}{count:.0f} line{'s' if count > 1 else ''}" if count else ""
    where = f"id='{task_id}', stream='stderr'" if stream == "stderr" else f"id='{task_id}'"
    return (
        f"[... {counted(excerpt.cut_bytes, 'byte')}{lines} left out: logs({where}, offset={excerpt.cut_start}) "
        f"pages them, logs({where}, pattern=...) searches ...]"
    )


def excerpt_text(task_id: str, stream: str, excerpt: Excerpt) -> str:
    if excerpt.cut_bytes == 0:
        return excerpt.head
    head = excerpt.head if not excerpt.head or excerpt.head.endswith("\n") else excerpt.head + "\n"
    return f"{head}{cut_marker(task_id, stream, excerpt)}\n{excerpt.tail}"


def folded_note(excerpt: Excerpt) -> str | None:
    """Said when the excerpt shows less than the file has byte for byte (hive_bash.mcp.replies.budget.fold)."""
    parts = [counted(excerpt.overwrites_folded, "carriage-return overwrite")] if excerpt.overwrites_folded else []
    parts += [counted(excerpt.repeats_folded, "repeated line")] if excerpt.repeats_folded else []
    return f"{' and '.join(parts)} folded here; the file has every byte" if parts else None
