"""The kill and write replies: what was sent, and how to see its effect."""

from __future__ import annotations

from typing import Any

from mcp.types import CallToolResult

from hive_bash.core import KillAction, TaskView
from hive_bash.mcp.limits import FOLLOW_UP
from hive_bash.mcp.replies.render import counted, in_schema_order, reply
from hive_bash.mcp.replies.schema import KillResult, WriteResult
from hive_bash.model import Status


def kill_reply(task: TaskView, action: KillAction) -> CallToolResult:
    return reply(killed(task.id, task.status, action))


def killed(task_id: str, status: Status, action: str) -> dict[str, Any]:
    quoted = f"id='{task_id}'"
    if action == "cancelled":
        head = f"task {task_id} cancelled before it started"
    else:
        head = (
            f"{action} sent to task {task_id}'s process group; status({quoted}, wait_seconds={FOLLOW_UP}) shows the end"
        )
    return in_schema_order(KillResult, {"verdict": head, "id": task_id, "status": status.value, "action": action})


def write_reply(task: TaskView, *, accepted: int, out_offset: int, eof: bool) -> CallToolResult:
    return reply(written(task.id, accepted=accepted, out_offset=out_offset, queued=task.queued_input_bytes, eof=eof))


def written(task_id: str, *, accepted: int, out_offset: int, queued: int, eof: bool) -> dict[str, Any]:
    head = f"{counted(accepted, 'byte')} sent to task {task_id}"
    if eof:
        head += " and input closed"
    if queued:
        head += f" ({counted(queued, 'byte')} still wait for the task to read them)"
    head += f"; follow with logs(id='{task_id}', offset={out_offset}, wait_seconds={FOLLOW_UP})"
    return in_schema_order(
        WriteResult,
        {
            "verdict": head,
            "id": task_id,
            "bytes_accepted": accepted,
            "out_offset": out_offset,
            "queued_bytes": queued or None,
            "eof_sent": eof,
        },
    )
