"""The list reply: newest first, one row per task keyed by id, then the shell sessions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mcp.types import CallToolResult

from hive_bash.core import wording
from hive_bash.core.task import Task
from hive_bash.core.records import TaskRecord
from hive_bash.model import Status
from hive_bash.core.sessions import SessionState
from hive_bash.mcp.replies.render import compact, duration, in_schema_order, reply
from hive_bash.mcp.replies.schema import TaskList
from hive_bash.mcp.replies.task import usage_words, waiting_for_input

LIST_ROW_CHARS = 72  # one `list` row, id included: 50 rows stay under 4,000 characters
LIST_CMD_MIN_CHARS = 20
LIST_USAGE_CMD_MIN_CHARS = 12  # a row showing its cost may cut its cmd shorter, never its length
# A whole `list` reply; the sessions after the task rows get what is left, at least the minimum
# (50 full rows use most of it), and a count of those left out.
LIST_BUDGET = 4000
LIST_SESSIONS_MIN_CHARS = 600
SESSION_CWD_CHARS = 120


def list_reply(
    tasks: Sequence[Task],
    total: int,
    known: int,
    status: Status | None,
    sessions: Sequence[tuple[SessionState, int]] = (),
) -> CallToolResult:
    """`list`: the first tasks of `total` matching, newest first, then the shell sessions with their
    task counts; `known` says what exists when none match."""
    rows = [(task.record, waiting_for_input(task)) for task in tasks]
    return reply(listing(rows, total, known, status, sessions))


def listing(
    rows: Sequence[tuple[TaskRecord, bool]],
    total: int,
    known: int,
    status: Status | None,
    sessions: Sequence[tuple[SessionState, int]] = (),
) -> dict[str, Any]:
    """`rows`: each task's record and whether it waits for input. An empty answer says what exists."""
    which = f"{status.value} tasks" if status else "tasks"
    if not rows:
        if total:
            head = f"no {which} shown (limit=0); {total} match"
        else:
            head = f"no {which}" + (f"; {known} tasks known: list() shows them" if status and known else "")
    elif len(rows) < total:
        head = f"{len(rows)} of {total} {which}, newest first (raise limit for more)"
    else:
        head = f"{total} {which.removesuffix('s') if total == 1 else which}, newest first"
    tasks = {record.id: list_row(record, waiting) for record, waiting in rows}
    values: dict[str, Any] = {"verdict": head, "tasks": tasks, "total": total}
    shells = session_rows(sessions, LIST_BUDGET - len(json.dumps(compact(values.items()))))
    return in_schema_order(
        TaskList, {**values, "sessions": shells, "more_sessions": (len(sessions) - len(shells)) or None}
    )


def list_row(record: TaskRecord, waiting_for_input: bool = False) -> str:
    """`done, exit 0 after 1.2s: make test`, shortened so the row with its id fits LIST_ROW_CHARS."""
    words = wording.ending_words(record.status, record.exit_code, record.signal)
    took = record.duration_secs
    if took is not None:
        words += f" {'for' if record.status is Status.RUNNING else 'after'} {duration(took)}"
    if waiting_for_input and not record.status.is_terminal:
        words += ", waits for input"
    if record.session is not None:
        words += f" [{record.session}]"
    usage = usage_words(record.cpu_secs, record.max_rss_bytes)
    cmd_min = LIST_CMD_MIN_CHARS
    # the cost only where the row still fits LIST_ROW_CHARS with a recognisable command
    if usage and LIST_ROW_CHARS - len(record.id) - len(words) - len(usage) - 5 >= LIST_USAGE_CMD_MIN_CHARS:
        words += f" ({usage})"
        cmd_min = LIST_USAGE_CMD_MIN_CHARS
    room = max(cmd_min, LIST_ROW_CHARS - len(record.id) - len(words) - 2)
    return f"{words}: {wording.shorten(record.cmd, room)}"


def session_rows(sessions: Sequence[tuple[SessionState, int]], budget: int) -> list[dict[str, Any]]:
    """The sessions with their task counts, by name, as many as fit `budget` JSON characters (at least
    LIST_SESSIONS_MIN_CHARS' worth): 300 sessions made a `list(limit=5)` reply of 35,775 characters.
    A long cwd shows its end."""
    rows: list[dict[str, Any]] = []
    left = max(budget, LIST_SESSIONS_MIN_CHARS)
    for state, count in sessions:
        cwd = state.cwd
        if cwd is not None and len(cwd) > SESSION_CWD_CHARS:
            cwd = "…" + cwd[1 - SESSION_CWD_CHARS :]
        row = compact([("name", state.name), ("cwd", cwd), ("tasks", count)])
        cost = len(json.dumps(row)) + 2
        if cost > left:
            break
        rows.append(row)
        left -= cost
    return rows
