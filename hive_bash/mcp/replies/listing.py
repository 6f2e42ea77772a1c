"""The list reply: newest first, one row per task keyed by id, then the shell sessions."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hive_bash.core import SessionState, TaskView, json_chars, shorten, shorten_middle
from hive_bash.model import Status
from hive_bash.mcp.replies.render import compact, in_schema_order, took_words, usage_words
from hive_bash.mcp.replies.schema import TaskList

LIST_ROW_CHARS = 72  # one `list` row, id included: 50 rows stay under 4,000 characters
LIST_CMD_MIN_CHARS = 20
LIST_USAGE_CMD_MIN_CHARS = 12  # a row showing its cost may cut its cmd shorter, never its length
LIST_ADDRESS_MIN_CHARS = 12  # a row's first address is cut (in the middle) to fit the row, not below this
# A whole `list` reply; the sessions after the task rows get what is left, at least the minimum
# (50 full rows use most of it), and a count of those left out. The `listening` addresses get
# what is left before that minimum, none when the rows take it all (each row names its first).
LIST_BUDGET = 4000
LIST_SESSIONS_MIN_CHARS = 600
SESSION_CWD_CHARS = 120


def listing(
    rows: Sequence[TaskView],
    *,
    total: int,
    known: int,
    status: Status | None,
    sessions: Sequence[tuple[SessionState, int]] = (),
) -> dict[str, Any]:
    """`list`: the first tasks (`rows`) of `total` matching, newest first, then the shell sessions with their
    task counts; `known` says what exists when none match."""
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
    tasks = {task.id: list_row(task) for task in rows}
    values: dict[str, Any] = {"verdict": head, "tasks": tasks, "total": total}
    least_sessions = len(json.dumps(session_rows(sessions, 0))) + 14 if sessions else 0  # `"sessions": ` too
    listening, left_out = addresses(rows, LIST_BUDGET - model_chars(compact(values.items())) - least_sessions)
    values = {**values, "listening": listening, "more_listening": left_out or None}
    excess = model_chars(compact(values.items())) - LIST_BUDGET
    if excess > 0:  # 50 full rows and the count of addresses left out: the commands give way
        chars = LIST_ROW_CHARS - -(-excess // len(rows))
        values["tasks"] = {task.id: list_row(task, chars) for task in rows}
    shells = session_rows(sessions, LIST_BUDGET - len(json.dumps(compact(values.items()))))
    return in_schema_order(
        TaskList, {**values, "sessions": shells, "more_sessions": (len(sessions) - len(shells)) or None}
    )


def model_chars(value: Any) -> int:
    """What `value` costs as a model reads it: Claude Code's JSON.stringify."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def addresses(rows: Sequence[TaskView], budget: int) -> tuple[dict[str, list[str]], int]:
    """The running tasks' addresses, in row order, as far as they fit `budget` JSON characters (the key
    and the count of those left out included), and that count: 50 tasks of 16 made 98,107 characters."""
    listening: dict[str, list[str]] = {}
    left, left_out = budget - len('"listening":{},"more_listening":8000,'), 0
    for task in rows:
        if task.status.is_terminal:
            continue
        for address in task.listening:
            cost = json_chars(address) + 3 + (0 if task.id in listening else json_chars(task.id) + 6)
            if left_out or cost > left:
                left_out += 1
                continue
            listening.setdefault(task.id, []).append(address)
            left -= cost
    return listening, left_out


def list_row(record: TaskView, chars: int = LIST_ROW_CHARS) -> str:
    """`done, exit 0 after 1.2s: make test`, shortened so the row with its id fits `chars`."""
    words = took_words(record)
    if record.waiting_for_input and not record.status.is_terminal:
        words += ", waits for input"
    session = f" [{record.session}]" if record.session is not None else ""
    if record.listening and not record.status.is_terminal:  # all of them under the reply's `listening`
        more = f" +{len(record.listening) - 1}" if len(record.listening) > 1 else ""
        room = chars - len(record.id) - len(words) - len(more + session) - LIST_CMD_MIN_CHARS - 7
        words += f", on {shorten_middle(record.listening[0], max(room, LIST_ADDRESS_MIN_CHARS))}{more}"
    words += session
    usage = usage_words(record.cpu_secs, record.max_rss_bytes)
    cmd_min = LIST_CMD_MIN_CHARS
    # the cost only where the row still fits LIST_ROW_CHARS with a recognisable command
    if usage and chars - len(record.id) - len(words) - len(usage) - 5 >= LIST_USAGE_CMD_MIN_CHARS:
        words += f" ({usage})"
        cmd_min = LIST_USAGE_CMD_MIN_CHARS
    room = max(cmd_min, chars - len(record.id) - len(words) - 2)
    return f"{words}: {shorten(record.cmd, room)}"


def session_rows(sessions: Sequence[tuple[SessionState, int]], budget: int) -> list[dict[str, Any]]:
    """The sessions with their task counts, as many as fit `budget` JSON characters (at least LIST_SESSIONS_MIN_CHARS;
    300 sessions made a `list(limit=5)` of 35,775 characters); a long cwd shows its end."""
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
