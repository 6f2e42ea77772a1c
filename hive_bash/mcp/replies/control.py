"""The kill and write replies (dicts the tools render): what was sent, and how to see its effect."""

from __future__ import annotations

from typing import Any

from hive_bash.core import KillAction, TaskView
from hive_bash.mcp.limits import FOLLOW_UP
from hive_bash.mcp.replies.render import counted, in_schema_order
from hive_bash.mcp.replies.schema import KillResult, WriteResult


def killed(task: TaskView, action: KillAction) -> dict[str, Any]:
    if action == "cancelled":
        head = f"task {task.id} cancelled before it started"
    else:
        follow = f"status(id='{task.id}', wait_seconds={FOLLOW_UP})"
        head = f"{action} sent to task {task.id}'s process group; {follow} shows the end"
    values = {"verdict": head, "id": task.id, "status": task.status.value, "action": action}
    return in_schema_order(KillResult, values)


def written(task: TaskView, *, accepted: int, out_offset: int, eof: bool) -> dict[str, Any]:
    task_id, queued = task.id, task.queued_input_bytes
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
