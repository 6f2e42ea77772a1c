"""The run/status reply: `status_reply` reads the two output files once each, `task_reply` (pure) writes
the reply from the task's view and what was read."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.types import CallToolResult

from hive_bash.core import (
    ANY_PORT,
    Reason,
    SessionState,
    TaskView,
    WaitOutcome,
    describe,
    failure_reasons,
    json_chars,
    last_output_time,
    read_stream,
    shorten,
)
from hive_bash.model import STREAMS, Status, Stream
from hive_bash.mcp.limits import WAIT_CAP
from hive_bash.mcp.replies.budget import Excerpt, excerpt_of, json_cost_bound
from hive_bash.mcp.replies.render import counted, cpu_shown, duration, in_schema_order, logs_call, reply, took_words
from hive_bash.mcp.replies.schema import ErrorLines, TaskStatus

# JSON characters a run/status reply may spend on output excerpts; the rest of the reply
# (verdict, paths, markers) stays well under 1,000, so a reply stays under 6,000.
EXCERPT_BUDGET = 4400
# What `listening` may take of the rest (16 IPv4 addresses); past it, it takes from the excerpts:
# 16 unix paths are up to 16 x 64 characters (hive_bash.core.processes.listening.ADDRESS_CHARS).
LISTENING_FREE_CHARS = 300
STATUS_CMD_CHARS = 300  # a cmd may be 256 KiB; the record and `list` keep it, a reply shows its start
EXPORTS_CHARS = 200  # the names a session run exported, within the reply's budget


@dataclass(frozen=True)
class Shown:
    """What a run/status reply says beside the task's view: read at the call, or the call's own."""

    stdout: Excerpt
    stderr: Excerpt
    from_run: bool = False  # a run reply: the model just wrote cmd and cwd itself
    warning: str | None = None  # run's, when the command looks destructive
    todos: bool = False  # a harness socket is configured: a running task's end arrives as a todo
    last_output_age_secs: float | None = None  # while it runs, to the millisecond
    kill_age_secs: float | None = None  # since `kill` signalled a task that has not ended
    session_cwd: str | None = None  # once ended: the session's directory its shell left
    session_exports: tuple[str, ...] = ()  # once ended: the variables it exported or changed
    wait: WaitOutcome | None = None  # what the inline wait saw of a wait_for line or a wait_for_port port
    errors: tuple[Reason, ...] = ()  # once it failed: the lines that say why (hive_bash.core.output.reasons)


async def status_reply(
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
    """`run` and `status`: the task from its view and its (stdout, stderr) files, stdout from `offset`;
    `session`: the state of the session it ran in. A failed task's reply shows why first (`errors`,
    searched for off the event loop), then its streams' tails before their heads."""
    failed = task.semantic[0] not in (None, "ok")
    errors = tuple(await failure_reasons(tuple(zip(STREAMS, paths, strict=True)))) if failed else ()
    out, err = read_stream(paths[0], offset), read_stream(paths[1])
    listening_cost = sum(json_chars(address) + 3 for address in task.listening)
    errors_cost = sum(reason.chars for reason in errors)
    budget = EXCERPT_BUDGET - max(0, listening_cost - LISTENING_FREE_CHARS) - errors_cost
    out_budget, err_budget = excerpt_budgets(json_cost_bound(out), json_cost_bound(err), budget)
    now = time.time()
    last_output = last_output_time(task.started_at or task.created_at, [(s.size, s.mtime) for s in (out, err)])
    session_cwd, exported = session_left(task, session)
    shown = Shown(
        stdout=excerpt_of(out, out_budget, tail_first=failed),
        stderr=excerpt_of(err, err_budget, tail_first=failed),
        from_run=from_run,
        warning=warning,
        todos=todos,
        last_output_age_secs=round(now - last_output, 3) if task.status is Status.RUNNING else None,
        kill_age_secs=None if task.kill_sent_at is None or task.status.is_terminal else now - task.kill_sent_at,
        session_cwd=session_cwd,
        session_exports=exported,
        wait=wait,
        errors=errors,
    )
    return reply(task_reply(task, shown))


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
    known = shown.from_run or shown.stdout.start > 0
    line = shown.wait.line if shown.wait is not None else None
    port = shown.wait.port if shown.wait is not None else None
    return in_schema_order(
        TaskStatus,
        {
            "verdict": verdict(task, shown, semantic_message if meaningful else None),
            "diagnosis": task.diagnosis,
            "errors": [{key: getattr(reason, key) for key in ErrorLines.model_fields} for reason in shown.errors]
            or None,
            "warning": shown.warning,
            "next": next_step(task, shown),
            "matched_line": line.match.text if line is not None and line.match is not None else None,
            "matched_port": port.found if port is not None else None,
            "id": task.id,
            "status": task.status.value,
            "exit_code": task.exit_code,
            "signal": task.signal,
            "waiting_for_input": task.waiting_for_input and not ended,
            "listening": list(task.listening) if not ended else None,
            "semantic_status": semantic_status if meaningful else None,
            "semantic_message": semantic_message if meaningful else None,
            "end_reason": task.end_reason if ended else None,
            "cpu_secs": cpu_shown(task.cpu_secs),
            "max_rss_bytes": task.max_rss_bytes,
            "last_output_age_secs": None if shown.from_run else shown.last_output_age_secs,
            "cmd": None if known else shorten(task.cmd, STATUS_CMD_CHARS),
            # a session's task starts where the session was: not something the model wrote
            "cwd": None if known and task.session is None else task.cwd,
            "session": task.session,
            "session_note": task.session_note,
            # where the session is now, and what it exported: a `cd` that worked reads as one
            "session_cwd": shown.session_cwd,
            "exported": shorten(", ".join(shown.session_exports), EXPORTS_CHARS),
            "pty": task.pty and not shown.from_run,
            **stream_keys(task.id, "stdout", shown.stdout, always_path=True),
            **stream_keys(task.id, "stderr", shown.stderr, always_path=False),
        },
    )


def verdict(task: TaskView, shown: Shown, ok_meaning: str | None) -> str:
    """`ok_meaning`: what a nonzero exit that is no failure means (grep: `no match`). A wait the task's end
    did not end says why it ended: the port found, the line's wait, the input wait or the time."""
    excerpt = shown.stdout  # status from a stdout offset the stream has not passed: nothing new
    nothing_new = excerpt.start and excerpt.size <= excerpt.start
    words = took_words(task) + (f" (ok: {ok_meaning})" if ok_meaning else "")
    words += f"; nothing new on stdout since offset {excerpt.start}" if nothing_new else ""
    if shown.from_run and not task.status.is_terminal:
        words = f"task started: id={task.id}, {task.status.value}"
    wait = shown.wait
    if wait is None or task.status.is_terminal:
        return words
    line, port = wait.line, wait.port
    if port is not None and port.found is not None:
        return f"{words}; listening on {port.found}"
    line_ended = line is not None and (line.match is not None or line.gave_up is not None or not line.started)
    if port is not None and not line_ended:  # else the line wait ended it (or could not start)
        if task.waiting_for_input:  # the wait ended there: no server comes up before the input does
            return f"{words}; wait_for_port stopped: it waits for input"
        wanted = "a TCP port" if port.port == ANY_PORT else f"port {port.port}"
        return f"{words}; not listening on {wanted} within {duration(wait.seconds)}"
    if line is None:
        return words
    if line.match is not None:  # the state first, then why the wait returned
        return f"{words}; {describe(line.match, line.pattern)}"
    if line.gave_up is not None:
        return f"{words}; wait_for {line.pattern!r} stopped: {line.gave_up}"
    if not line.started:  # no line was looked at: never "no line matched"
        again = f"status(id='{task.id}', wait_for={line.pattern!r}, wait_seconds={WAIT_CAP}) tries again"
        why = line.busy or f"its matcher had not started within {duration(wait.seconds)}"
        return f"{words}; wait_for {line.pattern!r} did not start: {why}; {again}"
    if task.waiting_for_input:  # the wait ended there: no line can come before the input does
        return f"{words}; wait_for {line.pattern!r} stopped: it waits for input"
    new = "" if shown.from_run else "new "
    return f"{words}; no {new}line matched {line.pattern!r} within {duration(wait.seconds)}"


def next_step(task: TaskView, shown: Shown) -> str | None:
    """The one thing to do next about a task that has not ended."""
    if task.status.is_terminal:
        return None
    quoted = f"id='{task.id}'"
    if task.kill_signal is not None and shown.kill_age_secs is not None:
        age = duration(shown.kill_age_secs)
        return f"{task.kill_signal} was sent {age} ago and it still runs: kill({quoted}, force=true) ends it"
    todo = "; its end also arrives as a todo" if shown.todos else ""
    if task.waiting_for_input:
        return f"it waits for input: write({quoted}, data='...\\n') answers it{todo}"
    # all it printed went to stderr (a server's request log): follow the stream that moves
    name, moving = ("stdout", shown.stdout) if shown.stdout.size else ("stderr", shown.stderr)
    if moving.size:
        follow = logs_call(task.id, name, f"offset={moving.size}", f"wait_seconds={WAIT_CAP}")
        return f"{follow} follows new output{todo}"
    return f"status({quoted}, wait_seconds={WAIT_CAP}) waits for the end{todo}"


def stream_keys(task_id: str, name: Stream, excerpt: Excerpt, *, always_path: bool) -> dict[str, Any]:
    shown = excerpt.size > excerpt.start
    return {
        name: excerpt_text(task_id, name, excerpt) if shown else None,
        f"{name}_folded": folded_note(excerpt) if shown else None,
        f"{name}_path": str(excerpt.path) if shown or always_path else None,
    }


def cut_marker(task_id: str, stream: str, excerpt: Excerpt) -> str:
    count = excerpt.cut_lines if excerpt.lines_counted else float(f"{excerpt.cut_lines:.2g}")
    about = "" if excerpt.lines_counted else "about "
    lines = f", {about}{count:.0f} line{'s' if count > 1 else ''}" if count else ""
    pages = logs_call(task_id, stream, f"offset={excerpt.cut_start}")
    searches = logs_call(task_id, stream, "pattern=...")
    return f"[... {counted(excerpt.cut_bytes, 'byte')}{lines} left out: {pages} pages them, {searches} searches ...]"


def excerpt_text(task_id: str, stream: str, excerpt: Excerpt) -> str:
    if excerpt.cut_bytes == 0:
        return excerpt.head
    head = excerpt.head if not excerpt.head or excerpt.head.endswith("\n") else excerpt.head + "\n"
    return f"{head}{cut_marker(task_id, stream, excerpt)}\n{excerpt.tail}"


def folded_note(excerpt: Excerpt) -> str | None:
    """Said when the excerpt shows less than the file has byte for byte (hive_bash.mcp.replies.budget.fold)."""
    parts = [counted(excerpt.overwrites_folded, "carriage-return overwrite")] if excerpt.overwrites_folded else []
    parts += [counted(excerpt.repeats_folded, "repeated line")] if excerpt.repeats_folded else []
    parts += [counted(excerpt.similar_folded, "similar line")] if excerpt.similar_folded else []
    return f"{' and '.join(parts)} folded here; the file has every byte" if parts else None
